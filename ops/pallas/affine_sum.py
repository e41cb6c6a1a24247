"""Pallas kernel: the sum of many affine points by rounds of batch-affine additions (one inversion per lane).

Why: the split MSM (:mod:`cuzk_jax.ops.msm_split`) sums every base whose scalar is one -- about half of a PoRep
witness query's bases, 22M-63M points per 2^27 partition -- and the order of that sum is free. Affine additions
whose inversions are shared (Montgomery's trick) cost about 7 products each (3 for the trick, ``lambda``,
``lambda^2``, ``lambda (x1 - x3)`` and ``x1^2`` for the doubling case) plus ``~570 / run`` for the lane's Fermat
inversion, against 10-11 for the XYZZ mixed addition of the bucket kernels: the batch-affine accumulation of the
ZPrize MSM winners, here where no bucket order constrains it.

Round: ``c`` points in entries ``[0, c)`` of the point array (point-major ``(N, 2 Lc)`` uint32: x limbs then y
limbs of a point in one row of 96 / 192 bytes, the layout of the MSM kernels' gathered bases; Montgomery form; the
point at infinity is all zeros -- ``(0, 0)`` lies on neither BLS12-381 curve, ``y^2 = x^3 + 4`` / ``+ 4 (1 + i)``);
``h = ceil(c / 2)``. Pair ``e < floor(c / 2)`` adds entry ``e + h`` into entry ``e``, in place (no lane reads an
entry another lane writes); for odd ``c`` entry ``h - 1`` is unpaired and stays. The next round has ``h`` points;
:func:`sum_points` loops rounds until one is left.

Per pair: ``P = (x1, y1)``, ``Q = (x2, y2)``; ``lambda = (y2 - y1) / (x2 - x1)``, or ``3 x1^2 / (2 y1)`` when
``P = Q``; ``x3 = lambda^2 - x1 - x2``, ``y3 = lambda (x1 - x3) - y1``. An operand at infinity gives the other,
``P = -Q`` gives infinity; those pairs put 1 into the trick (every case is a select, the same work for every lane).
G2: the trick runs over the Fq norms of the Fq2 denominators (``1 / d = conj(d) / N(d)``), so every inversion is an
Fq one, as in :mod:`cuzk_jax.ops.pallas.affine` (whose lane layout, scratch prefix rows and Fermat loop this
kernel shares: pair ``j L + l`` is lane ``l``'s step ``j``, ``L`` lanes in all).

Field representation: :class:`cuzk_jax.ops.pallas.bucket.Rep` (compiled: the PTX fields; ``interpret=True``: the
array fields, CPU tests).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from cuzk_jax.ops.field import x64
from cuzk_jax.ops.pallas import bucket as pk
from cuzk_jax.ops.pallas.affine import fermat_bits, fermat_inverse, fq_denominator, inverse_from, one_rows

DEFAULT_RUN = 256
DEFAULT_BLOCK = 64
DEFAULT_NUM_WARPS = 2


def _kernel(bits_ref, prm_ref, pin_ref, pout_ref, pre_ref, *, rep, block: int, lanes_total: int):
    pid = pl.program_id(0)
    pairs, half, steps = prm_ref[0], prm_ref[1], prm_ref[2]

    @pl.when(pid * block < pairs)  # a program whose lanes hold no pair (the late rounds) returns at once
    def _():
        _round(bits_ref, pin_ref, pout_ref, pre_ref, pid * block + jnp.arange(block, dtype=jnp.int32), pairs, half,
               steps, rep=rep, block=block, lanes_total=lanes_total)


def _round(bits_ref, pin_ref, pout_ref, pre_ref, lane, pairs, half, steps, *, rep, block: int, lanes_total: int):
    F, B, Lc = rep.F, rep.B, rep.Lc

    def operands(j, with_num: bool):
        """Pair ``j L + l``: its entry, liveness, both points, the case masks, the denominator and its Fq form
        (G2: the norm) and, ``with_num`` (the backward walk), the numerator."""
        e = j * lanes_total + lane
        live = e < pairs
        at = jnp.where(live, e, 0)
        x1 = rep.elem(pk.load_rows(pin_ref, Lc, at, major="point"))
        y1 = rep.elem(pk.load_rows(pin_ref, Lc, at, major="point", start=Lc))
        x2 = rep.elem(pk.load_rows(pin_ref, Lc, at + half, major="point"))
        y2 = rep.elem(pk.load_rows(pin_ref, Lc, at + half, major="point", start=Lc))
        pinf = F.is_zero(x1) & F.is_zero(y1)
        qinf = F.is_zero(x2) & F.is_zero(y2)
        same_x = F.is_zero(F.sub(x2, x1))
        dbl = same_x & F.is_zero(F.sub(y2, y1)) & ~pinf
        trivial = pinf | qinf | (same_x & ~dbl) | ~live  # the other operand, or infinity: no inversion
        den = F.select(dbl, F.double(y1), F.sub(x2, x1))
        d = fq_denominator(rep, den)
        d = B.select(trivial, B.ones_like(d), d)
        num = None
        if with_num:
            (xx,) = F.mul_many([(x1, x1)])
            num = F.select(dbl, F.mul_small(xx, 3), F.sub(y2, y1))
        return e, live, x1, y1, x2, y2, pinf, qinf, trivial, num, den, d

    def forward(j, acc):
        e, live, *_, d = operands(j, False)
        pk.store_rows(pre_ref, list(acc), e, live)
        (acc,) = B.mul_many([(rep.base_elem(acc), d)])
        return tuple(rep.base_rows(acc))

    total = rep.base_elem(lax.fori_loop(0, steps, forward, one_rows(rep, block)))
    inv = fermat_inverse(rep, bits_ref, total, block)

    def backward(jj, inv):
        inv = rep.base_elem(inv)
        e, live, x1, y1, x2, y2, pinf, qinf, trivial, num, den, d = operands(steps - 1 - jj, True)
        before = rep.base_elem(pk.load_rows(pre_ref, 12, jnp.where(live, e, 0)))
        inv_d, inv = B.mul_many([(inv, before), (inv, d)])  # 1 / d_j, then 1 / (d_0 .. d_(j-1))
        (lam,) = F.mul_many([(num, inverse_from(rep, den, inv_d))])
        (ll,) = F.mul_many([(lam, lam)])
        x3 = F.sub(F.sub(ll, x1), x2)
        (t,) = F.mul_many([(lam, F.sub(x1, x3))])
        y3 = F.sub(t, y1)
        zero = F.zeros_like(x3)
        cancel = trivial & ~pinf & ~qinf  # P = -Q (a dead lane writes nothing)
        x = F.select(pinf, x2, F.select(qinf, x1, F.select(cancel, zero, x3)))
        y = F.select(pinf, y2, F.select(qinf, y1, F.select(cancel, zero, y3)))
        # a dead lane's entry is its own (e >= pairs: no live lane writes it; the interpreter's masked scatter
        # writes the old value back)
        pk.store_rows(pout_ref, rep.rows(x) + rep.rows(y), e, live, major="point")
        return tuple(rep.base_rows(inv))

    lax.fori_loop(0, steps, backward, inv)


@x64
def pair_round(curve, rows, count, *, run: int = DEFAULT_RUN, block: int = DEFAULT_BLOCK,
               num_warps: int = DEFAULT_NUM_WARPS, interpret: bool = False):
    """One round on the point array ``rows`` (``(N, 2 Lc)`` uint32, ``N`` a multiple of ``2 block run``): the
    ``count`` points in entries ``[0, count)`` (a traced int32) become ``ceil(count / 2)`` in entries
    ``[0, ceil(count / 2))`` (see the module docstring); the array comes back updated in place."""
    rep = pk.Rep(curve, "array" if interpret else "limb")
    n = rows.shape[0]
    if n % (2 * block * run):
        raise ValueError(f"pair_round: {n} points are not a multiple of 2 * block * run = {2 * block * run}")
    lanes_total = n // (2 * run)
    count = jnp.asarray(count, jnp.int32)
    pairs, half = count // 2, (count + 1) // 2
    prm = jnp.stack([pairs, half, (pairs + lanes_total - 1) // lanes_total])
    bits = jnp.asarray(fermat_bits())
    kernel = functools.partial(_kernel, rep=rep, block=block, lanes_total=lanes_total)
    out, _ = pl.pallas_call(
        kernel,
        out_shape=(jax.ShapeDtypeStruct(rows.shape, jnp.uint32), jax.ShapeDtypeStruct((12, n // 2), jnp.uint32)),
        grid=(lanes_total // block,),
        in_specs=[pk.full_spec(bits.shape), pk.full_spec(prm.shape), pk.ANY_SPEC],
        out_specs=[pk.ANY_SPEC, pk.ANY_SPEC],
        input_output_aliases={2: 0},
        interpret=interpret,
        compiler_params=pk.compiler_params(num_warps, interpret),
    )(bits, prm, rows)
    return out


def sum_points(curve, rows, count, **kw):
    """The sum of the ``count`` affine points in entries ``[0, count)`` of ``rows`` (:func:`pair_round`'s layout;
    zero entries are points at infinity): rounds until one point is left, in a ``lax.while_loop`` over one
    compiled kernel. Returns its ``(x, y)`` as ``(Lc,)`` limbs (all zero: the point at infinity)."""
    Lc = rows.shape[1] // 2

    def body(carry):
        c, rows = carry
        return (c + 1) // 2, pair_round(curve, rows, c, **kw)

    _, rows = lax.while_loop(lambda carry: carry[0] > 1, body, (jnp.asarray(count, jnp.int32), rows))
    return rows[0, :Lc], rows[0, Lc:]
