"""Multi-scalar multiplication on G1 / G2: signed-digit Pippenger with sorted bucket accumulation.

``msm(bases, scalars)`` computes ``sum_i scalars[i] * bases[i]`` for every partition of a leading batch axis.

Algorithm (the bucket method of Pippenger as used for pairing-based SNARKs; signed digits as in Bernstein, Doumen,
Lange, Oosterwijk, "Faster batch forgery identification", INDOCRYPT 2012, eprint 2012/549 -- the reference gnark
cites -- and as in sppark / supraseal):

1. **Window size** ``c`` (:func:`window_bits`): the ``c`` in 2..22 minimising ``W(c) (n + 2.5 * 2^(c-1))`` where
   ``W(c) = ceil(256 / c)`` is the number of windows and ``n`` the (padded) number of points: every window costs one
   mixed addition per point (accumulation) plus about two general additions -- 2.5 mixed ones -- per bucket
   (reduction). This gives c = 13 at n = 2^16, 14 at 2^18, 16 at 2^20, 18 at 2^22, 20 at 2^24.
2. **Signed digits** (:func:`signed_digits`): each canonical scalar ``s < r < 2^255`` is written
   ``s = sum_w d_w 2^(c w)`` with ``d_w`` in ``[-2^(c-1) + 1, 2^(c-1)]`` (a window value above ``2^(c-1)`` becomes
   ``v - 2^c`` and carries one into the next window; ``c W >= 256`` leaves room for the last carry). A digit ``d``
   sends the base, negated if ``d < 0``, to bucket ``|d| - 1`` of its window: ``H = 2^(c-1)`` buckets per window.
3. **Sort** (:func:`bucket_keys`): every (partition, window, point) with a non-zero digit becomes a pair
   (key = bucket id, value = point index | sign << 31); zero digits get the sentinel key ``NB`` (the number of
   buckets), so after one ``lax.sort`` the live pairs come first, grouped by bucket.
4. **Bucket accumulation**: the sorted list is cut into equal segments, one per lane; each lane walks its segment
   adding bases into an XYZZ accumulator (mixed additions), writes every bucket that starts and ends inside its
   segment straight to the bucket array, and hands the (at most two) runs touching its segment ends on as
   "partials"; partials are merged the same way until none are left. Work is balanced whatever the digit
   distribution (one huge bucket costs the same as many small ones). Pallas kernel or XLA (see "Implementations").
5. **Bucket reduction** by running sums: per window, ``sum_m m B_m``; rows of ``L1`` buckets are summed with the
   classic running sum (``S += B_j; T += S`` from the top), then ``T + (row offset) * S`` per row, then a sum over
   the rows of the window.
6. **Window combination**: ``sum_w 2^(c w) WS_w`` -- Horner (``c`` doublings then one addition per window, on
   ``G`` lanes after the wide machine) in the XLA path; in the Pallas path every window is scaled by ``c w``
   doublings in parallel, then the windows are summed.

The supraseal "split" (skip zero scalars, sum the bases whose scalar is one separately) falls out of step 3-4: a
zero scalar (or a base at infinity, whose scalar is zeroed) produces only sentinel pairs, which sort past the live
count and are never visited (the Pallas kernels skip whole blocks past it; the XLA step machine's accumulation runs
``ceil(count / lanes)`` steps, so its length follows the live pairs); a scalar equal to one produces exactly
one pair, in bucket (window 0, digit 1), and because accumulation splits buckets across lanes, the bases with
scalar one are summed as one balanced parallel sum -- what supraseal computes separately to avoid one overloaded
bucket -- instead of passing through every window. What it still pays for every point is the digit recoding and the
sort of ``W N`` pairs: :mod:`cuzk_jax.ops.msm_split` removes those for zero and one scalars (the split proper, with
the same pass) and streams bases from host memory when they do not fit on the device.

Shapes are static and bucketed (:func:`padded_size`): ``N`` points are padded with zero scalars to a power of two
(at least 64), so every ``N`` up to that size shares one compiled program.

Batch axis: bases are ``Affine`` with coordinates ``(12, N)`` / ``(2, 12, N)`` (shared by every partition) or
``(12, P, N)`` / ``(2, 12, P, N)`` (one base set per partition), or shared :class:`BaseRows` (the Pallas kernels'
layout, made once and read in place); scalars are canonical (NOT Montgomery) uint32 limbs
``(8, N)`` or ``(8, P, N)``. The result is a :class:`~cuzk_jax.ops.curve.Jacobian` with batch shape ``()`` or
``(P,)``. Partitions are processed together (one sort, one set of kernel launches) as long as the number of pairs
fits ``max_pairs`` (2^28 by default); beyond that, groups of partitions run in a ``lax.map`` and long point ranges
in chunks (``lax.fori_loop``, window sized for the chunk) whose results are added -- on the Pallas path their
bucket arrays are added (kernel 2's mode MERGE) and reduced once, the XLA path carries a running sum through each
chunk's reduction. A 2^24 G1 MSM is one pass: 218M
pairs at c = 20 (1.7 GB plus the sort's scratch) and, in the Pallas path, about 10 GB of bucket / partial buffers
(2^23 columns x 48 words each); ten such partitions run as ten passes, so the footprint does not grow with P.

Kernels (:class:`~cuzk_jax.ops.config.MsmConfig`, ``config=``; the platform default is chosen in
:meth:`MsmConfig.default <cuzk_jax.ops.config.MsmConfig.default>`): ``"pallas"`` runs steps 4-6 as Pallas kernels
(:mod:`cuzk_jax.ops.pallas.bucket`, PTX carry-chain field blocks; the GPU default); ``"xla"`` runs steps 4-5 as ONE
loop (the "step machine", :func:`_xla_pass`) whose body holds a single XYZZ addition over a fixed number of lanes --
every phase (accumulation, partial merge, reduction) feeds that one addition its operands, so the curve formula
appears once in the wide program (compile time is dominated by it) -- and step 6 as a narrow loop
(:func:`_horner`); it uses the rolled multiplication and is the default off GPUs. ``"pallas_interpret"`` runs the
kernels through the Pallas interpreter with the jnp field (CPU tests).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from cuzk_jax.errors import BadInput

from . import curve as curve_mod
from .config import DBL_BRANCH_DEFAULT, MsmConfig
from .curve import Affine, Jacobian, XYZZ, select_point
from .field import x64

SCALAR_BITS = 256  # scalars are 8 x 32-bit limbs; canonical ones are < r < 2^255
MIN_PADDED = 64
MAX_WINDOW = 22
DEFAULT_MAX_PAIRS = 1 << 28
#: The pass bound of an MSM whose partition alone needs more than :data:`DEFAULT_MAX_PAIRS` pairs (its points are cut
#: into chunks, each with its own bucket reduction): half as many, longer chunks. G1 over 2^27 bases on an H200:
#: 2.60 s against 2.99 s at 2^28 and 2.73 s at 2^30, for 25.8 against 22.1 GiB of temporaries (session 18).
LONG_MAX_PAIRS = 1 << 29


def rolled(curve: curve_mod.Curve) -> curve_mod.Curve:
    """The group over the rolled multiplication, which the XLA parts of every MSM kernel use on every platform (the
    step machine's one addition, the final XYZZ -> Jacobian conversion, the window tables): unrolled, the addition
    takes minutes to compile on a GPU (BUILD.md), and on GPU the hot work is in the Pallas kernels."""
    return curve.with_schedule("rolled")


class BaseRows(NamedTuple):
    """Bases already in the layout the Pallas kernels gather from: ``rows`` uint32 ``(N, 2 Lc)``, point-major --
    row ``i`` holds base ``i``'s x limbs then its y limbs (``Lc = 12`` for G1; 24 for G2, c0 limbs then c1 limbs of
    each coordinate), Montgomery form, one base set shared by every partition.

    Invariant: no base is the point at infinity (the layout has no place for the flag; a key's resident queries
    drop those columns first, :func:`cuzk_jax.groth16.pipeline.build_resident`). ``N`` need not be a power of two.

    Why: :func:`msm` and :func:`cuzk_jax.ops.msm_split.msm_split` given an :class:`Affine` pad it to a power of two
    and transpose it into this layout on every call -- two copies of the bases (96 B per G1 point each), made and
    dropped per MSM. A prover that keeps its queries resident converts them once (:func:`base_rows`) and every
    MSM reads them in place; chunks of a long MSM index into the same array."""

    rows: jax.Array


def base_rows(group, bases: Affine) -> BaseRows:
    """``bases`` (:class:`Affine`, coordinates ``(*coord, N)``, shared) -> :class:`BaseRows` (one copy). Raises
    :class:`~cuzk_jax.errors.BadInput` for per-partition bases or, when the mask is concrete, a base at infinity."""
    curve = curve_of(group)
    nd = curve.coord_ndim
    if bases.x.ndim != nd + 1:
        raise BadInput(f"ops.msm.base_rows: {curve.name} bases must be one shared set (*coord, N), got "
                       f"{tuple(bases.x.shape)}")
    try:
        at_inf = bool(np.asarray(bases.inf).any())
    except jax.errors.TracerArrayConversionError:  # traced: the caller keeps the invariant
        at_inf = False
    if at_inf:
        raise BadInput("ops.msm.base_rows: bases at infinity have no row layout; drop them (and their scalars) first")
    return BaseRows(_rows_jit(bases.x, bases.y))


def _rows(x, y):
    """Coordinates ``(*coord, N)`` -> point-major rows ``(N, 2 Lc)`` (x limbs then y limbs of each point)."""
    lc = x.size // x.shape[-1]
    return jnp.concatenate([x.reshape((lc, -1)), y.reshape((lc, -1))], axis=0).T


_rows_jit = jax.jit(_rows)


def rows_affine(group, bases: BaseRows) -> Affine:
    """:class:`BaseRows` -> the :class:`Affine` it holds (every ``inf`` False): the XLA kernels' layout."""
    curve = curve_of(group)
    lc = 24 if curve.coord_ndim == 2 else 12
    r = bases.rows
    shape = (2, 12, r.shape[0]) if curve.coord_ndim == 2 else (12, r.shape[0])
    return Affine(r[:, :lc].T.reshape(shape), r[:, lc:].T.reshape(shape), jnp.zeros((r.shape[0],), bool))


def num_bases(bases) -> int:
    """The number of bases ``N`` of an :class:`Affine` (last axis) or :class:`BaseRows` (first axis)."""
    return int(bases.rows.shape[0]) if isinstance(bases, BaseRows) else int(np.shape(bases.inf)[-1])


def _check_rows(curve, bases: BaseRows, N: int, where: str) -> None:
    want = (N, 48 if curve.coord_ndim == 2 else 24)
    r = bases.rows
    if tuple(getattr(r, "shape", ())) != want or r.dtype != jnp.uint32:
        raise BadInput(f"{where}: {curve.name} BaseRows must be uint32 {want} for {N} scalars, got "
                       f"{getattr(r, 'dtype', type(r).__name__)}{tuple(getattr(r, 'shape', ()))}")


# ---------------------------------------------------------------------------------------------------------------
# Static planning
# ---------------------------------------------------------------------------------------------------------------


def num_windows(c: int) -> int:
    """Signed ``c``-bit windows needed for 255-bit scalars: ``ceil(256 / c)`` (room for the final carry)."""
    return -(-SCALAR_BITS // c)


def window_bits(n: int) -> int:
    """The window size for ``n`` points (see the module docstring): argmin of ``W(c) (n + 2.5 * 2^(c-1))``."""
    best = None
    for c in range(2, MAX_WINDOW + 1):
        cost = num_windows(c) * (n + 2.5 * (1 << (c - 1)))
        if best is None or cost < best[0]:
            best = (cost, c)
    return best[1]


def default_max_pairs(n: int, window: int | None = None) -> int:
    """The pass bound :func:`msm` takes when neither its config nor its caller sets one, for partitions of ``n``
    padded points: :data:`LONG_MAX_PAIRS` when one partition's pairs exceed :data:`DEFAULT_MAX_PAIRS` (so its
    points run in chunks either way), else :data:`DEFAULT_MAX_PAIRS` (a batch of short partitions keeps its
    bucket arrays at their measured size)."""
    c = window or window_bits(n)
    return LONG_MAX_PAIRS if n * num_windows(c) > DEFAULT_MAX_PAIRS else DEFAULT_MAX_PAIRS


def padded_size(n: int) -> int:
    """Static point count used for ``n`` points: the next power of two, at least ``MIN_PADDED`` (0 stays 0)."""
    if n <= 0:
        return 0
    return max(MIN_PADDED, 1 << (n - 1).bit_length())


def pow2_ceil(x: int) -> int:
    """The least power of two ``>= x`` (1 for ``x <= 1``)."""
    return 1 if x <= 1 else 1 << (int(x) - 1).bit_length()


@dataclasses.dataclass(frozen=True)
class Plan:
    """Static shape of one accumulation pass: ``G`` partitions x ``n`` points, window ``c``."""

    G: int
    n: int
    c: int
    shared_bases: bool
    windows: int = 0  # reduction windows; 0 = num_windows(c) (1 for precomputed window tables, ops.msm_precomputed)

    @property
    def W(self) -> int:
        return self.windows or num_windows(self.c)

    @property
    def H(self) -> int:
        return 1 << (self.c - 1)

    @property
    def NB(self) -> int:
        """Number of buckets; also the sentinel key of zero digits and the index of the trash slot."""
        return self.G * self.W * self.H

    @property
    def M(self) -> int:
        """Number of (key, value) pairs."""
        return self.G * self.W * self.n

    @property
    def num_bases(self) -> int:
        return self.n if self.shared_bases else self.G * self.n


# ---------------------------------------------------------------------------------------------------------------
# Digits and sorted keys
# ---------------------------------------------------------------------------------------------------------------


@x64
def signed_digits(scalars, c: int):
    """Signed ``c``-bit digits of canonical scalars: uint32 ``(8, *batch)`` -> int32 ``(W, *batch)``.

    ``sum_w d_w 2^(c w) == s`` with ``-2^(c-1) < d_w <= 2^(c-1)``, for any ``s < 2^(c W - 1)`` (so every canonical
    scalar). Window values are cut from the limbs as 64-bit words, then one ``lax.scan`` over windows propagates the
    carries.
    """
    W = num_windows(c)
    s = jnp.asarray(scalars, jnp.uint32).astype(jnp.uint64)
    batch = s.shape[1:]
    s = jnp.concatenate([s, jnp.zeros((2,) + batch, jnp.uint64)], axis=0)  # room to read past the top limb
    lo = np.array([(c * w) // 32 for w in range(W)])
    off = np.array([(c * w) % 32 for w in range(W)], np.uint64).reshape((W,) + (1,) * len(batch))
    word = s[lo] | (s[lo + 1] << jnp.uint64(32))
    raw = ((word >> off) & jnp.uint64((1 << c) - 1)).astype(jnp.int32)
    half = 1 << (c - 1)

    def step(carry, v):
        v = v + carry
        big = v > half
        return big.astype(jnp.int32), jnp.where(big, v - (1 << c), v)

    _, digits = lax.scan(step, jnp.zeros(batch, jnp.int32), raw)
    return digits


def bucket_keys(digits, plan: Plan, base0=0):
    """Digits ``(W, G, n)`` -> (keys, values) ``(M,)`` int32 in (partition, window, point) order, unsorted.

    key = ``(g W + w) H + |d| - 1`` for ``d != 0``, else the sentinel ``NB``; value = base index (``base0 + i``
    for shared bases -- ``base0``, possibly traced, is where a chunk starts in a :class:`BaseRows` array --, ``g n +
    i`` otherwise) with bit 31 set when ``d < 0``.
    """
    W, G, n = digits.shape
    H = plan.H
    d = jnp.transpose(digits, (1, 0, 2))  # (G, W, n)
    g = jnp.arange(G, dtype=jnp.int32)[:, None, None]
    w = jnp.arange(W, dtype=jnp.int32)[None, :, None]
    i = jnp.arange(n, dtype=jnp.int32)[None, None, :]
    key = jnp.where(d != 0, (g * W + w) * H + jnp.abs(d) - 1, plan.NB)
    base = i + jnp.int32(base0) if plan.shared_bases else g * n + i
    val = jnp.where(d < 0, base | jnp.int32(-(1 << 31)), base)
    val = jnp.broadcast_to(val, key.shape)
    return key.reshape(-1), val.reshape(-1)


def sort_pairs(keys, vals, plan: Plan):
    """(keys, values) -> sorted by key, and the live count (pairs with a non-zero digit, which sort first)."""
    count = jnp.sum(keys < plan.NB).astype(jnp.int32)
    keys, vals = lax.sort((keys, vals), num_keys=1, is_stable=False)
    return keys, vals, count


def sorted_pairs(scalars, plan: Plan, base0=0):
    """Scalars ``(8, G, n)`` -> sorted (keys, values) ``(M,)`` and the live count (pairs with a non-zero digit);
    ``base0`` as :func:`bucket_keys`."""
    return sort_pairs(*bucket_keys(signed_digits(scalars, plan.c), plan, base0), plan)


# ---------------------------------------------------------------------------------------------------------------
# Small helpers on XYZZ arrays of the ops layout (coordinates (12, K) or (2, 12, K))
# ---------------------------------------------------------------------------------------------------------------


def _take(pt, idx):
    return type(pt)(*[c[..., idx] for c in pt])


def _put(pt, idx, val, mask, trash: int):
    """``pt[idx] = val`` where ``mask``; masked-off lanes write the trash slot (so the scatter never drops a
    write that a live lane made to the same place)."""
    idx = jnp.where(mask, idx, trash)
    return type(pt)(*[c.at[..., idx].set(v) for c, v in zip(pt, val)])


def _ident(F, shape) -> XYZZ:
    z = F.zeros(shape)
    return XYZZ(z, z, z, z)


def _sel(F, mask, a, b):
    return select_point(F, mask, a, b)


def _is_ident(F, pt):
    return F.is_zero(pt.zz)


# ---------------------------------------------------------------------------------------------------------------
# XLA implementation: one step machine per pass
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MachineShape:
    """Static geometry of the XLA step machine for a :class:`Plan` (see :func:`_xla_pass`)."""

    lanes: int  # Lw: width of the one addition
    seg: int  # S: pairs per lane in the accumulation phase
    levels: int  # Hillis-Steele levels over the 2 Lw partials
    row: int  # L1: buckets per row in the reduction
    rows: int  # R1 = NB / L1
    K: int  # rows per window


def machine_shape(plan: Plan, lanes: int | None = None) -> MachineShape:
    if lanes is None:
        lanes = pow2_ceil(-(-plan.M // 256))
    lanes = max(lanes, 64, pow2_ceil(plan.G * plan.W))
    lanes = min(lanes, max(1 << 17, pow2_ceil(plan.G * plan.W)))
    seg = max(1, -(-plan.M // lanes))
    levels = (2 * lanes - 1).bit_length()  # d = 1, 2, ..., lanes covers 2 Lw entries
    row = min(plan.H, pow2_ceil(-(-plan.NB // lanes)))
    rows = plan.NB // row
    assert rows <= lanes
    return MachineShape(lanes, seg, levels, row, rows, plan.H // row)


def _xla_pass(curve, plan: Plan, ms: MachineShape, bases: Affine, keys, vals, count, prev: XYZZ) -> XYZZ:
    """Steps 4-6 for one pass as ONE ``lax.fori_loop`` whose body does one XYZZ addition over ``Lw`` lanes.

    Phases (every step computes the operands of every phase and keeps the active one):

    A  accumulation, ``Sd = ceil(count / Lw)`` steps (at most ``S``): lane ``l`` walks pairs
       ``l Sd .. l Sd + Sd - 1``; a new run starts from the identity; a run that ends is written to its bucket,
       except the lane's first run, which goes to partial slot ``2 l``; the last run goes to slot ``2 l + 1``
       (slot ``2 l`` if it is also the first).
    B  partial merge: a segmented inclusive Hillis-Steele scan over the ``2 Lw`` partials (keys are sorted, so a run
       is a maximal range of equal keys), two half-steps per level; run ends are then written to their buckets.
    C1 rows of ``L1`` buckets: ``S += B_j`` / ``T += S`` alternately, ``j`` from the top.
    C2 ``T += (k L1) S`` (``k`` the row index within its window) by double-and-add over ``c - 1`` bits.
    C3 a pairwise tree over the ``K`` rows of each window: window sums.

    Then, outside the wide machine (:func:`_horner`, ``G`` lanes): Horner over the windows (``c`` doublings and
    one addition per window), then ``+ prev``. It was phase D of the machine, where its ``W (c + 1)`` steps ran at
    the machine's full width for ``G`` useful lanes -- more than half of all steps at small sizes.

    Buckets written in A or B are disjoint (a bucket is written whole by exactly one lane or by the merge); empty
    runs (identity) are not written, leaving the zero-initialised bucket, which is the right value.
    """
    F = curve.field
    Lw, S, L1, R1, K = ms.lanes, ms.seg, ms.row, ms.rows, ms.K
    G, W, c, NB = plan.G, plan.W, plan.c, plan.NB
    M_pad = Lw * S
    keys = jnp.concatenate([keys, jnp.full((M_pad - keys.shape[0],), NB, jnp.int32)])
    vals = jnp.concatenate([vals, jnp.zeros((M_pad - vals.shape[0],), jnp.int32)])
    lane = jnp.arange(Lw, dtype=jnp.int32)
    P_n = 2 * Lw
    cbits = c - 1

    # Phase A walks only the live pairs (they sort first): Sd = ceil(count / Lw) <= S pairs per lane, a traced
    # number, so the machine's length follows the data -- zero scalars (and the zero digits of small ones, e.g.
    # the bits that fill a SHA-256 circuit's witness) cost no steps. The other phases have static lengths.
    Sd = jnp.clip((count + Lw - 1) // Lw, 1, S).astype(jnp.int32)
    nA, nB, nC1, nC2, nC3 = Sd, 2 * ms.levels, 2 * L1, 2 * cbits + 1, K.bit_length() - 1
    starts = [jnp.int32(0)] + [Sd + int(x) for x in np.cumsum([0, nB, nC1, nC2])]
    total = starts[-1] + nC3
    one = F.ones((Lw,))
    ident = _ident(F, (Lw,))

    def local(i, k):
        return i - starts[k]

    def active(i, k, n):
        t = local(i, k)
        return (t >= 0) & (t < n), jnp.clip(t, 0, n - 1)

    def body(i, st):
        inA, tA = active(i, 0, nA)
        inB, tB = active(i, 1, nB)
        inC1, tC1 = active(i, 2, nC1)
        inC2, tC2 = active(i, 3, nC2)
        inC3, tC3 = active(i, 4, nC3)

        # ---- A: accumulation -------------------------------------------------------------------------------
        e = lane * Sd + tA
        k = keys[e]
        v = vals[e]
        live = e < count
        idx = v & jnp.int32(0x7FFFFFFF)
        neg = v < 0
        bx = bases.x[..., idx]
        by = bases.y[..., idx]
        by = F.select(neg, F.neg(by), by)
        bA = _sel(F, live, XYZZ(bx, by, one, one), ident)
        new_run = (tA == 0) | (k != st["run_key"])
        aA = _sel(F, new_run, ident, st["acc"])

        # ---- B: partial merge --------------------------------------------------------------------------------
        lvl = tB // 2
        half = tB % 2
        dist = jnp.left_shift(jnp.int32(1), lvl)
        eB = half * Lw + lane
        src = eB - dist
        okB = (src >= 0) & (st["Pkey"][jnp.maximum(src, 0)] == st["Pkey"][eB])
        aB = _take(st["P"], eB)
        bB = _sel(F, okB, _take(st["P"], jnp.maximum(src, 0)), ident)

        # ---- C1: row running sums ----------------------------------------------------------------------------
        rvalid = lane < R1
        jrow = L1 - 1 - tC1 // 2
        even1 = tC1 % 2 == 0
        bidx = jnp.where(rvalid, lane * L1 + jrow, NB)
        aC1 = _sel(F, even1, st["S"], st["T"])
        bC1 = _sel(F, even1, _take(st["buckets"], bidx), st["S"])

        # ---- C2: T + (k L1) S ---------------------------------------------------------------------------------
        kk = lane % K
        mult = kk * L1
        last2 = tC2 == 2 * cbits
        bit = (mult >> (cbits - 1 - tC2 // 2)) & 1
        even2 = tC2 % 2 == 0
        aC2 = _sel(F, last2, st["T"], st["D"])
        bC2 = _sel(F, last2, st["D"], _sel(F, even2, st["D"], st["S"]))

        # ---- C3: tree over rows -------------------------------------------------------------------------------
        stride = jnp.left_shift(jnp.int32(1), tC3)
        okC3 = rvalid & (kk % (2 * stride) == 0) & (kk + stride < K)
        aC3 = st["T"]
        bC3 = _sel(F, okC3, _take(st["T"], jnp.where(okC3, lane + stride, 0)), ident)

        # ---- the one addition ---------------------------------------------------------------------------------
        a = aC3
        b = bC3
        for flag, aa, bb in ((inC2, aC2, bC2), (inC1, aC1, bC1), (inB, aB, bB), (inA, aA, bA)):
            a = _sel(F, flag, aa, a)
            b = _sel(F, flag, bb, b)
        r = curve.xyzz_add(a, b)

        # ---- commits ------------------------------------------------------------------------------------------
        st = dict(st)
        # A
        acc = st["acc"]
        flush = (tA > 0) & new_run
        to_first = inA & flush & st["first"]
        to_bucket = inA & flush & ~st["first"] & ~_is_ident(F, acc)
        P, Pkey, buckets = st["P"], st["Pkey"], st["buckets"]
        P = _put(P, 2 * lane, acc, to_first, P_n)
        Pkey = Pkey.at[jnp.where(to_first, 2 * lane, P_n)].set(st["run_key"])
        buckets = _put(buckets, st["run_key"], acc, to_bucket, NB)
        first = st["first"] & ~flush
        lastA = inA & (tA == Sd - 1)
        P = _put(P, 2 * lane, r, lastA & first, P_n)
        P = _put(P, 2 * lane + 1, _sel(F, first, ident, r), lastA, P_n)
        Pkey = Pkey.at[jnp.where(lastA, 2 * lane, P_n)].set(jnp.where(first, k, Pkey[2 * lane]))
        Pkey = Pkey.at[jnp.where(lastA, 2 * lane + 1, P_n)].set(k)
        st["acc"] = _sel(F, inA, r, acc)
        st["run_key"] = jnp.where(inA, k, st["run_key"])
        st["first"] = jnp.where(inA, first, st["first"])
        # B
        Pn = _put(st["Pn"], eB, r, inB, P_n)
        swap = inB & (half == 1)
        P = _sel(F, swap, Pn, P)
        lastB = inB & (tB == nB - 1)
        ePB = jnp.arange(P_n, dtype=jnp.int32)
        kP = Pkey[:P_n]
        run_end = jnp.concatenate([kP[1:] != kP[:-1], jnp.ones((1,), bool)])
        Pv = _take(P, ePB)
        wmask = lastB & run_end & (kP < NB) & ~_is_ident(F, Pv)
        buckets = _put(buckets, kP, Pv, wmask, NB)
        st["P"], st["Pn"], st["Pkey"], st["buckets"] = P, Pn, Pkey, buckets
        # C1
        st["S"] = _sel(F, inC1 & even1, r, st["S"])
        st["T"] = _sel(F, inC1 & ~even1, r, st["T"])
        # C2
        st["D"] = _sel(F, inC2 & ~last2 & (even2 | (bit == 1)), r, st["D"])
        st["T"] = _sel(F, inC2 & last2, r, st["T"])
        # C3
        st["T"] = _sel(F, inC3 & okC3, r, st["T"])
        return st

    identP = _ident(F, (P_n + 1,))
    st0 = {
        "acc": ident,
        "run_key": jnp.zeros((Lw,), jnp.int32),
        "first": jnp.ones((Lw,), bool),
        "P": identP,
        "Pn": identP,
        "Pkey": jnp.full((P_n + 1,), NB, jnp.int32),
        "buckets": _ident(F, (NB + 1,)),
        "S": ident,
        "T": ident,
        "D": ident,
    }
    st = lax.fori_loop(0, total, body, st0)
    g = jnp.arange(G, dtype=jnp.int32)
    window_sums = [_take(st["T"], (g * W + w) * K) for w in range(W)]  # row 0 of each window holds its sum
    return _horner(curve, plan, XYZZ(*[jnp.stack([ws[j] for ws in window_sums]) for j in range(4)]), prev)


def _horner(curve, plan: Plan, window_sums: XYZZ, prev: XYZZ) -> XYZZ:
    """``sum_w 2^(c w) WS_w + prev`` per partition on ``G`` lanes: window sums ``(W, *coord, G)`` (XYZZ, window-
    major), ``prev`` ``(*coord, G)``.

    One ``lax.fori_loop`` of ``W (c + 1) + 1`` steps, each ONE unified XYZZ addition (doubling when both operands
    are the accumulator): per window from the top, ``c`` doublings then ``+ WS_w``; the last step adds ``prev``.
    One addition site keeps the program small under either multiplication schedule."""
    c, W = plan.c, plan.W
    F = curve.field
    G = prev.x.shape[-1]

    def step(t, acc):
        w = jnp.maximum(W - 1 - t // (c + 1), 0)
        sub = t % (c + 1)
        last = t == W * (c + 1)
        ws = XYZZ(*[lax.dynamic_index_in_dim(v, w, axis=0, keepdims=False) for v in window_sums])
        b = _sel(F, last, prev, _sel(F, sub < c, acc, ws))
        return curve.xyzz_add(acc, b)

    return lax.fori_loop(0, W * (c + 1) + 1, step, _ident(F, (G,)))


# ---------------------------------------------------------------------------------------------------------------
# Pallas implementation
# ---------------------------------------------------------------------------------------------------------------


def xyzz_to_rows(curve, pt: XYZZ):
    """XYZZ in the ops layout ``(*coord, K)`` -> the Pallas kernels' rows ``(4 Lc, K)`` (x, y, zz, zzz stacked;
    ``Lc`` limbs per coordinate); inverse of :func:`rows_to_xyzz`."""
    return jnp.concatenate([c.reshape((-1,) + c.shape[curve.coord_ndim :]) for c in pt], axis=0)


def rows_to_xyzz(curve, rows, K: int) -> XYZZ:
    """The first ``K`` columns of kernel rows ``(4 Lc, >= K)`` -> XYZZ in the ops layout ``(*coord, K)``."""
    Lc = rows.shape[0] // 4
    shape = (2, 12) if curve.coord_ndim == 2 else (12,)
    return XYZZ(*[rows[k * Lc : (k + 1) * Lc, :K].reshape(shape + (K,)) for k in range(4)])


def pallas_seg(M: int) -> int:
    """Pairs per lane in the level-1 kernel: about 2^18 lanes (enough to fill an H200), 8 .. 256 pairs each."""
    return int(min(256, max(8, pow2_ceil(-(-M // (1 << 18))))))


#: Passes of at least this many pairs run the Pallas kernels with :data:`LONG_PASS_BLOCK` lanes per program.
LONG_PASS_PAIRS = 1 << 27
LONG_PASS_BLOCK = 128


def _dbl_branch(config: MsmConfig, curve) -> int:
    """The level-1 kernel's addition form: ``config.dbl_branch``, or the group's default when it is None."""
    return DBL_BRANCH_DEFAULT[curve.name] if config.dbl_branch is None else config.dbl_branch


def pallas_block(M: int) -> int:
    """Lanes per kernel program for a pass of ``M`` pairs when the config sets none: 128 (4 warps) from
    :data:`LONG_PASS_PAIRS` pairs, else ``bucket.DEFAULT_BLOCK`` (64, 2 warps): the wider programs won the H200
    A/B for G1 over 2^24 and 2^27 dense bases, and lost it at 2^20 (RESULTS.md, session 19; BUILD.md)."""
    from .pallas import bucket as pk

    return LONG_PASS_BLOCK if M >= LONG_PASS_PAIRS else pk.DEFAULT_BLOCK


@functools.lru_cache(maxsize=None)
def _kernel2(curve, mode: str, kopts: tuple):
    """Kernel 2 compiled for one mode, as a jitted function: the pass calls it at several places (the three
    accumulation stages) and JAX lowers one jitted function once per module, so those calls share one Triton
    compile."""
    from .pallas import bucket as pk

    return jax.jit(functools.partial(pk.general_step, curve, modes=(mode,), **dict(kopts)))


@dataclasses.dataclass(frozen=True)
class _PassShape:
    """The static shapes of one Pallas pass of ``M`` pairs (see :func:`_pallas_pass`)."""

    block: int
    seg: int
    nseg: int
    L1: int
    K: int
    R1: int
    nbuf: int
    nrows: int
    kopts: tuple

    def step(self, curve, mode: str):
        return _kernel2(curve, mode, self.kopts)


def _pass_shape(curve, plan: Plan, M: int, config: MsmConfig) -> _PassShape:
    block = config.block or pallas_block(M)
    seg = config.seg or pallas_seg(M)
    nseg = -(-M // (seg * block)) * block
    c, H, NB = plan.c, plan.H, plan.NB
    # rows of L1 buckets: the row pass costs ~2 L1 + 2 c sequential additions per lane and the window sums a few
    # levels of acc_seg; L1 ~ 2^((c-1)/3) keeps both short (32 at c = 16, 128 at c = 20; on the H200 rows of 64
    # or 256 buckets at c = 20, a G1 2^24 MSM, were no faster: REMOVED_VARIANTS.md)
    L1 = int(min(H, max(2, 1 << -(-(c - 1) // 3))))
    kopts = dict(block=block, num_warps=config.warps or max(1, block // 32),
                 interpret=config.kernel == "pallas_interpret")
    return _PassShape(block=block, seg=seg, nseg=nseg, L1=L1, K=H // L1, R1=NB // L1,
                      nbuf=pow2_ceil(max(2 * nseg, NB + 2, 2 * block)),
                      nrows=4 * (24 if curve.coord_ndim == 2 else 12), kopts=tuple(sorted(kopts.items())))


def _i32(v):
    return jnp.asarray(v, jnp.int32)


def _accumulate_levels(curve, sh: _PassShape, acc_seg: int, E, EK, Y, cnt):
    """Levels of mode ACC until the level that finds at most ``acc_seg`` entries has written its sums into ``Y``
    (each level: ``cnt`` entries of ``E`` keyed by ``EK`` -> ``2 ceil(cnt / acc_seg)`` partials)."""
    from .pallas import bucket as pk

    def body(carry):
        cnt, _, E, EK, Y = carry
        final = cnt <= acc_seg
        prm = jnp.stack([_i32(pk.MODE_ACC), cnt, _i32(acc_seg), final.astype(jnp.int32)] + [_i32(0)] * 4)
        P, PKn, Yn = sh.step(curve, "acc")(prm, EK, E, Y)
        return (2 * ((cnt + acc_seg - 1) // acc_seg)).astype(jnp.int32), final, P, PKn, Yn

    carry = (jnp.asarray(cnt, jnp.int32), jnp.asarray(False), E, EK, Y)
    return lax.while_loop(lambda carry: ~carry[1], body, carry)[4]


def _pallas_buckets(curve, plan: Plan, bases: Affine, keys, vals, count, config: MsmConfig):
    """Kernel 1 and stage 0 of :func:`_pallas_pass`: the bucket array ``(4 Lc, nbuf)`` of one pass."""
    from .pallas import bucket as pk

    M = keys.shape[0]
    sh = _pass_shape(curve, plan, M, config)
    Mp = sh.nseg * sh.seg
    keys = jnp.concatenate([jnp.where(keys < plan.NB, keys, pk.SENT), jnp.full((Mp - M,), pk.SENT, jnp.int32)])
    vals = jnp.concatenate([vals, jnp.zeros((Mp - M,), jnp.int32)])
    # point-major rows: a gathered base is 2 Lc consecutive words (the layout the Pallas kernels read)
    brows = bases.rows if isinstance(bases, BaseRows) else _rows(bases.x, bases.y)
    final1 = count <= sh.seg
    # the partials come out as wide as the level buffers (no padded copy: a level reads only its live count)
    E, EK, Y = pk.accumulate_bases(curve, count, final1, keys, vals, brows,
                                   jnp.zeros((sh.nrows, sh.nbuf), jnp.uint32), seg=sh.seg,
                                   dbl_branch=_dbl_branch(config, curve), width=sh.nbuf, **dict(sh.kopts))
    if config.stages < 1:
        return Y
    cnt0 = jnp.where(final1, 0, 2 * ((count + sh.seg - 1) // sh.seg)).astype(jnp.int32)
    return _accumulate_levels(curve, sh, config.acc_seg, E, EK, Y, cnt0)


def _merge_buckets(curve, plan: Plan, M: int, config: MsmConfig, total, Y):
    """``total + Y`` bucket by bucket (mode MERGE, in place over ``total``): the buckets of two chunks of points
    of one window plan."""
    from .pallas import bucket as pk

    sh = _pass_shape(curve, plan, M, config)
    prm = jnp.stack([_i32(pk.MODE_MERGE), _i32(plan.NB)] + [_i32(0)] * 6)
    return sh.step(curve, "merge")(prm, jnp.zeros((sh.nbuf,), jnp.int32), Y, total)[2]


def _pallas_reduce(curve, plan: Plan, M: int, config: MsmConfig, Y, prev: XYZZ) -> XYZZ:
    """Stages 1-4 of :func:`_pallas_pass` on the bucket array ``Y`` of passes of ``M`` pairs."""
    from .pallas import bucket as pk

    sh = _pass_shape(curve, plan, M, config)
    G, W, c = plan.G, plan.W, plan.c
    stages, nbuf = config.stages, sh.nbuf
    ar = jnp.arange(nbuf, dtype=jnp.int32)
    none = jnp.full((nbuf,), pk.SENT, jnp.int32)  # WROW and SHIFT read no keys

    def fresh():
        return jnp.zeros((sh.nrows, nbuf), jnp.uint32)

    if stages >= 2:  # 1: buckets -> weighted rows
        wrow = jnp.stack([_i32(pk.MODE_WROW), _i32(sh.R1), _i32(sh.L1), _i32(0), _i32(c - 1), _i32(0), _i32(sh.K),
                          _i32(0)])
        Y = sh.step(curve, "wrow")(wrow, none, Y, fresh())[2]
    if stages >= 3:  # 2: rows -> window sums (key = row // K)
        Y = _accumulate_levels(curve, sh, config.acc_seg, Y, jnp.where(ar < sh.R1, ar // sh.K, pk.SENT), fresh(),
                               sh.R1)
    if stages >= 4:  # 3: window sums -> scaled by 2^(c w)
        shift = jnp.stack([_i32(pk.MODE_SHIFT), _i32(G * W), _i32(1), _i32(0), _i32(c * (W - 1)), _i32(0), _i32(c),
                           _i32(W)])
        Y = sh.step(curve, "shift")(shift, none, Y, fresh())[2]
    if stages >= 5:  # 4: scaled windows + prev -> one sum per partition (key = partition)
        z = Y[:, : G * W].reshape(sh.nrows, G, W)
        e = jnp.concatenate([z, xyzz_to_rows(curve, prev)[:, :, None]], axis=2).reshape(sh.nrows, G * (W + 1))
        e = jnp.pad(e, ((0, 0), (0, nbuf - G * (W + 1))))
        Y = _accumulate_levels(curve, sh, config.acc_seg, e, jnp.where(ar < G * (W + 1), ar // (W + 1), pk.SENT),
                               fresh(), G * (W + 1))
    return rows_to_xyzz(curve, Y, G)


def _pallas_pass(curve, plan: Plan, bases: Affine, keys, vals, count, prev: XYZZ, config: MsmConfig) -> XYZZ:
    """Steps 4-6 with the Pallas kernels of :mod:`cuzk_jax.ops.pallas.bucket` (compiled: PTX carry-chain field
    blocks, G2 with one block per Fq2 product; ``pallas_interpret``: the jnp field under the interpreter).

    Kernel 1 accumulates the sorted pairs into the bucket array and a list of partials
    (:func:`_pallas_buckets`). Then kernel 2 (one compiled kernel per mode) runs five stages in a straight line:
    0 merge partials into buckets (levels of segmented accumulation until one segment is left: a
    ``lax.while_loop`` over the levels), then (:func:`_pallas_reduce`) 1 weighted row sums of ``L1`` buckets
    (``T + (k L1) S`` per row, mode WROW), 2 sum the ``K`` rows of each window (levels again), 3 scale window
    ``w`` by ``2^(c w)`` (``c w`` doublings, mode SHIFT), 4 sum the windows of each partition and ``prev``
    (levels). Each loop body is one kernel call whose outputs are the next level's inputs, so no stage change
    passes a buffer through a conditional (XLA copies a conditional's passed-through operands: one
    ``lax.switch`` over modes and stage changes in one loop copied the ``(4 Lc, nbuf)`` buffers at every step).
    ``config.stages`` < 5 stops after that many stages (phase timing; the result is then not the MSM).
    """
    Y = _pallas_buckets(curve, plan, bases, keys, vals, count, config)
    return _pallas_reduce(curve, plan, keys.shape[0], config, Y, prev)


# ---------------------------------------------------------------------------------------------------------------
# Orchestration
# ---------------------------------------------------------------------------------------------------------------


def run_pass(curve, plan: Plan, config: MsmConfig, bases: Affine, keys, vals, count, prev: XYZZ, *,
             lanes=None) -> XYZZ:
    """Steps 4-6 for one pass of sorted pairs with ``config`` (shared with :mod:`cuzk_jax.ops.msm_precomputed`)."""
    if config.kernel == "xla":
        return _xla_pass(rolled(curve), plan, machine_shape(plan, lanes), bases, keys, vals, count, prev)
    return _pallas_pass(curve, plan, bases, keys, vals, count, prev, config)


def curve_of(group):
    """The :class:`~cuzk_jax.ops.curve.Curve` for ``group`` (``"g1"``/``"g2"`` or a Curve, returned as is);
    ``ValueError`` for anything else."""
    if isinstance(group, curve_mod.Curve):
        return group
    try:
        return curve_mod.CURVES[group]
    except KeyError:
        raise ValueError(f"unknown group {group!r}; expected 'g1' or 'g2'") from None


def group_and_chunk(P: int, n: int, W: int, max_pairs: int) -> tuple[int, int]:
    """(partitions per pass, points per chunk) for ``P`` partitions of ``n`` points and ``W`` windows under
    ``max_pairs`` pairs per pass: all partitions at once if their pairs fit, else groups of a
    divisor of ``P``; a single partition longer than the budget is cut into power-of-two chunks."""
    if P * n * W <= max_pairs:
        return P, n
    for G in range(P - 1, 0, -1):
        if P % G == 0 and G * n * W <= max_pairs:
            return G, n
    chunk = n
    while chunk * W > max_pairs and chunk > 8:
        chunk //= 2
    return 1, chunk


def pass_shape(P: int, n: int, max_pairs: int = DEFAULT_MAX_PAIRS, window: int | None = None) -> tuple[int, int, int]:
    """``(c, G, chunk)`` of :func:`msm` for ``P`` partitions of ``n`` padded points: the window (``window`` or
    :func:`window_bits` of ``n``; of the chunk when a partition alone exceeds ``max_pairs`` and no window is given)
    and :func:`group_and_chunk`'s partitions per pass and points per chunk."""
    c = window or window_bits(n)
    G, chunk = group_and_chunk(P, n, num_windows(c), max_pairs)
    if chunk < n and window is None:  # one partition in several passes: size the window for a pass
        c = window_bits(chunk)
        G, chunk = group_and_chunk(P, n, num_windows(c), max_pairs)
    return c, G, chunk


def bases_shared(bases: Affine, nd: int, P: int, N: int, batched: bool, where: str) -> bool:
    """Whether ``bases`` (coordinate axes ``nd``) are one set shared by every partition (batch shape ``(N,)``) or
    one set per partition (``(P, N)``, only with batched scalars); BadInput otherwise."""
    bshape = tuple(bases.x.shape[nd:])
    if bshape == (N,):
        return True
    if batched and bshape == (P, N):
        return False
    raise BadInput(f"{where}: bases batch shape {bshape} does not match scalars {(P, N) if batched else (N,)}")


def check_args(config: MsmConfig | str | None, scalars):
    """-> (the config, ``None`` resolved to :meth:`MsmConfig.default`; scalars as ``(8, P, N)``; whether they came
    batched); ValueError for a bad config or scalars that are not uint32 ``(8, N)`` / ``(8, P, N)``. Shared with
    ops.msm_precomputed."""
    config = MsmConfig.coerce(config)
    scalars = jnp.asarray(scalars)
    if scalars.dtype != jnp.uint32 or scalars.ndim not in (2, 3) or scalars.shape[0] != 8:
        raise BadInput(f"ops.msm.msm: scalars must be canonical Fr limbs, uint32 of shape (8, N) or (8, P, N), got "
                       f"{scalars.dtype}{scalars.shape}")
    batched = scalars.ndim == 3
    return config, (scalars if batched else scalars[:, None]), batched


@x64
def msm(
    bases: Affine | BaseRows,
    scalars,
    group="g1",
    *,
    config: MsmConfig | None = None,
    window: int | None = None,
    max_pairs: int | None = None,
    lanes: int | None = None,
) -> Jacobian:
    """``sum_i scalars[..., i] * bases[..., i]`` (see the module docstring for layouts and the algorithm).

    ``bases``: :class:`Affine` in Montgomery form, coordinates ``(*coord, N)`` (shared) or ``(*coord, P, N)``;
    ``inf`` marks points at infinity (their coordinates are ignored) -- or a shared :class:`BaseRows` (no copy of
    the bases is made on the Pallas path; the XLA path converts it). ``scalars``: canonical uint32 ``(8, N)`` or
    ``(8, P, N)``; every value must be ``< r`` (traced values cannot be checked here; the digit recoding is exact
    for values below ``2^(c W - 1)``, which covers ``[0, r)``; :func:`cuzk_jax.msm` checks its inputs).
    ``config``: the :class:`~cuzk_jax.ops.config.MsmConfig` (None: its platform default). ``window`` overrides the
    window rule; ``max_pairs`` bounds the (key, value) pairs per pass (memory: about 8 bytes per pair plus the
    sort's scratch; None: :func:`default_max_pairs`); when a partition alone exceeds it, the points are chunked
    and the window is chosen for the chunk size. ``lanes`` overrides the XLA machine width. Traceable (jit it with
    the keyword arguments static: :func:`msm_jit`); shapes are padded to :func:`padded_size` inside, but callers
    that want one compiled program per size bucket should pad before calling a jitted function (as
    :func:`cuzk_jax.msm` does).
    """
    curve = curve_of(group)
    F = curve.field
    config, scalars, batched = check_args(config, scalars)
    _, P, N = scalars.shape
    bases, rows = resolve_bases(curve, config, bases, N, "ops.msm.msm")
    shared = rows or bases_shared(bases, curve.coord_ndim, P, N, batched, "ops.msm.msm")
    if N == 0:
        res = curve.jacobian_identity((P,))
        return res if batched else type(res)(*[c[..., 0] for c in res])

    n = padded_size(N)
    # the config's bound wins over the argument, which wins over the size rule
    max_pairs = config.max_pairs or max_pairs or default_max_pairs(n, window)
    bases, scalars = pad_inputs(curve, bases, scalars, rows, shared, n)
    c, G, chunk = pass_shape(P, n, max_pairs, window)
    n_chunks = n // chunk
    plan = Plan(G=G, n=chunk, c=c, shared_bases=shared)

    def run_group(gb, sc):
        """gb: the group's bases (flat Affine, or the BaseRows); sc: (8, G, n) -> XYZZ (G,)."""

        def chunk_args(j):
            lo = j * chunk
            scj = lax.dynamic_slice_in_dim(sc, lo, chunk, axis=2)
            if rows:  # the pairs index into the whole array: no slice of the bases
                return gb, scj, lo
            return chunk_bases(curve, gb, lo, chunk, shared), scj, 0

        prev = _ident(F, (G,))
        if n_chunks == 1:
            b, scj, base0 = chunk_args(0)
            keys, vals, count = sorted_pairs(scj, plan, base0)
            return run_pass(curve, plan, config, b, keys, vals, count, prev, lanes=lanes)
        if config.kernel == "xla":
            def xla_body(j, prev):
                b, scj, _ = chunk_args(j)
                return run_pass(curve, plan, config, b, *sorted_pairs(scj, plan), prev, lanes=lanes)

            return lax.fori_loop(0, n_chunks, xla_body, prev)

        # Pallas: the chunks share the window plan, so their bucket arrays add up (mode MERGE) and the buckets are
        # reduced once, not once per chunk (the reduction stages were ~10 % of a 2^25-point chunk on the H200)
        def bucket_body(j, total):
            b, scj, base0 = chunk_args(j)
            keys, vals, count = sorted_pairs(scj, plan, base0)
            Y = _pallas_buckets(curve, plan, b, keys, vals, count, config)
            return _merge_buckets(curve, plan, plan.M, config, total, Y)

        sh = _pass_shape(curve, plan, plan.M, config)
        total = lax.fori_loop(0, n_chunks, bucket_body, jnp.zeros((sh.nrows, sh.nbuf), jnp.uint32))
        return _pallas_reduce(curve, plan, plan.M, config, total, prev)

    nd = curve.coord_ndim
    n_groups = P // G
    if n_groups == 1:
        res = run_group(bases, scalars)
        res = XYZZ(*[r[..., None, :] for r in res])  # (…, 1, G)
    else:
        sc_g = jnp.moveaxis(scalars.reshape(8, n_groups, G, n), 1, 0)
        if shared:
            res = lax.map(lambda s: run_group(bases, s), sc_g)
        else:
            bx_g = jnp.moveaxis(bases.x.reshape(bases.x.shape[:nd] + (n_groups, G, n)), nd, 0)
            by_g = jnp.moveaxis(bases.y.reshape(bases.y.shape[:nd] + (n_groups, G, n)), nd, 0)
            res = lax.map(lambda a: run_group(Affine(a[0], a[1], None), a[2]), (bx_g, by_g, sc_g))
        res = XYZZ(*[jnp.moveaxis(r, 0, nd) for r in res])  # (*coord, n_groups, G)
    res = XYZZ(*[r.reshape(r.shape[:nd] + (P,)) for r in res])
    jac = rolled(curve).xyzz_to_jacobian(res)
    return jac if batched else Jacobian(*[c[..., 0] for c in jac])


def resolve_bases(curve, config: MsmConfig, bases, N: int, where: str):
    """-> (bases, whether they are :class:`BaseRows` the pass reads in place). An :class:`Affine` is checked; a
    :class:`BaseRows` is checked against ``N`` and, for the XLA kernels (which gather coordinates), converted to
    an :class:`Affine` (one copy). Shared by :func:`msm` and :func:`cuzk_jax.ops.msm_split.msm_split`."""
    if isinstance(bases, BaseRows):
        _check_rows(curve, bases, N, where)
        if config.kernel != "xla":
            return bases, True
        return rows_affine(curve, bases), False
    curve._check_point("msm", bases, "Affine", where=f"{where} ({curve.name} bases)")
    return bases, False


def pad_inputs(curve, bases, scalars, rows: bool, shared: bool, n: int):
    """Scalars ``(8, P, N)`` zero-padded to ``n`` points, zeroed where an :class:`Affine` base is at infinity (its
    point contributes nothing and never reaches a bucket), and the Affine padded likewise (``inf`` True); a
    :class:`BaseRows` stays as it is (padded points have zero scalars, so no pair ever indexes past ``N``)."""
    P, N = scalars.shape[1:]
    if not rows:
        scalars = jnp.where(jnp.broadcast_to(bases.inf, (P, N))[None], jnp.uint32(0), scalars)
    pad = n - N
    if not pad:
        return bases, scalars
    scalars = jnp.pad(scalars, ((0, 0), (0, 0), (0, pad)))
    if rows:
        return bases, scalars
    nd = curve.coord_ndim
    padc = [(0, 0)] * nd + [(0, 0)] * (0 if shared else 1) + [(0, pad)]
    return Affine(jnp.pad(bases.x, padc), jnp.pad(bases.y, padc),
                  jnp.pad(bases.inf, padc[nd:], constant_values=True)), scalars


def chunk_bases(curve, bases: Affine, lo, chunk: int, shared: bool) -> Affine:
    """Points ``[lo, lo + chunk)`` of padded Affine bases (``lo`` may be traced), flat: ``(*coord, chunk)`` shared,
    ``(*coord, G chunk)`` per partition (the pass's base index ``g chunk + i``); ``inf`` dropped (the scalars of
    bases at infinity are already zero)."""
    nd = curve.coord_ndim
    bx = lax.dynamic_slice_in_dim(bases.x, lo, chunk, axis=bases.x.ndim - 1)
    by = lax.dynamic_slice_in_dim(bases.y, lo, chunk, axis=bases.y.ndim - 1)
    if not shared:
        bx = bx.reshape(bx.shape[:nd] + (-1,))
        by = by.reshape(by.shape[:nd] + (-1,))
    return Affine(bx, by, None)


def msm_jit(group: str = "g1", config: MsmConfig | str | None = None, **static):
    """A cached ``jax.jit`` of :func:`msm` for a group, a config and fixed keyword arguments (``window``,
    ``max_pairs``, ``lanes``; hashable values), shared by tests, the host API and benches.

    ``config=None`` resolves to :meth:`MsmConfig.default` first (a string goes through :meth:`MsmConfig.parse`), so
    ``msm_jit("g1")`` and ``msm_jit("g1", MsmConfig("xla"))`` are the same compiled function on CPU; the config is
    part of the cache key, so two configs never share a compiled program."""
    return _msm_jit(group, MsmConfig.coerce(config), tuple(sorted(static.items())))


@functools.lru_cache(maxsize=None)
def _msm_jit(group, config: MsmConfig, static):
    return jax.jit(functools.partial(msm, group=group, config=config, **dict(static)))
