"""Limb-list fields: the /tmp/curve_api.md field interface on Python lists of per-limb arrays.

The curve formulas of :mod:`cuzk_jax.ops.curve` are written once against a "field object". This module provides
field objects whose elements are **Python lists of limb arrays** instead of one stacked ``(L, *batch)`` array, so
the same formulas run

* inside Pallas kernels, where a kernel loads each limb row as its own 1-D vector (Triton only handles tensors of
  power-of-two shape, and 12 limbs is not one), and
* in plain XLA, where working on limb lists avoids the stack/slice pair that the array API puts around every
  field operation.

Representation (the invariant of every element here):

* :class:`LimbField` (Fq or Fr): a list of ``L`` arrays of one shared batch shape and dtype ``uint64``; each holds a
  32-bit word (``< 2^32``), little-endian (``a[0]`` is the least significant limb). The value is in
  **Montgomery form** (``v * 2^(32 L) mod p``) and **fully reduced** (``< p``) -- the same value as the
  ``(L, *batch)`` uint32 arrays of :mod:`cuzk_jax.ops.field`, just split by limb and widened.
* :class:`LimbFq2`: a pair ``(c0, c1)`` of :class:`LimbField` elements meaning ``c0 + c1 u`` with ``u^2 = -1``.
* Boolean results (``eq``, ``is_zero``) are bool arrays of the batch shape; ``select`` masks broadcast to it.

uint64 words are used so that the 32x32 -> 64-bit partial products of CIOS need no casts; callers hold 64-bit
types enabled (``jax.enable_x64`` / :func:`cuzk_jax.ops.field.x64`) while building programs with these fields.

Arithmetic is the limb code of :mod:`cuzk_jax.ops.field` (the no-carry Montgomery CIOS step -- Koc, Acar and
Kaliski 1996, in gnark-crypto's form -- ``add_limbs``, ``sub_limbs``, ``cond_sub_limbs``), so every layer computes
bit-identical results. The outer CIOS loop is a ``lax.fori_loop`` (the rolled schedule: L times smaller program);
``mul_many`` computes independent products in turn (Triton wants no extra non-power-of-two tensor axis). Users: the
NTT kernel under the interpreter (:mod:`cuzk_jax.ops.pallas.ntt`); :class:`LimbLists` and :func:`product_loop` are
shared with the PTX fields of :mod:`cuzk_jax.ops.pallas.ptx_field`; :class:`ArrayField` / :class:`ArrayFq2` are the
MSM kernels' fields in interpret mode.

Helpers :func:`to_limbs` / :func:`from_limbs` convert between the array layout of :mod:`cuzk_jax.ops.field`
(``(L, *batch)`` / ``(2, L, *batch)`` uint32) and these lists.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
from jax import lax

from cuzk_jax.ops import field as ops_field
from cuzk_jax.ops.field import MASK32, add_limbs, cios_step, cond_sub_limbs, mul_small_by_additions, sub_limbs

U64 = jnp.uint64


class LimbLists:
    """The operations every limb-list prime field shares, whatever its limb dtype or arithmetic: construction,
    comparison, selection and small multiples. Subclasses set ``base``, ``limbs``, ``one_limbs`` and provide
    ``add`` / ``sub`` / ``mul`` (:class:`LimbField`, :class:`cuzk_jax.ops.pallas.ptx_field.PtxField`)."""

    # -- construction --------------------------------------------------------------------------------------------
    def zeros_like(self, a):
        z = jnp.zeros_like(a[0])
        return [z] * self.limbs

    def ones_like(self, a):
        return [jnp.full_like(a[0], v) for v in self.one_limbs]

    def constant_like(self, value: int, a):
        """Montgomery form of the canonical int ``value``, shaped like ``a``."""
        m = (value % self.base.modulus) * self.base.r_mod % self.base.modulus
        return [jnp.full_like(a[0], v) for v in ops_field.int_to_limbs(m, self.limbs)]

    def square(self, a):
        return self.mul(a, a)

    def mul_small(self, a, k: int):
        """``k a`` for a small static int ``k`` by double-and-add (no multiplication)."""
        return mul_small_by_additions(self, a, k)

    # -- comparisons and selection -------------------------------------------------------------------------------
    def is_zero(self, a):
        acc = a[0]
        for x in a[1:]:
            acc = acc | x
        return acc == 0

    def eq(self, a, b):
        acc = a[0] ^ b[0]
        for x, y in zip(a[1:], b[1:]):
            acc = acc | (x ^ y)
        return acc == 0

    def select(self, mask, a, b):
        return [jnp.where(mask, x, y) for x, y in zip(a, b)]


class LimbField(LimbLists):
    """A prime field (Fq or Fr) on limb lists (see the module docstring for the representation), rolled CIOS.

    ``base`` is the :class:`cuzk_jax.ops.field.PrimeField` whose modulus / Montgomery constants are used.
    """

    dtype = U64  # of every limb array

    def __init__(self, base: ops_field.PrimeField):
        self.base = base
        self.name = base.name
        self.limbs = base.limbs
        self.p_limbs = base.p_limbs
        self.pinv = base.pinv
        self.one_limbs = tuple(ops_field.int_to_limbs(base.r_mod, base.limbs))  # Montgomery form of 1

    def __repr__(self) -> str:
        return f"LimbField({self.name})"

    # -- ring operations -----------------------------------------------------------------------------------------
    def add(self, a, b):
        return add_limbs(a, b, self.p_limbs)

    def sub(self, a, b):
        return sub_limbs(a, b, self.p_limbs)

    def neg(self, a):
        return sub_limbs(self.zeros_like(a), a, self.p_limbs)

    def double(self, a):
        return add_limbs(a, a, self.p_limbs)

    def mul(self, a, b):
        """Montgomery product ``a b / R mod p`` (fully reduced). The outer CIOS loop is a ``lax.fori_loop``;
        ``b``'s limbs ride in the loop carry and rotate by one each iteration, so iteration ``i`` reads ``b[i]`` as
        the carry's first limb -- no dynamic indexing and no stacked (non-power-of-two) tensor, so the same code
        lowers to Triton."""
        n = self.limbs
        shape = jnp.broadcast_shapes(*[x.shape for x in a], *[x.shape for x in b])
        a = [jnp.broadcast_to(x, shape) for x in a]
        b = [jnp.broadcast_to(x, shape) for x in b]

        def body(_, carry):
            t, bq = carry
            t = cios_step(list(t), a, bq[0], self.p_limbs, self.pinv)
            return tuple(t), tuple(bq[1:]) + (bq[0],)

        t0 = tuple(jnp.zeros(shape, a[0].dtype) for _ in range(n))
        t, _ = lax.fori_loop(0, n, body, (t0, tuple(b)))
        return cond_sub_limbs(list(t), self.p_limbs)

    def mul_many(self, pairs):
        """Independent products, in turn."""
        return [self.mul(x, y) for x, y in pairs]


def product_loop(field, pairs, product):
    """``[product(x, y) for x, y in pairs]`` with ONE ``product`` in the program: a ``lax.fori_loop`` over the
    pairs whose body picks pair ``j`` by a select chain (``field.select``) and stores its product into slot ``j``
    by selects. Elements take the structure of the first operand (limb list, or pair of limb lists for Fq2) with
    every limb broadcast to one shape, so the loop carry keeps one structure."""
    k = len(pairs)
    tdef = jax.tree_util.tree_structure(pairs[0][0])
    shape = jnp.broadcast_shapes(*[v.shape for pr in pairs for v in jax.tree_util.tree_leaves(pr)])

    def norm(x):
        return tdef.unflatten([v if v.shape == shape else jnp.broadcast_to(v, shape)
                               for v in jax.tree_util.tree_leaves(x)])

    xs = [norm(x) for x, _ in pairs]
    ys = [norm(y) for _, y in pairs]

    def body(j, outs):
        a, b = xs[0], ys[0]
        for i in range(1, k):
            a = norm(field.select(j == i, xs[i], a))
            b = norm(field.select(j == i, ys[i], b))
        prod = norm(product(a, b))
        return tuple(norm(field.select(j == i, prod, o)) for i, o in enumerate(outs))

    zero = norm(jax.tree_util.tree_map(lambda v: jnp.zeros(shape, v.dtype), xs[0]))
    return list(lax.fori_loop(0, k, body, (zero,) * k))


class LimbFq2:
    """Fq2 = Fq[u]/(u^2 + 1) on pairs ``(c0, c1)`` of :class:`LimbField` elements.

    Multiplication is Karatsuba (3 base products); ``mul_many`` gathers the base products of all pairs into one
    base-field ``mul_many`` call.
    """

    name = "fq2"

    def __init__(self, base):
        self.base = base
        self.limbs = base.limbs

    def __repr__(self) -> str:
        return f"LimbFq2({self.base!r})"

    @property
    def dtype(self):
        return self.base.dtype

    def zeros_like(self, a):
        z = self.base.zeros_like(a[0])
        return (z, z)

    def ones_like(self, a):
        return (self.base.ones_like(a[0]), self.base.zeros_like(a[0]))

    def constant_like(self, value, a):
        c0, c1 = value
        return (self.base.constant_like(c0, a[0]), self.base.constant_like(c1, a[0]))

    def add(self, a, b):
        f = self.base
        return (f.add(a[0], b[0]), f.add(a[1], b[1]))

    def sub(self, a, b):
        f = self.base
        return (f.sub(a[0], b[0]), f.sub(a[1], b[1]))

    def neg(self, a):
        f = self.base
        return (f.neg(a[0]), f.neg(a[1]))

    def double(self, a):
        f = self.base
        return (f.double(a[0]), f.double(a[1]))

    def mul_many(self, pairs):
        f = self.base
        pairs = list(pairs)
        base_pairs = []
        for a, b in pairs:
            # Karatsuba: v0 = a0 b0, v1 = a1 b1, v2 = (a0 + a1)(b0 + b1)
            base_pairs += [(a[0], b[0]), (a[1], b[1]), (f.add(a[0], a[1]), f.add(b[0], b[1]))]
        prods = f.mul_many(base_pairs)
        out = []
        for j in range(len(pairs)):
            v0, v1, v2 = prods[3 * j : 3 * j + 3]
            out.append((f.sub(v0, v1), f.sub(f.sub(v2, v0), v1)))
        return out

    def mul(self, a, b):
        return self.mul_many([(a, b)])[0]

    def square(self, a):
        return self.mul(a, a)

    def mul_small(self, a, k: int):
        f = self.base
        return (f.mul_small(a[0], k), f.mul_small(a[1], k))

    def is_zero(self, a):
        return self.base.is_zero(a[0]) & self.base.is_zero(a[1])

    def eq(self, a, b):
        return self.base.eq(a[0], b[0]) & self.base.eq(a[1], b[1])

    def select(self, mask, a, b):
        f = self.base
        return (f.select(mask, a[0], b[0]), f.select(mask, a[1], b[1]))


class ArrayField:
    """A prime field on ``(L, *batch)`` uint32 arrays (the :mod:`cuzk_jax.ops.field` layout and values) whose
    operations create no array constants, so they can run inside a Pallas kernel body in interpret mode (Pallas
    rejects kernels that capture constant arrays).

    ``add``/``sub`` are one ``lax.scan`` over the limbs (the "rolled" carry chain, as ``ops.field``'s rolled
    schedule, with the modulus limb picked by a select chain instead of a constant array); products are
    a rolled CIOS of the same kind, stacked by ``mul_many`` into one call per round.
    """

    def __init__(self, base: ops_field.PrimeField):
        self.base = base
        self.name = base.name
        self.limbs = base.limbs
        self.p_limbs = base.p_limbs
        self.one_limbs = tuple(ops_field.int_to_limbs(base.r_mod, base.limbs))

    def __repr__(self) -> str:
        return f"ArrayField({self.name})"

    def _limb_const(self, values, j):
        out = jnp.uint64(values[0])
        for l in range(1, len(values)):
            out = jnp.where(j == l, jnp.uint64(values[l]), out)
        return out

    def _addsub(self, a, b, subtract: bool):
        a, b = jnp.broadcast_arrays(a, b)
        a64 = a.astype(U64)
        b64 = b.astype(U64)

        def body(carry, xs):
            c1, c2, j = carry
            x, y = xs
            pj = self._limb_const(self.p_limbs, j)
            if subtract:
                v = x - y - c1
                c1 = v >> 63
                v = v & MASK32
                w = v + pj + c2
                c2 = w >> 32
            else:
                v = x + y + c1
                c1 = v >> 32
                v = v & MASK32
                w = v - pj - c2
                c2 = w >> 63
            return (c1, c2, j + 1), (v, w & MASK32)

        zero = jnp.zeros(a.shape[1:], U64)
        (c1, c2, _), (v, w) = lax.scan(body, (zero, zero, jnp.int32(0)), (a64, b64))
        use_w = c1.astype(bool) if subtract else ~c2.astype(bool)
        return jnp.where(use_w[None], w, v).astype(jnp.uint32)

    def add(self, a, b):
        return self._addsub(a, b, False)

    def sub(self, a, b):
        return self._addsub(a, b, True)

    def neg(self, a):
        return self._addsub(jnp.zeros_like(a), a, True)

    def double(self, a):
        return self._addsub(a, a, False)

    def mul(self, a, b):
        """Montgomery CIOS with both loops rolled (a ``fori_loop`` over b's limbs around a ``lax.scan`` carry
        chain over a's limbs, then a scanned conditional subtraction): the no-carry CIOS of
        :func:`cuzk_jax.ops.field.cios_limbs`, bit for bit."""
        a, b = jnp.broadcast_arrays(a, b)
        n = self.limbs
        a64 = a.astype(U64)
        b64 = b.astype(U64)
        p_l = self.p_limbs
        pinv = self.base.pinv

        def outer(i, t):
            bi = lax.dynamic_index_in_dim(b64, i, 0, keepdims=False)
            s = t[0] + a64[0] * bi
            A = s >> 32
            t0 = s & MASK32
            m = (t0 * pinv) & MASK32
            C = (t0 + m * p_l[0]) >> 32

            def inner(carry, xs):
                A, C, j = carry
                tj, aj = xs
                s = tj + aj * bi + A
                A = s >> 32
                s2 = (s & MASK32) + m * self._limb_const(p_l, j) + C
                return (A, s2 >> 32, j + 1), s2 & MASK32

            (A, C, _), outs = lax.scan(inner, (A, C, jnp.int32(1)), (t[1:], a64[1:]))
            return jnp.concatenate([outs, (C + A)[None]], axis=0)

        t = lax.fori_loop(0, n, outer, jnp.zeros_like(a64))

        def csub(carry, x):
            borrow, j = carry
            v = x - self._limb_const(p_l, j) - borrow
            return (v >> 63, j + 1), v & MASK32

        (borrow, _), d = lax.scan(csub, (jnp.zeros(a.shape[1:], U64), jnp.int32(0)), t)
        return jnp.where(borrow.astype(bool)[None], t, d).astype(jnp.uint32)

    def square(self, a):
        return self.mul(a, a)

    def mul_many(self, pairs):
        pairs = list(pairs)
        if len(pairs) == 1:
            return [self.mul(*pairs[0])]
        ops = jnp.broadcast_arrays(*[v for pr in pairs for v in pr])
        prod = self.mul(jnp.stack(ops[0::2], axis=1), jnp.stack(ops[1::2], axis=1))
        return [prod[:, k] for k in range(len(pairs))]

    def mul_small(self, a, k: int):
        return mul_small_by_additions(self, a, k)

    def zeros_like(self, a):
        return jnp.zeros_like(a)

    def ones_like(self, a):
        return jnp.stack([jnp.full(a.shape[1:], v, jnp.uint32) for v in self.one_limbs])

    def is_zero(self, a):
        return jnp.all(a == 0, axis=0)

    def eq(self, a, b):
        return jnp.all(a == b, axis=0)

    def select(self, mask, a, b):
        return jnp.where(jnp.asarray(mask)[None], a, b)


class ArrayFq2:
    """Fq2 on ``(2, L, *batch)`` arrays over :class:`ArrayField` (constant-free; Karatsuba, one base ``mul`` per
    ``mul_many`` round)."""

    name = "fq2"

    def __init__(self, base: ArrayField):
        self.base = base
        self.limbs = base.limbs

    def _cw(self, fn, *xs):
        # componentwise on the stacked (2, L, ...) array: move limbs first so (2, *batch) is the batch
        ys = [x.swapaxes(0, 1) for x in jnp.broadcast_arrays(*xs)]
        return fn(*ys).swapaxes(0, 1)

    def add(self, a, b):
        return self._cw(self.base.add, a, b)

    def sub(self, a, b):
        return self._cw(self.base.sub, a, b)

    def neg(self, a):
        return self._cw(self.base.neg, a)

    def double(self, a):
        return self._cw(self.base.double, a)

    def mul_small(self, a, k: int):
        return self._cw(lambda x: self.base.mul_small(x, k), a)

    def mul_many(self, pairs):
        f = self.base
        pairs = list(pairs)
        base_pairs = []
        for a, b in pairs:
            a, b = jnp.broadcast_arrays(a, b)
            s = self.add(jnp.stack([a[0], b[0]]), jnp.stack([a[1], b[1]]))  # (a0 + a1, b0 + b1) in one add
            base_pairs += [(a[0], b[0]), (a[1], b[1]), (s[0], s[1])]
        prods = f.mul_many(base_pairs)
        out = []
        for j in range(len(pairs)):
            v0, v1, v2 = prods[3 * j : 3 * j + 3]
            d = self.sub(jnp.stack([v0, v2]), jnp.stack([v1, f.add(v0, v1)]))  # (v0 - v1, v2 - v0 - v1)
            out.append(d)
        return out

    def mul(self, a, b):
        return self.mul_many([(a, b)])[0]

    def square(self, a):
        return self.mul(a, a)

    def zeros_like(self, a):
        return jnp.zeros_like(a)

    def ones_like(self, a):
        one = self.base.ones_like(a[0])
        return jnp.stack([one, jnp.zeros_like(one)])

    def is_zero(self, a):
        return jnp.all(a == 0, axis=(0, 1))

    def eq(self, a, b):
        return jnp.all(a == b, axis=(0, 1))

    def select(self, mask, a, b):
        return jnp.where(jnp.asarray(mask)[None, None], a, b)


array_fq = ArrayField(ops_field.fq)
array_fq2 = ArrayFq2(array_fq)
array_fr = ArrayField(ops_field.fr)  # the interpreted twin of the elementwise PTX kernels (ops.pallas.field_mul)


# the NTT kernel's field under the interpreter, and its Fq / Fq2 twins (tests)
fq = LimbField(ops_field.fq)
fr = LimbField(ops_field.fr)
fq2 = LimbFq2(fq)


# ---------------------------------------------------------------------------------------------------------------
# Conversion between the ops.field array layout and limb lists
# ---------------------------------------------------------------------------------------------------------------


def coord_ndim(field) -> int:
    """Leading non-batch axes of a coordinate array in the ops.field layout: 1 for a prime field, 2 for Fq2."""
    return 2 if isinstance(field, (LimbFq2, ops_field.Fq2)) else 1


def to_limbs(a, field):
    """``(L, *batch)`` (or ``(2, L, *batch)`` for Fq2) uint32 array -> limb list (or pair) of uint64 arrays."""
    if coord_ndim(field) == 2:
        return (to_limbs(a[0], field.base), to_limbs(a[1], field.base))
    return [a[l].astype(U64) for l in range(a.shape[0])]


def from_limbs(x, field):
    """Inverse of :func:`to_limbs`: back to the uint32 array layout of :mod:`cuzk_jax.ops.field`."""
    if coord_ndim(field) == 2:
        return jnp.stack([from_limbs(x[0], field.base), from_limbs(x[1], field.base)])
    return jnp.stack([v.astype(jnp.uint32) for v in x])


def map_coords(fn, x, field):
    """Apply ``fn`` to every limb array of an element (list for a prime field, pair of lists for Fq2)."""
    if coord_ndim(field) == 2:
        return ([fn(v) for v in x[0]], [fn(v) for v in x[1]])
    return [fn(v) for v in x]


def flat(x, field) -> list:
    """All limb arrays of an element as one flat list (c0 limbs then c1 limbs for Fq2)."""
    if coord_ndim(field) == 2:
        return list(x[0]) + list(x[1])
    return list(x)


def unflat(vs: Sequence, field):
    """Inverse of :func:`flat`."""
    if coord_ndim(field) == 2:
        n = field.limbs
        return (list(vs[:n]), list(vs[n : 2 * n]))
    return list(vs)
