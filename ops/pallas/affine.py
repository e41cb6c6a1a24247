"""Pallas kernel: XYZZ points (the MSM kernels' bucket rows) to affine, one batched inversion per lane.

Why: the development setup's fixed-base multiplication (:func:`cuzk_jax.ops.fixed_base.mul_bucket`) ends every
call by turning its XYZZ sums into the affine points a key stores. Done in XLA with the platform's unrolled field
products, that conversion made most of the compile of the setup's program on a GPU (bench/results/RESULTS.md,
sessions 11 and 19); here it is one Triton kernel on the PTX field blocks the MSM kernels already use.

Math: an XYZZ point ``(X, Y, ZZ, ZZZ)`` (``ZZ^3 = ZZZ^2``) is the affine ``(X / ZZ, Y / ZZZ)``; with
``t = ZZ ZZZ`` and ``u = 1 / t``: ``1 / ZZ = ZZZ u`` and ``1 / ZZZ = ZZ u``. ``ZZ = 0`` is the point at infinity
(zero coordinates out, the :class:`~cuzk_jax.ops.curve.Affine` invariant). G2's ``t`` lies in Fq2: ``1 / t =
conj(t) / N(t)`` with the norm ``N(t) = t0^2 + t1^2`` in Fq, so every inversion is an Fq one.

Batching (Montgomery's trick; P. L. Montgomery, "Speeding the Pollard and elliptic curve methods of
factorization", Math. Comp. 1987): the ``N`` points are cut into ``N / run`` lanes of ``run`` points each, point
``j`` of lane ``l`` at column ``j (N / run) + l`` (so at every step the lanes of a program read adjacent columns).
Each lane walks its points once forward -- storing the prefix product of the Fq denominators ``d`` (``t``, or
``N(t)``; 1 for a point at infinity) before each point in a scratch row array -- inverts the lane's total by
Fermat (``a^(p-2)``: square and multiply over the bits of ``p - 2``, read from a small argument array -- kernels
hold no array constants -- with the multiply in a branch, the bit being the same for every lane), and walks
back: ``1 / d_j = inv * prefix_j``, ``inv *= d_j``. Every step is elementwise across lanes (no data moves between
lanes). Products per point: 9 (G1), plus ``~570 / run`` for the inversion; the run length trades that against the
lanes' parallelism (:func:`default_run`).

Field representation: as :mod:`cuzk_jax.ops.pallas.bucket` (compiled: the PTX limb-list fields; ``interpret=True``:
the constant-free array fields, CPU tests), through its ``Rep`` adapter.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from cuzk_jax.ops.field import fq as _fq
from cuzk_jax.ops.field import x64
from cuzk_jax.ops.pallas import bucket as pk

MAX_RUN = 256
MIN_RUN = 16
#: Lanes the default run length aims for (a lane's steps are sequential: fewer, longer lanes leave the GPU idle).
TARGET_LANES = 1 << 14
DEFAULT_BLOCK = 64
DEFAULT_NUM_WARPS = 2


@functools.lru_cache(maxsize=None)
def fermat_bits() -> np.ndarray:
    """The bits of ``q - 2`` (``q`` the Fq modulus), most significant first, as int32 (the kernel's exponent)."""
    e = _fq.modulus - 2
    return np.array([int(b) for b in bin(e)[2:]], np.int32)


def _one_rows(rep, block: int) -> tuple:
    """Fq's one (Montgomery) on ``block`` lanes as its 12 limb rows (the kernels' loop-carry form)."""
    return tuple(rep.base_rows(rep.B.ones_like(rep.base_elem([jnp.zeros((block,), jnp.uint32)] * 12))))


def _fermat_inverse(rep, bits_ref, total, block: int) -> tuple:
    """``total^(q - 2) = 1 / total`` per lane (Fq; 0 for 0) as 12 limb rows: square and multiply over the bits of
    ``q - 2`` in ``bits_ref`` (:func:`fermat_bits`), the multiply in a branch -- the bit is the same for every
    lane, so a zero bit costs no product."""
    B = rep.B

    def step(i, a):
        (sq,) = B.mul_many([(rep.base_elem(a), rep.base_elem(a))])
        return lax.cond(bits_ref[i] != 0, lambda: tuple(rep.base_rows(B.mul_many([(sq, total)])[0])),
                        lambda: tuple(rep.base_rows(sq)))

    return lax.fori_loop(0, bits_ref.shape[0], step, _one_rows(rep, block))


def _fq_denominator(rep, t):
    """The Fq value whose inverse gives ``t``'s: ``t`` itself (G1), its norm ``N(t) = t0^2 + t1^2`` (G2's Fq2)."""
    if not rep.g2:
        return t
    s0, s1 = rep.B.mul_many([(t[0], t[0]), (t[1], t[1])])
    return rep.B.add(s0, s1)


def _inverse_from(rep, t, inv_d):
    """``1 / t`` from ``inv_d = 1 / _fq_denominator(t)`` (G2: ``conj(t) / N(t)``)."""
    if not rep.g2:
        return inv_d
    u0, u1 = rep.B.mul_many([(t[0], inv_d), (t[1], inv_d)])
    return _fq2_elem(rep, u0, rep.B.neg(u1))


def _fq2_elem(rep, c0, c1):
    """The Fq2 element ``c0 + c1 u`` in ``rep``'s form (a pair of limb lists, or a stacked array)."""
    return (c0, c1) if rep.kind == "limb" else jnp.stack([c0, c1])


def _kernel(bits_ref, rows_ref, x_ref, y_ref, pre_ref, *, rep, block: int, run: int, lanes_total: int):
    pid = pl.program_id(0)
    lanes = pid * block + jnp.arange(block, dtype=jnp.int32)
    F, B, Lc = rep.F, rep.B, rep.Lc
    live = lanes >= 0  # every lane is live (the caller's N is a multiple of block * run)

    def denominator(j):
        """Column of step ``j``, its ZZ and ZZZ, ``t = ZZ ZZZ``, the Fq denominator and the infinity mask."""
        e = j * lanes_total + lanes
        zz = rep.elem(pk.load_rows(rows_ref, Lc, e, start=2 * Lc))
        zzz = rep.elem(pk.load_rows(rows_ref, Lc, e, start=3 * Lc))
        (t,) = F.mul_many([(zz, zzz)])
        d = _fq_denominator(rep, t)
        inf = B.is_zero(d)  # ZZ = 0 (t = 0 iff ZZ = 0 for points on the curve; N(t) = 0 iff t = 0)
        return e, zz, zzz, t, B.select(inf, B.ones_like(d), d), inf

    def forward(j, acc):
        e, _, _, _, d, _ = denominator(j)
        pk.store_rows(pre_ref, list(acc), e, live)
        (acc,) = B.mul_many([(rep.base_elem(acc), d)])
        return tuple(rep.base_rows(acc))

    # loop carries are Fq elements as their 12 limb rows
    one = _one_rows(rep, block)
    inv = _fermat_inverse(rep, bits_ref, rep.base_elem(lax.fori_loop(0, run, forward, one)), block)

    def backward(jj, inv):
        inv = rep.base_elem(inv)
        j = run - 1 - jj
        e, zz, zzz, t, d, inf = denominator(j)
        before = rep.base_elem(pk.load_rows(pre_ref, 12, e))
        inv_d, inv = B.mul_many([(inv, before), (inv, d)])  # 1 / d_j, then 1 / (d_0 .. d_(j-1))
        u = _inverse_from(rep, t, inv_d)
        izz, izzz = F.mul_many([(zzz, u), (zz, u)])
        X = rep.elem(pk.load_rows(rows_ref, Lc, e))
        Y = rep.elem(pk.load_rows(rows_ref, Lc, e, start=Lc))
        x, y = F.mul_many([(X, izz), (Y, izzz)])
        zero = F.zeros_like(x)
        pk.store_rows(x_ref, rep.rows(F.select(inf, zero, x)), e, live)
        pk.store_rows(y_ref, rep.rows(F.select(inf, zero, y)), e, live)
        return tuple(rep.base_rows(inv))

    lax.fori_loop(0, run, backward, inv)


@x64
def rows_to_affine(curve, rows, *, run: int = MAX_RUN, block: int = DEFAULT_BLOCK,
                   num_warps: int = DEFAULT_NUM_WARPS, interpret: bool = False):
    """The kernel on all ``N`` columns of ``rows`` (``N`` a multiple of ``block * run``; see :func:`to_affine`):
    the ``(Lc, N)`` x and y rows."""
    rep = pk.Rep(curve, "array" if interpret else "limb")
    Lc = rep.Lc
    n = rows.shape[1]
    lanes_total = n // run
    kernel = functools.partial(_kernel, rep=rep, block=block, run=run, lanes_total=lanes_total)
    bits = jnp.asarray(fermat_bits())
    x, y, _ = pl.pallas_call(
        kernel,
        out_shape=(jax.ShapeDtypeStruct((Lc, n), jnp.uint32), jax.ShapeDtypeStruct((Lc, n), jnp.uint32),
                   jax.ShapeDtypeStruct((12, n), jnp.uint32)),
        grid=(lanes_total // block,),
        in_specs=[pk.full_spec(bits.shape), pk.full_spec(rows.shape)],
        out_specs=[pk.ANY_SPEC, pk.ANY_SPEC, pk.ANY_SPEC],
        interpret=interpret,
        compiler_params=pk.compiler_params(num_warps, interpret),
    )(bits, rows)
    return x, y


def default_run(count: int, block: int = DEFAULT_BLOCK) -> int:
    """Points per lane for ``count`` points: about ``count / TARGET_LANES``, a power of two in ``[MIN_RUN,
    MAX_RUN]`` (each lane's Fermat inversion, ~570 products, is shared by its run), lowered until ``block * run``
    divides ``count`` (1 if nothing larger does)."""
    run = MIN_RUN
    while run < MAX_RUN and run * TARGET_LANES < count:
        run *= 2
    while run > 1 and count % (block * run):
        run //= 2
    return run


def to_affine(curve, rows, count: int, *, run: int | None = None, block: int = DEFAULT_BLOCK,
              num_warps: int = DEFAULT_NUM_WARPS, interpret: bool = False):
    """Columns ``0 .. count - 1`` of the XYZZ kernel rows ``rows`` (``(4 Lc, >= count)`` uint32, Montgomery form;
    :mod:`cuzk_jax.ops.pallas.bucket`'s layout: ``Lc = 12`` for G1, 24 for G2) as a
    :class:`~cuzk_jax.ops.curve.Affine` batch of ``count`` points in the ops layout (``(12, count)`` /
    ``(2, 12, count)`` coordinates, zero for the points at infinity, ``inf`` set there).

    ``count`` must be a multiple of ``block * run`` (``run``: points per lane, default :func:`default_run`; the
    setup's chunks are powers of two). ``interpret``: the Pallas
    interpreter with the array fields (CPU tests); compiled, the PTX fields (NVIDIA GPUs)."""
    from cuzk_jax.ops.curve import Affine

    Lc = 24 if curve.coord_ndim == 2 else 12
    if rows.ndim != 2 or rows.shape[0] != 4 * Lc or rows.shape[1] < count or rows.dtype != jnp.uint32:
        raise ValueError(f"to_affine: {curve.name} rows must be uint32 (4 * {Lc}, >= {count}), got "
                         f"{rows.dtype}{rows.shape}")
    if run is None:
        run = default_run(count, block)
    if count <= 0 or count % (block * run):
        raise ValueError(f"to_affine: count {count} must be a positive multiple of block * run = {block * run}")
    x, y = rows_to_affine(curve, rows[:, :count], run=run, block=block, num_warps=num_warps, interpret=interpret)
    shape = (2, 12, count) if curve.coord_ndim == 2 else (12, count)
    inf = jnp.all(rows[2 * Lc : 3 * Lc, :count] == 0, axis=0)
    return Affine(x.reshape(shape), y.reshape(shape), inf)
