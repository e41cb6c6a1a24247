"""Prime-field and Fq2 arithmetic on limb arrays: jit/vmap friendly XLA programs.

Representation (the invariant every function here keeps):

* A prime-field element is a ``uint32`` array of shape ``(L, *batch)`` -- **limb-major**: limb ``l`` of every
  element is the contiguous plane ``a[l]``; limbs are little-endian 32-bit words. Fq has ``L = 12``, Fr ``L = 8``.
* Values are in **Montgomery form** ``a * 2^(32 L) mod p`` and **fully reduced** (the integer is ``< p``).
* An Fq2 element ``c0 + c1 u`` (``u^2 = -1``) is a ``uint32`` array ``(2, 12, *batch)``: ``x[0]`` is c0.
* Booleans (``eq``, ``is_zero``) have shape ``batch``; masks for :func:`select` broadcast against ``batch``.

Limb-major was measured fastest for XLA on an H200 (DESIGN.md, "Representation"). Since batch axes are
trailing, ``jax.vmap`` over a batch axis uses ``in_axes=1`` (or ``2`` for Fq2); every op also broadcasts over any
batch shape directly, which is usually simpler.

Argument checks: every public method of :class:`PrimeField` / :class:`Fq2` checks that each field-element argument
is a ``uint32`` array whose leading axes are the limb axes (``(L,)``, or ``(2, 12)`` for Fq2), eagerly and when
traced (dtype and shape are static, so the checks cost nothing at run time), and raises one
:class:`~cuzk_jax.errors.BadInput` naming the method, the expected dtype and limb shape, and what it got (an int32,
uint64 or float array would otherwise give a wrong answer without an error). The Pallas kernels compute with their
own limb-list fields (``ops/pallas/limb_field.py``), not these methods; the module-level limb helpers below
(``cios_limbs``, ``add_limbs``...) take limb lists and are not checked.

64-bit partial products need 64-bit dtypes: every public function enters a ``jax.enable_x64(True)`` scope itself,
so callers need not change global JAX configuration (it also works inside a caller's jit trace).

Multiplication is Montgomery CIOS (Koc, Acar, Kaliski, "Analyzing and comparing Montgomery multiplication
algorithms", IEEE Micro 1996) in the "no-carry" form used by gnark-crypto, valid because the top limb of both
BLS12-381 moduli is below ``2^31 - 1``. Two schedules compute the same function:

* ``unrolled``: the whole L x L product is straight-line code (fast at run time; ~L^2 HLO ops, slow to compile);
* ``rolled``: the outer CIOS loop is a ``lax.fori_loop`` (L times smaller program; used on CPU where compile time
  dominates).

The schedule is a property of the field object, fixed at construction: :data:`fq`, :data:`fr`, :data:`fq2` use the
platform's default (:func:`cuzk_jax.ops.config.default_schedule`: ``rolled`` on CPU, ``unrolled`` on GPU/TPU, a
function of the platform only); ``fq.with_schedule("rolled")`` (also :data:`fq_rolled`, :data:`fr_rolled`,
:data:`fq2_rolled`) is the same field with a fixed schedule.
"""

from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from cuzk_jax.errors import BadInput
from cuzk_jax.reference import field as ref_field

from . import config as ops_config

MASK32 = 0xFFFFFFFF
SCHEDULES = ("unrolled", "rolled", "platform")


def x64(fn):
    """Run ``fn`` with 64-bit types enabled (scoped; never flips the global configuration)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with jax.enable_x64(True):
            return fn(*args, **kwargs)

    return wrapper


def _describe(x) -> str:
    dtype, shape = getattr(x, "dtype", None), getattr(x, "shape", None)
    if dtype is None or shape is None:
        return f"a {type(x).__name__}"
    return f"a {np.dtype(dtype).name} array of shape {tuple(shape)}"


def check_limbs(where: str, x, lead: tuple, what: str = "field elements") -> None:
    """Raise :class:`~cuzk_jax.errors.BadInput` unless ``x`` is a ``uint32`` array whose shape starts with ``lead``
    (the limb axes). Only static properties are read, so it is free under ``jit``."""
    dtype, shape = getattr(x, "dtype", None), getattr(x, "shape", None)
    ok = dtype is not None and shape is not None and len(shape) >= len(lead) and tuple(shape[:len(lead)]) == lead
    if ok:
        try:
            ok = np.dtype(dtype) == np.uint32
        except TypeError:
            ok = False
    if not ok:
        dims = ", ".join(str(d) for d in lead)
        raise BadInput(f"{where}: expected {what} as a uint32 array of shape ({dims}, *batch) (limb-major, "
                       f"{lead[-1]} x 32-bit limbs), got {_describe(x)}")


def _checked(*names: str):
    """Decorator for a field method: check the arguments called ``names`` (positional or keyword) with the field's
    :meth:`_check` before running it. An argument named ``pairs`` is a sequence of ``(a, b)`` pairs."""

    def deco(fn):
        import inspect

        params = list(inspect.signature(fn).parameters)[1:]  # without self
        positions = [(params.index(n), n) for n in names]

        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            for i, n in positions:
                x = args[i] if i < len(args) else kwargs.get(n)
                if n == "pairs":
                    x = list(x)
                    if i < len(args):
                        args = args[:i] + (x,) + args[i + 1:]
                    else:
                        kwargs[n] = x
                    for k, pr in enumerate(x):
                        for v in pr:
                            self._check(f"{fn.__name__} (pair {k})", v)
                else:
                    self._check(fn.__name__, x)
            return fn(self, *args, **kwargs)

        return wrapper

    return deco


def int_to_limbs(v: int, n: int) -> list[int]:
    return [(v >> (32 * i)) & MASK32 for i in range(n)]


# ---------------------------------------------------------------------------------------------------------------
# Limb-list kernels. They take and return Python lists of uint64 arrays (one array per limb, each holding a 32-bit
# value) so that the same code serves the XLA path and the Pallas kernels (ops/pallas/field_mul.py).
# ---------------------------------------------------------------------------------------------------------------


def cios_limbs(a: Sequence, b: Sequence, p_limbs: Sequence[int], pinv: int) -> list:
    """Montgomery product a*b/R mod p on limb lists (uint64 arrays holding 32-bit words), result < p.

    No-carry CIOS (gnark-crypto): requires the top limb of p to be < 2^31 - 1 and inputs < p.
    """
    n = len(p_limbs)
    t = [jnp.zeros_like(a[0]) for _ in range(n)]
    for i in range(n):
        t = cios_step(t, a, b[i], p_limbs, pinv)
    return cond_sub_limbs(t, p_limbs)


def cios_step(t, a, bi, p_limbs, pinv):
    """One outer CIOS Montgomery iteration on limb lists: ``t = (t + a*bi + m*p) / 2^32`` (``m`` chosen so the
    division is exact; ``pinv = -p^-1 mod 2^32``); ``n`` iterations over the words ``bi`` of ``b`` give ``a b R^-1``."""
    n = len(p_limbs)
    s = t[0] + a[0] * bi
    A = s >> 32
    t0 = s & MASK32
    m = (t0 * pinv) & MASK32
    C = (t0 + m * p_limbs[0]) >> 32
    out = [None] * n
    for j in range(1, n):
        s = t[j] + a[j] * bi + A
        A = s >> 32
        s2 = (s & MASK32) + m * p_limbs[j] + C
        C = s2 >> 32
        out[j - 1] = s2 & MASK32
    out[n - 1] = C + A
    return out


def cond_sub_limbs(t: Sequence, p_limbs: Sequence[int]) -> list:
    """Return t - p if t >= p else t (t < 2p, limbs as uint64 arrays of 32-bit words)."""
    n = len(p_limbs)
    borrow = jnp.zeros_like(t[0])
    d = []
    for j in range(n):
        s = t[j] - p_limbs[j] - borrow  # wraps modulo 2^64 when negative
        borrow = s >> 63
        d.append(s & MASK32)
    keep = borrow.astype(bool)  # t < p
    return [jnp.where(keep, t[j], d[j]) for j in range(n)]


def add_limbs(a, b, p_limbs):
    n = len(p_limbs)
    carry = jnp.zeros_like(a[0])
    s = []
    for j in range(n):
        v = a[j] + b[j] + carry
        carry = v >> 32
        s.append(v & MASK32)
    # the moduli leave spare top bits, so a + b < 2p fits in L limbs
    return cond_sub_limbs(s, p_limbs)


def sub_limbs(a, b, p_limbs):
    n = len(p_limbs)
    borrow = jnp.zeros_like(a[0])
    d = []
    for j in range(n):
        v = a[j] - b[j] - borrow
        borrow = v >> 63
        d.append(v & MASK32)
    # add p back where the subtraction went negative
    carry = jnp.zeros_like(a[0])
    out = []
    for j in range(n):
        v = d[j] + p_limbs[j] * borrow + carry
        carry = v >> 32
        out.append(v & MASK32)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Array API
# ---------------------------------------------------------------------------------------------------------------


def _split(a):
    a = a.astype(jnp.uint64)
    return [a[i] for i in range(a.shape[0])]


def _join(limbs):
    return jnp.stack(limbs).astype(jnp.uint32)


def mul_small_by_additions(F, a, k: int):
    """``k a`` for a small static int ``k`` by double-and-add with the field object ``F``'s ``add``/``double``/
    ``neg``/``zeros_like`` (no multiplication). Shared by every field implementation (arrays and limb lists)."""
    if k < 0:
        return F.neg(mul_small_by_additions(F, a, -k))
    result, base = None, a
    while k:
        if k & 1:
            result = base if result is None else F.add(result, base)
        k >>= 1
        if k:
            base = F.double(base)
    return F.zeros_like(a) if result is None else result


class PrimeField:
    """Arithmetic in one prime field on limb-major Montgomery-form arrays (see the module docstring).

    Instances: :data:`fq` (BLS12-381 base field, 12 limbs) and :data:`fr` (scalar field, 8 limbs).
    """

    def __init__(self, ref: ref_field.PrimeField, schedule: str = "platform"):
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown mul schedule {schedule!r}; expected one of {SCHEDULES}")
        self.ref = ref
        self._schedule = schedule
        self._variants = {schedule: self}
        self.name = ref.name
        self.modulus = ref.modulus
        self.limbs = ref.limbs
        n = self.limbs
        self.p_limbs = tuple(int_to_limbs(ref.modulus, n))
        assert self.p_limbs[-1] < (1 << 31) - 1, "no-carry CIOS needs a spare top bit"
        self.pinv = (-pow(ref.modulus, -1, 1 << 32)) % (1 << 32)
        self.r_mod = (1 << (32 * n)) % ref.modulus  # Montgomery form of 1
        self.r2_mod = (1 << (64 * n)) % ref.modulus  # Montgomery form of R (used by to_mont)

    def __repr__(self) -> str:
        return f"ops.field.{self.name}" + ("" if self._schedule == "platform" else f"_{self._schedule}")

    def _check(self, method: str, x) -> None:
        check_limbs(f"{self!r}.{method}", x, (self.limbs,), f"{self.name} elements")

    @property
    def schedule(self) -> str:
        """``"unrolled"`` or ``"rolled"``: the construction schedule, ``"platform"`` resolved by
        :func:`cuzk_jax.ops.config.default_schedule`."""
        return ops_config.default_schedule() if self._schedule == "platform" else self._schedule

    def with_schedule(self, schedule: str) -> "PrimeField":
        """This field with multiplication / addition schedule ``schedule`` (one cached object per schedule)."""
        f = self._variants.get(schedule)
        if f is None:
            f = PrimeField(self.ref, schedule)
            f._variants = self._variants
            self._variants[schedule] = f
        return f

    # -- constants -------------------------------------------------------------------------------------------
    def constant(self, value: int, shape=()) -> jax.Array:
        """Montgomery form of the canonical int ``value`` broadcast to ``(L, *shape)``."""
        m = (value % self.modulus) * self.r_mod % self.modulus
        limbs = np.array(int_to_limbs(m, self.limbs), dtype=np.uint32).reshape((self.limbs,) + (1,) * len(shape))
        return jnp.broadcast_to(jnp.asarray(limbs), (self.limbs,) + tuple(shape))

    def zeros(self, shape=()) -> jax.Array:
        return jnp.zeros((self.limbs,) + tuple(shape), jnp.uint32)

    def ones(self, shape=()) -> jax.Array:
        return self.constant(1, shape)

    # -- ring operations ---------------------------------------------------------------------------------------
    @_checked('a', 'b')
    @x64
    def add(self, a, b):
        a, b = jnp.broadcast_arrays(a, b)
        if self.schedule == "rolled":
            return self._addsub_rolled(a, b, subtract=False)
        return _join(add_limbs(_split(a), _split(b), self.p_limbs))

    @_checked('a', 'b')
    @x64
    def sub(self, a, b):
        a, b = jnp.broadcast_arrays(a, b)
        if self.schedule == "rolled":
            return self._addsub_rolled(a, b, subtract=True)
        return _join(sub_limbs(_split(a), _split(b), self.p_limbs))

    def _addsub_rolled(self, a, b, subtract: bool):
        """add/sub as ONE ``lax.scan`` over the limbs (the "rolled" schedule; same function as add_limbs /
        sub_limbs). The unrolled carry chains compile badly on XLA:CPU -- fusion duplicates the whole chain into
        every output limb (more than ten times the instructions of this form).

        One pass computes both candidates: for add ``s = a + b`` and ``s - p`` (kept if no borrow), for sub
        ``d = a - b`` and ``d + p`` (kept if ``a < b``).
        """
        a64 = a.astype(jnp.uint64)
        b64 = b.astype(jnp.uint64)
        p = np.array(self.p_limbs, np.uint64).reshape((self.limbs,) + (1,) * (a.ndim - 1))
        p = jnp.broadcast_to(jnp.asarray(p), a.shape)

        def body(carry, xs):
            c1, c2 = carry
            x, y, pj = xs
            if subtract:
                v = x - y - c1  # wraps modulo 2^64 when negative
                c1 = v >> 63
                v &= MASK32
                w = v + pj + c2
                c2 = w >> 32
            else:
                v = x + y + c1
                c1 = v >> 32
                v &= MASK32
                w = v - pj - c2
                c2 = w >> 63
            return (c1, c2), (v, w & MASK32)

        zero = jnp.zeros(a.shape[1:], jnp.uint64)
        (c1, c2), (v, w) = lax.scan(body, (zero, zero), (a64, b64, p))
        # add: keep v = a + b when v < p (final borrow of v - p); sub: take w = d + p when a < b (final borrow)
        use_w = c1.astype(bool) if subtract else ~c2.astype(bool)
        return jnp.where(use_w[None], w, v).astype(jnp.uint32)

    @_checked('a')
    def neg(self, a):
        return self.sub(jnp.zeros_like(a), a)

    @_checked('a')
    def double(self, a):
        return self.add(a, a)

    @_checked('a', 'b')
    @x64
    def mul(self, a, b):
        """Montgomery product ``a * b / R mod p`` (so Montgomery forms multiply to the Montgomery form)."""
        a, b = jnp.broadcast_arrays(a, b)
        if self.schedule == "unrolled":
            return _join(cios_limbs(_split(a), _split(b), self.p_limbs, self.pinv))
        return self._mul_rolled(a, b)

    def _mul_rolled(self, a, b):
        """CIOS with BOTH loops rolled: the outer loop over b's limbs is a ``fori_loop`` and the inner carry
        chain over a's limbs a ``lax.scan`` (as is the final conditional subtraction). Unrolling the inner chain
        made XLA:CPU duplicate the whole carry chain into each output limb (~2500 instructions per mul); this
        form is several times smaller and compiles faster."""
        n = self.limbs
        a64 = a.astype(jnp.uint64)
        b64 = b.astype(jnp.uint64)
        p_l = self.p_limbs
        pinv = self.pinv
        pc = np.array(p_l, np.uint64).reshape((n,) + (1,) * (a.ndim - 1))
        pc = jnp.broadcast_to(jnp.asarray(pc), a.shape)

        def outer(i, t):
            bi = lax.dynamic_index_in_dim(b64, i, 0, keepdims=False)
            s = t[0] + a64[0] * bi
            A = s >> 32
            t0 = s & MASK32
            m = (t0 * pinv) & MASK32
            C = (t0 + m * p_l[0]) >> 32

            def inner(carry, xs):  # one j of cios_step
                A, C = carry
                tj, aj, pj = xs
                s = tj + aj * bi + A
                A = s >> 32
                s2 = (s & MASK32) + m * pj + C
                return (A, s2 >> 32), s2 & MASK32

            (A, C), outs = lax.scan(inner, (A, C), (t[1:], a64[1:], pc[1:]))
            return jnp.concatenate([outs, (C + A)[None]], axis=0)

        t = lax.fori_loop(0, n, outer, jnp.zeros_like(a64))

        def csub(borrow, xs):
            x, y = xs
            v = x - y - borrow  # wraps modulo 2^64 when negative
            return v >> 63, v & MASK32

        borrow, d = lax.scan(csub, jnp.zeros(a.shape[1:], jnp.uint64), (t, pc))
        return jnp.where(borrow.astype(bool)[None], t, d).astype(jnp.uint32)  # borrow <=> t < p: keep t

    @_checked('a')
    def square(self, a):
        return self.mul(a, a)

    @_checked('pairs')
    def mul_many(self, pairs):
        """Independent products ``[a0*b0, a1*b1, ...]`` computed by ONE :meth:`mul` over a stacked batch axis
        (one copy of the multiplier in the program instead of one per product). Operands broadcast together."""
        pairs = list(pairs)
        if len(pairs) == 1:
            return [self.mul(*pairs[0])]
        ops = jnp.broadcast_arrays(*[v for pr in pairs for v in pr])
        x = jnp.stack(ops[0::2], axis=1)
        y = jnp.stack(ops[1::2], axis=1)
        prod = self.mul(x, y)
        return [prod[:, k] for k in range(len(pairs))]

    @_checked('a')
    def zeros_like(self, a):
        return jnp.zeros_like(a)

    @_checked('a')
    def ones_like(self, a):
        return self.ones(a.shape[1:])

    @_checked('a')
    def mul_small(self, a, k: int):
        """Multiply by a small non-negative int constant with additions (double-and-add, k static)."""
        return mul_small_by_additions(self, a, k)

    # -- comparisons and selection -----------------------------------------------------------------------------
    @_checked('a', 'b')
    def eq(self, a, b):
        return jnp.all(a == b, axis=0)

    @_checked('a')
    def is_zero(self, a):
        return jnp.all(a == 0, axis=0)

    @_checked('a', 'b')
    def select(self, mask, a, b):
        """``where(mask, a, b)`` elementwise; ``mask`` has (or broadcasts to) the batch shape."""
        return jnp.where(jnp.asarray(mask)[None], a, b)

    # -- Montgomery conversion ---------------------------------------------------------------------------------
    @_checked('a')
    def to_mont(self, a):
        """Canonical limbs -> Montgomery form (``a * R mod p``); input limbs must encode a value < p."""
        return self.mul(a, self.constant_raw(self.r2_mod, a.shape[1:]))

    @_checked('a')
    def from_mont(self, a):
        """Montgomery form -> canonical limbs."""
        return self.mul(a, self.constant_raw(1, a.shape[1:]))

    def constant_raw(self, value: int, shape=()) -> jax.Array:
        """The limbs of ``value`` as they are (no Montgomery conversion), broadcast to ``(L, *shape)``."""
        limbs = np.array(int_to_limbs(value, self.limbs), dtype=np.uint32).reshape((self.limbs,) + (1,) * len(shape))
        return jnp.broadcast_to(jnp.asarray(limbs), (self.limbs,) + tuple(shape))

    # -- exponentiation and inversion --------------------------------------------------------------------------
    @_checked('a')
    def pow(self, a, e: int):
        """``a^e`` for a static non-negative int ``e``: left-to-right square-and-multiply as one ``lax.scan``
        whose body holds a single multiplication (the operand is chosen per step), so the program stays small."""
        if e < 0:
            raise ValueError("pow: exponent must be non-negative (use inv for negative powers)")
        if e == 0:
            return self.ones(a.shape[1:])
        ops = []  # 0 = square the accumulator, 1 = multiply it by a
        for bit in bin(e)[3:]:
            ops.append(0)
            if bit == "1":
                ops.append(1)
        if not ops:
            return a

        def body(acc, op):
            y = jnp.where(op == 1, a, acc)
            return self.mul(acc, y), None

        acc, _ = lax.scan(body, a, jnp.asarray(ops, jnp.int32))
        return acc

    @_checked('a')
    def inv(self, a):
        """Inverse by Fermat (``a^(p-2)``); maps 0 to 0."""
        return self.pow(a, self.modulus - 2)

    @_checked('a')
    def batch_inv(self, a, chunk: int = 64):
        """Inverse of every element of ``a`` with Montgomery's trick (zeros map to zeros).

        The flattened batch is viewed as ``(chunk, m)``; prefix products run down the ``chunk`` axis as a
        ``lax.scan`` (each step one multiplication over ``m`` lanes), the ``m`` totals are inverted in parallel by
        Fermat, and a reverse scan recovers each inverse -- about 3 multiplications per element plus ``m``
        exponentiations, with only ``chunk`` sequential steps.
        """
        batch = a.shape[1:]
        size = int(np.prod(batch)) if batch else 1
        flat = a.reshape(self.limbs, size)
        zero = self.is_zero(flat)
        one = self.ones((size,))
        flat = jnp.where(zero[None], one, flat)
        chunk = max(1, min(chunk, size))
        m = -(-size // chunk)
        pad = chunk * m - size
        if pad:
            flat = jnp.concatenate([flat, self.ones((pad,))], axis=1)
        x = flat.reshape(self.limbs, chunk, m).transpose(1, 0, 2)  # (chunk, L, m)

        def fwd(acc, xi):
            acc = self.mul(acc, xi)
            return acc, acc

        total, prefix = lax.scan(fwd, self.ones((m,)), x)  # prefix[k] = x0*...*xk
        inv_total = self.inv(total)
        prev = jnp.concatenate([self.ones((m,))[None], prefix[:-1]], axis=0)  # prefix[k-1]

        def bwd(acc, inp):
            xi, before = inp
            out = self.mul(acc, before)  # 1/xk = (1/(x0..xk)) * (x0..x(k-1))
            return self.mul(acc, xi), out

        _, invs = lax.scan(bwd, inv_total, (x, prev), reverse=True)
        out = invs.transpose(1, 0, 2).reshape(self.limbs, chunk * m)[:, :size]
        out = jnp.where(zero[None], jnp.zeros_like(out), out)
        return out.reshape((self.limbs,) + batch)

    @_checked('a')
    def sqrt(self, a):
        """A square root for p = 3 mod 4 (``a^((p+1)/4)``) and a mask telling whether it is one."""
        if self.modulus % 4 != 3:
            raise NotImplementedError(f"sqrt on {self.name} (p != 3 mod 4)")
        r = self.pow(a, (self.modulus + 1) // 4)
        return r, self.eq(self.square(r), a)


#: :func:`map_last_axis`'s default window (elements of the flattened batch); read at trace time, so tests may
#: lower it to run every windowed program's loop at small sizes.
WINDOW = 1 << 22


def map_last_axis(fn, *xs, chunk: int | None = None, positions: bool = False, shape=None, limbs: int | None = None):
    """An elementwise field op over limb arrays, computed in windows: ``out[:, ..., j] = fn(*(x[:, ..., j] for x in
    xs))`` for ``xs`` of shapes ``(L_k, *batch, n)`` (one batch shape; limb counts may differ), e.g.
    ``map_last_axis(fr.from_mont, x)``. ``positions=True`` passes the element's index ``j`` along the last axis
    first, ``fn(pos, *windows)`` with ``pos`` uint32 -- for position-dependent factors (twiddles, coset powers);
    with no ``xs`` the output is generated from positions alone, of batch shape ``shape``. The output has ``limbs``
    limbs (default: the first input's).

    Why: XLA materialises a field op's limb products (~0.5 KB per element) for the whole array; at a 2^27 domain one
    multiplication asked for 64 GiB of temporaries on an H200. Here ``fn`` runs over windows of ``chunk`` elements
    of the flattened ``batch x n`` axis in a ``lax.fori_loop`` and holds one window's. The last window is moved
    back to end at the last element (it recomputes a few elements: same values), so every window has one shape.
    At most ``chunk`` (default :data:`WINDOW`) elements take ``fn`` directly. Traceable (use inside jit)."""
    chunk = WINDOW if chunk is None else chunk
    if not xs and shape is None:
        raise ValueError("map_last_axis: give inputs or the output's shape")
    bshape = tuple(xs[0].shape[1:]) if xs else tuple(shape)
    if any(tuple(x.shape[1:]) != bshape for x in xs):
        raise ValueError(f"map_last_axis: inputs of different shapes {[x.shape for x in xs]}")
    last, total = bshape[-1], int(np.prod(bshape))
    if total >= 1 << 31:
        raise ValueError(f"map_last_axis: {total} elements do not fit the int32 window offsets")
    out_limbs = limbs if limbs is not None else xs[0].shape[0]
    flats = [x.reshape(x.shape[0], total) for x in xs]  # batch and element axes are adjacent: free reshapes

    def window(start, size):
        ws = [lax.dynamic_slice_in_dim(f, start, size, axis=1) for f in flats]
        if not positions:
            return fn(*ws)
        pos = start.astype(jnp.uint32) + lax.iota(jnp.uint32, size)
        return fn(pos if total == last else pos % jnp.uint32(last), *ws)

    if total <= chunk:
        out = window(jnp.int32(0), total)
    else:
        def body(i, out):
            start = jnp.minimum(i * chunk, total - chunk)
            return lax.dynamic_update_slice_in_dim(out, window(start, chunk), start, axis=1)

        dtype = xs[0].dtype if xs else jnp.uint32
        out = lax.fori_loop(0, -(-total // chunk), body, jnp.zeros((out_limbs, total), dtype))
    return out.reshape((out_limbs,) + bshape)


fq = PrimeField(ref_field.fq)
fr = PrimeField(ref_field.fr)
fq_rolled = fq.with_schedule("rolled")
fr_rolled = fr.with_schedule("rolled")


class Fq2:
    """Fq2 = Fq[u]/(u^2 + 1) on arrays ``(2, 12, *batch)`` (c0, c1), each component as :data:`fq`.

    Independent base-field products are stacked on a new batch axis and done by one ``fq.mul`` call (Karatsuba:
    3 products for a mul, 2 for a square), which keeps the compiled program small.
    """

    name = "fq2"

    def __init__(self, base: PrimeField):
        self.base = base
        self.limbs = base.limbs

    def __repr__(self) -> str:
        return "ops.field.fq2" + repr(self.base).removeprefix(f"ops.field.{self.base.name}")

    def _check(self, method: str, x) -> None:
        check_limbs(f"{self!r}.{method}", x, (2, self.limbs), "fq2 elements")

    @property
    def schedule(self) -> str:
        return self.base.schedule

    def with_schedule(self, schedule: str) -> "Fq2":
        """Fq2 over ``base.with_schedule(schedule)`` (cached, so the same object every time)."""
        base = self.base.with_schedule(schedule)
        f = _FQ2.get(id(base))
        if f is None:
            f = _FQ2[id(base)] = Fq2(base)
        return f

    def constant(self, value, shape=()):
        c0, c1 = value
        return jnp.stack([self.base.constant(c0, shape), self.base.constant(c1, shape)])

    def zeros(self, shape=()):
        return jnp.zeros((2, self.limbs) + tuple(shape), jnp.uint32)

    def ones(self, shape=()):
        return self.constant((1, 0), shape)

    # Componentwise ops: swap to (12, 2, *batch) so the component axis is a batch axis of ONE base-field op.
    @_checked('a', 'b')
    def add(self, a, b):
        a, b = jnp.broadcast_arrays(a, b)
        return self.base.add(a.swapaxes(0, 1), b.swapaxes(0, 1)).swapaxes(0, 1)

    @_checked('a', 'b')
    def sub(self, a, b):
        a, b = jnp.broadcast_arrays(a, b)
        return self.base.sub(a.swapaxes(0, 1), b.swapaxes(0, 1)).swapaxes(0, 1)

    @_checked('a')
    def neg(self, a):
        return self.base.neg(a.swapaxes(0, 1)).swapaxes(0, 1)

    @_checked('a')
    def double(self, a):
        return self.add(a, a)

    def _bmul(self, xs, ys):
        """Stacked base-field products: xs, ys lists of (12, *batch) arrays -> list of products."""
        x = jnp.stack(jnp.broadcast_arrays(*xs), axis=1)
        y = jnp.stack(jnp.broadcast_arrays(*ys), axis=1)
        prod = self.base.mul(x, y)
        return [prod[:, k] for k in range(len(xs))]

    @_checked('a', 'b')
    def mul(self, a, b):
        a, b = jnp.broadcast_arrays(a, b)
        f = self.base
        v0, v1, v2 = self._bmul([a[0], a[1], f.add(a[0], a[1])], [b[0], b[1], f.add(b[0], b[1])])
        return jnp.stack([f.sub(v0, v1), f.sub(f.sub(v2, v0), v1)])

    @_checked('a')
    def square(self, a):
        f = self.base
        # (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u
        v0, v1 = self._bmul([f.add(a[0], a[1]), a[0]], [f.sub(a[0], a[1]), a[1]])
        return jnp.stack([v0, f.double(v1)])

    @_checked('pairs')
    def mul_many(self, pairs):
        """Independent Fq2 products computed by one :meth:`mul` (hence one base-field ``mul``) over a stacked axis."""
        pairs = list(pairs)
        if len(pairs) == 1:
            return [self.mul(*pairs[0])]
        ops = jnp.broadcast_arrays(*[v for pr in pairs for v in pr])
        x = jnp.stack(ops[0::2], axis=2)
        y = jnp.stack(ops[1::2], axis=2)
        prod = self.mul(x, y)
        return [prod[:, :, k] for k in range(len(pairs))]

    @_checked('a')
    def mul_small(self, a, k: int):
        return self.base.mul_small(a.swapaxes(0, 1), k).swapaxes(0, 1)  # componentwise

    @_checked('a')
    def zeros_like(self, a):
        return jnp.zeros_like(a)

    @_checked('a')
    def ones_like(self, a):
        return self.ones(a.shape[2:])

    @_checked('a')
    def mul_by_base(self, a, k):
        """Multiply by a base-field element ``k`` (12, *batch)."""
        v0, v1 = self._bmul([a[0], a[1]], [k, k])
        return jnp.stack([v0, v1])

    @_checked('a')
    def conjugate(self, a):
        return jnp.stack([a[0], self.base.neg(a[1])])

    @_checked('a')
    def mul_by_nonresidue_plus_one(self, a):
        """Multiply by (1 + u): (a0 - a1) + (a0 + a1) u (the G2 twist constant up to the factor 4)."""
        f = self.base
        return jnp.stack([f.sub(a[0], a[1]), f.add(a[0], a[1])])

    @_checked('a', 'b')
    def eq(self, a, b):
        return jnp.all(a == b, axis=(0, 1))

    @_checked('a')
    def is_zero(self, a):
        return jnp.all(a == 0, axis=(0, 1))

    @_checked('a', 'b')
    def select(self, mask, a, b):
        return jnp.where(jnp.asarray(mask)[None, None], a, b)

    @_checked('a')
    def to_mont(self, a):
        return self.base.to_mont(a.swapaxes(0, 1)).swapaxes(0, 1)  # componentwise, limbs leading

    @_checked('a')
    def from_mont(self, a):
        return self.base.from_mont(a.swapaxes(0, 1)).swapaxes(0, 1)

    @_checked('a')
    def inv(self, a):
        """1 / (a0 + a1 u) = (a0 - a1 u) / (a0^2 + a1^2); maps 0 to 0."""
        f = self.base
        s0, s1 = self._bmul([a[0], a[1]], [a[0], a[1]])
        ninv = f.inv(f.add(s0, s1))
        r0, r1 = self._bmul([a[0], f.neg(a[1])], [ninv, ninv])
        return jnp.stack([r0, r1])

    @_checked('a')
    def batch_inv(self, a, chunk: int = 64):
        f = self.base
        s0, s1 = self._bmul([a[0], a[1]], [a[0], a[1]])
        ninv = f.batch_inv(f.add(s0, s1), chunk)
        r0, r1 = self._bmul([a[0], f.neg(a[1])], [ninv, ninv])
        return jnp.stack([r0, r1])

    @_checked('a')
    def sqrt(self, a):
        """A square root in Fq2 and a mask telling whether it is one (``(r, ok)``, as :meth:`PrimeField.sqrt`).

        Adj and Rodriguez-Henriquez, "Square root computation over even extension fields" (eprint 2012/685),
        Algorithm 9 (p = 3 mod 4), made branch-free: ``a1 = a^((p-3)/4)``, ``alpha = a1^2 a``, ``x0 = a1 a``;
        the root is ``u x0`` if ``alpha == -1``, else ``(1 + alpha)^((p-1)/2) x0``.
        """
        f = self.base
        p = f.modulus
        a1 = self.pow(a, (p - 3) // 4)
        x0 = self.mul(a1, a)
        alpha = self.mul(a1, x0)
        minus_one = self.constant((p - 1, 0), a.shape[2:])
        is_m1 = self.eq(alpha, minus_one)
        b = self.pow(self.add(alpha, self.ones(a.shape[2:])), (p - 1) // 2)
        x_other = self.mul(b, x0)
        x_u = jnp.stack([f.neg(x0[1]), x0[0]])  # u * (c0 + c1 u) = -c1 + c0 u
        r = self.select(is_m1, x_u, x_other)
        return r, self.eq(self.square(r), a)

    @_checked('a')
    def pow(self, a, e: int):
        if e < 0:
            raise ValueError("pow: exponent must be non-negative")
        if e == 0:
            return self.ones(a.shape[2:])
        ops = []
        for bit in bin(e)[3:]:
            ops.append(0)
            if bit == "1":
                ops.append(1)
        if not ops:
            return a

        def body(acc, op):
            return self.mul(acc, jnp.where(op == 1, a, acc)), None

        acc, _ = lax.scan(body, a, jnp.asarray(ops, jnp.int32))
        return acc


_FQ2: dict = {}
fq2 = Fq2(fq)
_FQ2[id(fq)] = fq2
fq2_rolled = fq2.with_schedule("rolled")

FIELDS = {"fq": fq, "fr": fr, "fq2": fq2}
