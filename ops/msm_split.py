"""Split MSM (zero / one / other scalars, as supraseal) and MSM over bases streamed from host memory.

**Why.** A PoRep witness is mostly bits: on ``porep_like/domain20`` the scalars of the A, B and L MSMs are ~52 %
zeros, ~47 % ones and ~1 % other values (issue 19). The plain MSM (:func:`cuzk_jax.ops.msm.msm`) already skips the
*work* of zero digits, but it still computes ``W`` signed digits per scalar and sorts ``W N`` (bucket, point) pairs
per partition -- the sort and the digit arrays grow with ``N`` whatever the scalars are. supraseal-c2 (Filecoin's
CUDA Groth16 prover, ``groth16_split_msm``) splits the scalars by kind instead; so does this module.

**Split MSM** (:func:`msm_split`), per partition ``g`` (all partitions in one pass):

1. *classify* (:func:`classify`): zero (all limbs 0, or the base is at infinity), one (``s == 1``), other.
2. *zeros* are dropped: they produce no pair at all.
3. *others* are compacted, in point order, to a static ``capacity`` per partition (rank by a prefix sum, then one
   scatter; ``capacity`` is chosen on the host by :func:`capacity_for` from :func:`classify`'s counts, rounded up
   to a power of two so nearby counts share one compiled program). Their signed ``c``-bit digits (the window sized
   for ``capacity`` points, :func:`cuzk_jax.ops.msm.window_bits`) give ``W capacity`` (bucket, point) pairs whose
   value is the ORIGINAL base index, so the bases are never gathered or copied; only these pairs are sorted.
4. *ones* need no digits and no sort: every base with scalar one goes, in point order, to one segment per
   partition -- bucket 0 of window 0 (the bucket of digit ``+1``, weight ``2^0``). The segment is placed
   in front of the partition's sorted "other" pairs by a prefix sum over the per-partition counts, so the merged
   list stays sorted by bucket without sorting the ones.
5. The merged list goes through the plain MSM's accumulation / reduction pass (:func:`cuzk_jax.ops.msm.run_pass`:
   the XLA step machine or the Pallas kernels, per ``config``). Accumulation cuts the sorted list into equal
   segments per lane whatever the bucket sizes, so each partition's ones are summed as one balanced segmented
   sum (complete XYZZ additions: infinity, ``P + P`` and ``P + (-P)`` are handled by the unified formula of
   :mod:`cuzk_jax.ops.curve`), never once per window -- supraseal's separate "sum of the ones" -- and the
   "other" scalars get the full bucket method.

If a partition has more "other" scalars than ``capacity``, the excess is not lost: a ``lax.while_loop`` runs
further rounds over ranks ``[k capacity, (k + 1) capacity)``, each pass adding into the previous result (the pass's
``prev``), so the result is exact for every input and ``capacity`` only sets speed and memory (one round when it
is at least the largest count, which :func:`capacity_for` guarantees). Points beyond ``max_pairs`` are processed in
chunks (``lax.fori_loop``), each chunk a pass as above.

The result equals :func:`cuzk_jax.ops.msm.msm` as a group element (the Jacobian coordinates may differ; compare
after normalising to affine).

**Streamed MSM** (:func:`msm_streamed`): bases held in host memory (an :class:`~cuzk_jax.ops.curve.Affine` of
numpy arrays) are copied to the device ``chunk`` points at a time; the copy of chunk ``j + 1`` is issued
(``jax.device_put``, asynchronous) before chunk ``j``'s MSM is dispatched, and the loop waits for chunk ``j``'s
result before issuing copy ``j + 2``: double buffering, so at most two chunks of bases are on the device. Each
chunk's MSM (plain or split) is added into one Jacobian accumulator. Scalars either stream with the bases (numpy
input) or stay on the device (a ``jax.Array``; each chunk is a ``dynamic_slice`` of them). JAX exposes no portable
pinned-host allocation for ``device_put`` from numpy, so the host side is pageable memory.

**Memory** (:func:`msm_device_bytes`): the peak device bytes of each path as a function of ``N``, ``P``, the group
and ``chunk``, for the memory planner; documented there and checked in the tests against XLA's own buffer
assignment (``compiled.memory_analysis()``).

Layouts as :mod:`cuzk_jax.ops.msm`: bases Montgomery :class:`Affine` ``(*coord, N)`` (shared) or ``(*coord, P,
N)``, scalars canonical uint32 ``(8, N)`` / ``(8, P, N)``, results :class:`Jacobian` of batch ``()`` / ``(P,)``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from cuzk_jax.errors import BadInput

from . import msm as M
from .config import MsmConfig
from .curve import XYZZ, Affine, Jacobian
from .field import x64

KINDS = ("zero", "one", "other")
MIN_CAPACITY = 64
PATHS = ("plain", "split", "streamed", "streamed_split", "streamed_device_scalars", "streamed_split_device_scalars")


# ---------------------------------------------------------------------------------------------------------------
# Classification and host-side sizing
# ---------------------------------------------------------------------------------------------------------------


def _kind_masks(scalars, inf=None):
    """(one, other) bool masks of the batch shape of canonical scalars ``(8, *batch)``; a base at infinity
    (``inf``, broadcast to the batch shape) makes its scalar count as zero."""
    high_zero = jnp.all(scalars[1:] == 0, axis=0)
    zero = high_zero & (scalars[0] == 0)
    one = high_zero & (scalars[0] == 1)
    if inf is not None:
        inf = jnp.broadcast_to(inf, zero.shape)
        zero = zero | inf
        one = one & ~inf
    return one, ~zero & ~one


def classify(scalars, inf=None):
    """Counts of zero, one and other scalars per partition: canonical uint32 ``(8, P, N)`` -> int32 ``(3, P)``
    (rows in :data:`KINDS` order; ``(8, N)`` -> ``(3,)``). ``inf``: optional bool mask of bases at infinity
    (``(N,)`` or ``(P, N)``), whose scalars count as zero. Traceable; one pass of comparisons and sums."""
    scalars = jnp.asarray(scalars)
    if scalars.dtype != jnp.uint32 or scalars.ndim not in (2, 3) or scalars.shape[0] != 8:
        raise BadInput(f"ops.msm_split.classify: scalars must be canonical Fr limbs, uint32 of shape (8, N) or "
                       f"(8, P, N), got {scalars.dtype}{scalars.shape}")
    one, other = _kind_masks(scalars, inf)
    n = scalars.shape[-1]
    n1 = jnp.sum(one, axis=-1, dtype=jnp.int32)
    n2 = jnp.sum(other, axis=-1, dtype=jnp.int32)
    return jnp.stack([n - n1 - n2, n1, n2]).astype(jnp.int32)


classify_jit = jax.jit(classify)  # the jitted classify, shared by the prover and the benchmarks


def capacity_for(counts, minimum: int = MIN_CAPACITY) -> int:
    """The static "other" capacity for :func:`msm_split` from :func:`classify` counts (``(3, P)``, ``(3,)``, or
    stacked ``(..., 3, P)`` per chunk): the largest "other" count over partitions (and chunks), rounded up to a power
    of two, at least ``minimum`` -- so one round per pass, and counts within a factor of two share one program."""
    c = np.asarray(counts)
    if c.ndim == 0 or c.shape[-2 if c.ndim >= 2 else 0] != 3:
        raise BadInput(f"ops.msm_split.capacity_for: expected counts of shape (3, P) (or (..., 3, P)), got "
                       f"{c.shape}")
    others = c[..., 2, :] if c.ndim >= 2 else c[2:3]
    return M.pow2_ceil(max(int(others.max(initial=0)), int(minimum)))


def fractions(counts) -> dict:
    """The zero / one / other share of one MSM's scalars, for logs: ``{"zero": f, "one": f, "other": f, "n": N,
    "partitions": P, "per_partition": [[zero, one, other], ...]}`` (shares in [0, 1]) from :func:`classify`'s
    counts ``(3, P)`` or ``(3,)``."""
    c = np.asarray(counts, np.int64)
    if c.ndim == 1:
        c = c[:, None]
    if c.ndim != 2 or c.shape[0] != 3:
        raise BadInput(f"ops.msm_split.fractions: expected counts of shape (3, P), got {c.shape}")
    n = int(c[:, 0].sum()) if c.shape[1] else 0
    tot = c.sum()
    share = (c.sum(axis=1) / tot) if tot else np.zeros(3)
    per = (c / np.maximum(c.sum(axis=0), 1)).T
    out = {k: float(v) for k, v in zip(KINDS, share)}
    out.update(n=n, partitions=int(c.shape[1]), per_partition=[[float(x) for x in row] for row in per])
    return out


# ---------------------------------------------------------------------------------------------------------------
# The split pass
# ---------------------------------------------------------------------------------------------------------------


def _excl_cumsum(x):
    return jnp.cumsum(x) - x


def _split_pass(curve, config: MsmConfig, c: int, capacity: int, shared: bool, bases, sc, prev: XYZZ,
                lanes=None, base0=0) -> XYZZ:
    """One chunk: bases flat (``(*coord, n)`` shared or ``(*coord, G n)``; or a whole :class:`~cuzk_jax.ops.msm.
    BaseRows` whose point ``base0 + i`` is the chunk's ``i``), canonical scalars ``(8, G, n)`` (zeros where the base
    is at infinity), ``prev`` XYZZ ``(G,)`` -> ``prev + sum s_i B_i`` per partition (module docstring, steps 1-5;
    rounds of ``capacity`` "other" scalars until none is left)."""
    _, G, n = sc.shape
    W, H = M.num_windows(c), 1 << (c - 1)
    NB = G * W * H
    L = G * n + W * G * capacity  # merged list: every point a one + every other digit
    plan = M.Plan(G=G, n=-(-L // (G * W)), c=c, shared_bases=shared)
    g_ix = jnp.arange(G, dtype=jnp.int32)[:, None]
    i_ix = jnp.arange(n, dtype=jnp.int32)[None, :]
    base_ix = i_ix + base0 if shared else g_ix * n + i_ix  # (G|1, n): index of the base in the flat base array
    base_ix = jnp.broadcast_to(base_ix, (G, n))

    one, other = _kind_masks(sc)
    rank_o = jnp.cumsum(other, axis=1, dtype=jnp.int32) - 1  # rank of an "other" scalar in its partition
    q_all = jnp.sum(other, axis=1, dtype=jnp.int32)  # "other" scalars per partition
    max_o = jnp.max(q_all)
    n_one = jnp.sum(one, axis=1, dtype=jnp.int32)
    rank_1 = jnp.cumsum(one, axis=1, dtype=jnp.int32) - 1

    def round_(k, prev):
        # ---- others of this round, compacted to `capacity` slots per partition ----
        # unselected points get an out-of-bounds slot and are dropped: no scatter collisions on a trash slot
        lo = k * capacity
        sel = other & (rank_o >= lo) & (rank_o < lo + capacity)
        slot = jnp.where(sel, rank_o - lo, capacity)
        rows = jnp.broadcast_to(g_ix, (G, n))
        src = jnp.zeros((G, capacity), jnp.int32).at[rows, slot].set(jnp.broadcast_to(i_ix, (G, n)), mode="drop")
        live = jnp.arange(capacity, dtype=jnp.int32)[None, :] < jnp.clip(q_all - lo, 0, capacity)[:, None]
        idx = src + base0 if shared else g_ix * n + src
        sc_c = jnp.where(live[None], jnp.take_along_axis(sc, src[None], axis=2), jnp.uint32(0))
        d = jnp.transpose(M.signed_digits(sc_c, c), (1, 0, 2))  # (G, W, capacity)
        w_ix = jnp.arange(W, dtype=jnp.int32)[None, :, None]
        okey = jnp.where(d != 0, (g_ix[:, :, None] * W + w_ix) * H + jnp.abs(d) - 1, NB)
        oval = jnp.where(d < 0, idx[:, None, :] | jnp.int32(-(1 << 31)), idx[:, None, :])
        oval = jnp.broadcast_to(oval, okey.shape)
        q = jnp.sum(okey < NB, axis=(1, 2), dtype=jnp.int32)  # live "other" pairs per partition
        okey, oval = lax.sort((okey.reshape(-1), oval.reshape(-1)), num_keys=1, is_stable=False)

        # ---- ones (first round only): bucket 0 of window 0, in front of the partition's other pairs ----
        ones = one & (k == 0)
        o = jnp.where(k == 0, n_one, 0)
        O_incl = jnp.cumsum(o)
        start = _excl_cumsum(q) + O_incl - o  # where partition g's block starts in the merged list
        pos1 = jnp.where(ones, start[:, None] + rank_1, L)
        keys = jnp.full((L,), NB, jnp.int32).at[pos1].set(jnp.broadcast_to(g_ix * W * H, (G, n)), mode="drop")
        vals = jnp.zeros((L,), jnp.int32).at[pos1].set(base_ix, mode="drop")
        e = jnp.arange(okey.shape[0], dtype=jnp.int32)
        okl = okey < NB
        pos_o = jnp.where(okl, e + O_incl[jnp.minimum(okey // (W * H), G - 1)], L)
        keys = keys.at[pos_o].set(okey, mode="drop")
        vals = vals.at[pos_o].set(oval, mode="drop")
        count = jnp.sum(q) + jnp.sum(o)
        return M.run_pass(curve, plan, config, bases, keys, vals, count, prev, lanes=lanes)

    def cond(st):
        k, _ = st
        return (k == 0) | (k * capacity < max_o)

    def body(st):
        k, prev = st
        return k + 1, round_(k, prev)

    _, out = lax.while_loop(cond, body, (jnp.int32(0), prev))
    return out


def split_chunk(P: int, n: int, capacity: int, max_pairs: int, window: int | None = None) -> tuple[int, int, int]:
    """(points per pass, "other" capacity per pass, window) of :func:`msm_split` for ``P`` partitions of ``n``
    (padded) points: all ``n`` points in one pass when the merged list (``P n`` one-slots plus ``W P capacity`` digit
    pairs) fits ``max_pairs``; else the largest power-of-two chunk (at least 64) that fits with a capacity scaled to
    the chunk -- twice its share ``capacity chunk / n``, at least :data:`MIN_CAPACITY` (a chunk with more "other"
    scalars than that takes another round, so skew costs time, never correctness) -- and the window sized for it."""

    def sizes(chunk):
        cap = capacity if chunk == n else min(capacity, max(MIN_CAPACITY, 2 * capacity * chunk // n))
        c = window or M.window_bits(M.padded_size(cap))
        return cap, c, P * chunk + M.num_windows(c) * P * cap

    chunk = n
    cap, c, L = sizes(chunk)
    while chunk > M.MIN_PADDED and chunk % 2 == 0 and L > max_pairs:
        chunk //= 2
        cap, c, L = sizes(chunk)
    return chunk, cap, c


@x64
def msm_split(
    bases: Affine | M.BaseRows,
    scalars,
    group="g1",
    *,
    config: MsmConfig | None = None,
    capacity: int = MIN_CAPACITY,
    window: int | None = None,
    max_pairs: int = M.DEFAULT_MAX_PAIRS,
    lanes: int | None = None,
) -> Jacobian:
    """``sum_i scalars[..., i] * bases[..., i]`` by the split method (module docstring); the same group element
    as :func:`cuzk_jax.ops.msm.msm` for every input.

    ``bases`` / ``scalars`` / ``config`` / ``lanes`` as :func:`cuzk_jax.ops.msm.msm` (scalars canonical, each
    ``< r``). ``capacity`` (static): "other" scalars per partition per round, from :func:`capacity_for`; any value
    gives the right answer (more rounds when it is too small). ``window``: the digit window of the "other"
    scalars (default :func:`cuzk_jax.ops.msm.window_bits` of ``capacity``). ``max_pairs``: bound on the merged
    list per pass (``P n + W P capacity`` int32 pairs); longer point ranges run in chunks (:func:`split_chunk`).
    Traceable; jit with the keyword arguments static (:func:`msm_split_jit`).
    """
    curve = M.curve_of(group)
    config, scalars, batched = M.check_args(config, scalars)
    max_pairs = config.max_pairs or max_pairs  # the config's bound wins over the default argument
    if not isinstance(capacity, int) or capacity <= 0:
        raise BadInput(f"ops.msm_split.msm_split: capacity must be a positive int, got {capacity!r}")
    _, P, N = scalars.shape
    bases, rows = M.resolve_bases(curve, config, bases, N, "ops.msm_split.msm_split")
    shared = rows or M.bases_shared(bases, curve.coord_ndim, P, N, batched, "ops.msm_split.msm_split")
    if N == 0:
        res = curve.jacobian_identity((P,))
        return res if batched else Jacobian(*[x[..., 0] for x in res])

    n = M.padded_size(N)
    bases, scalars = M.pad_inputs(curve, bases, scalars, rows, shared, n)
    chunk, cap, c = split_chunk(P, n, capacity, max_pairs, window)

    def chunk_body(j, prev):
        lo = j * chunk
        scj = lax.dynamic_slice_in_dim(scalars, lo, chunk, axis=2)
        if rows:  # the pairs index into the whole array: no slice of the bases
            return _split_pass(curve, config, c, cap, True, bases, scj, prev, lanes, base0=lo)
        return _split_pass(curve, config, c, cap, shared, M.chunk_bases(curve, bases, lo, chunk, shared), scj, prev,
                           lanes)

    prev = M._ident(curve.field, (P,))
    res = chunk_body(0, prev) if chunk == n else lax.fori_loop(0, n // chunk, chunk_body, prev)
    jac = M.rolled(curve).xyzz_to_jacobian(res)
    return jac if batched else Jacobian(*[x[..., 0] for x in jac])


def msm_split_jit(group: str = "g1", config: MsmConfig | str | None = None, **static):
    """A cached ``jax.jit`` of :func:`msm_split` for a group, a config and fixed keyword arguments (``capacity``,
    ``window``, ``max_pairs``, ``lanes``); as :func:`cuzk_jax.ops.msm.msm_jit`."""
    return _msm_split_jit(group, MsmConfig.coerce(config), tuple(sorted(static.items())))


@functools.lru_cache(maxsize=None)
def _msm_split_jit(group, config: MsmConfig, static):
    return jax.jit(functools.partial(msm_split, group=group, config=config, **dict(static)))


def inf_mask(bases):
    """The ``inf`` mask of an Affine; None for :class:`~cuzk_jax.ops.msm.BaseRows` (which hold no point at
    infinity)."""
    return None if isinstance(bases, M.BaseRows) else bases.inf


def msm_split_auto(bases: Affine, scalars, group="g1", *, config: MsmConfig | str | None = None, **static):
    """Host entry: :func:`classify` on the device, :func:`capacity_for` on the host, then the jitted
    :func:`msm_split`. Returns ``(Jacobian, fractions dict)`` (see :func:`fractions`)."""
    counts = np.asarray(classify_jit(scalars, inf_mask(bases)))
    cap = capacity_for(counts)
    return msm_split_jit(group, config, capacity=cap, **static)(bases, scalars), fractions(counts)


SPARSE_SHARE = 0.5  # msm_auto splits when at least this share of the scalars is 0 or 1


def msm_auto(bases: Affine, scalars, group="g1", *, config: MsmConfig | str | None = None,
             sparse_share: float = SPARSE_SHARE, **static):
    """The pipeline's one call: :func:`classify`, then :func:`msm_split` (capacity from :func:`capacity_for`) when
    at least ``sparse_share`` of the scalars are zero or one (the A / B / L MSMs of a PoRep witness), else the plain
    :func:`cuzk_jax.ops.msm.msm` (the dense H MSM). Returns ``(Jacobian, fractions dict)`` with ``"path"`` and
    ``"capacity"`` added to :func:`fractions`' report. ``static``: ``window`` / ``max_pairs`` / ``lanes``."""
    counts = np.asarray(classify_jit(scalars, inf_mask(bases)))
    fr = fractions(counts)
    if fr["zero"] + fr["one"] >= sparse_share:
        cap = capacity_for(counts)
        fr.update(path="split", capacity=cap)
        return msm_split_jit(group, config, capacity=cap, **static)(bases, scalars), fr
    fr.update(path="plain", capacity=None)
    return M.msm_jit(group, config, **static)(bases, scalars), fr


# ---------------------------------------------------------------------------------------------------------------
# Streamed MSM: bases in host memory, copied to the device a chunk at a time
# ---------------------------------------------------------------------------------------------------------------


def _host_kind_counts(sc: np.ndarray, inf: np.ndarray, cs: int) -> np.ndarray:
    """numpy twin of :func:`classify` per chunk of ``cs`` points: ``(8, P, N)`` -> ``(nc, 3, P)``."""
    high = ~sc[1:].any(axis=0)
    zero = (high & (sc[0] == 0)) | inf[None, :]
    one = high & (sc[0] == 1) & ~inf[None, :]
    other = ~zero & ~one
    nc = -(-sc.shape[-1] // cs)
    seg = np.arange(sc.shape[-1]) // cs
    out = np.zeros((nc, 3, sc.shape[1]), np.int64)
    for k, m in enumerate((zero, one, other)):
        for p in range(sc.shape[1]):
            out[:, k, p] = np.bincount(seg, weights=m[p], minlength=nc)
    return out


@functools.lru_cache(maxsize=None)
def _device_chunk_counts(cs: int, nc: int):
    """Jitted per-chunk :func:`classify` of device scalars ``(8, P, N)`` -> ``(nc, 3, P)`` (no padded copy)."""

    def f(sc, inf):
        one, other = _kind_masks(sc, inf)
        seg = jnp.arange(sc.shape[-1], dtype=jnp.int32) // cs
        zero = ~one & ~other
        return jnp.stack([jax.ops.segment_sum(m.T.astype(jnp.int32), seg, num_segments=nc)
                          for m in (zero, one, other)], axis=1)

    return jax.jit(f)


@functools.lru_cache(maxsize=None)
def _slice_program(cs: int):
    """Chunk ``[start, start + cs)`` of device scalars ``(8, P, N)`` with its first ``skip`` points zeroed (they
    belong to the previous chunk: the last chunk is aligned to the end of the array, see :func:`stream_chunks`)."""

    def f(sc, start, skip):
        sc = lax.dynamic_slice_in_dim(sc, start, cs, axis=2)
        return jnp.where(jnp.arange(cs, dtype=jnp.int32) < skip, jnp.uint32(0), sc)

    return jax.jit(f)


@functools.lru_cache(maxsize=None)
def _add_program(group: str):
    """Jacobian ``a + b`` (complete: infinity and doubling handled) in the rolled schedule, jitted once per group."""
    return jax.jit(x64(M.rolled(M.curve_of(group)).jacobian_add))


def stream_chunks(n: int, chunk: int) -> tuple[int, list[tuple[int, int]]]:
    """(points per chunk ``cs`` = :func:`cuzk_jax.ops.msm.padded_size` of ``chunk``, [(start, skip), ...]): chunk
    ``j`` covers points ``[start, start + cs)``, of which the first ``skip`` belong to the previous chunk (the last
    chunk ends at ``n`` rather than past it, so no chunk needs padding unless ``n < cs``)."""
    if not isinstance(chunk, (int, np.integer)) or chunk <= 0:
        raise BadInput(f"ops.msm_split.msm_streamed: chunk must be a positive int, got {chunk!r}")
    cs = M.padded_size(int(chunk))
    nc = max(1, -(-n // cs))
    out = []
    for j in range(nc):
        start = max(0, min(j * cs, n - cs))
        out.append((start, j * cs - start))
    return cs, out


def msm_streamed(
    host_bases: Affine,
    scalars,
    group="g1",
    *,
    config: MsmConfig | str | None = None,
    chunk: int,
    split: bool = False,
    capacity: int | None = None,
    window: int | None = None,
    device=None,
) -> Jacobian:
    """``sum_i scalars[..., i] * bases[i]`` with the bases in host memory, streamed to the device ``chunk`` points at
    a time, double-buffered (module docstring); equal as a group element to the resident
    :func:`cuzk_jax.ops.msm.msm`.

    ``host_bases``: :class:`Affine` of numpy arrays (Montgomery limbs ``(*coord, N)``, ``inf`` ``(N,)``), shared by
    every partition. ``scalars``: canonical uint32 ``(8, N)`` / ``(8, P, N)``; a numpy array streams with the bases,
    a ``jax.Array`` stays on its device and each chunk is sliced there. ``chunk``: points per device chunk (rounded
    up to a power of two, at least 64: one compiled program per chunk size). ``split``: run each chunk with
    :func:`msm_split` (``capacity`` None: :func:`capacity_for` over the per-chunk counts, computed once up front).
    ``window``: as :func:`cuzk_jax.ops.msm.msm`. ``device``: a device to commit the chunks to (None: JAX's default
    placement, uncommitted, so the chunks run the resident path's compiled programs; committed device scalars pull
    them to their device). Returns a :class:`Jacobian`, batch ``(P,)`` (``()`` for ``(8, N)`` scalars).
    """
    curve = M.curve_of(group)
    nd = curve.coord_ndim
    gname = curve.name
    config = MsmConfig.coerce(config)
    if not isinstance(host_bases, Affine):
        raise BadInput(f"ops.msm_split.msm_streamed: host_bases must be an Affine of numpy arrays, got "
                       f"{type(host_bases).__name__}")
    bx, by, binf = (np.asarray(a) for a in host_bases)
    lead = (12,) if nd == 1 else (2, 12)
    if bx.dtype != np.uint32 or by.dtype != np.uint32 or bx.shape[:nd] != lead or bx.ndim != nd + 1 \
            or by.shape != bx.shape or binf.dtype != np.bool_ or binf.shape != bx.shape[nd:]:
        raise BadInput(f"ops.msm_split.msm_streamed: {gname} host bases must be uint32 {lead + ('N',)} coordinates "
                       f"and a bool (N,) mask, got x {bx.dtype}{bx.shape}, y {by.dtype}{by.shape}, inf "
                       f"{binf.dtype}{binf.shape}")
    on_device = isinstance(scalars, jax.Array)
    sc = scalars if on_device else np.asarray(scalars)
    if sc.dtype != np.uint32 or sc.ndim not in (2, 3) or sc.shape[0] != 8:
        raise BadInput(f"ops.msm_split.msm_streamed: scalars must be canonical Fr limbs, uint32 of shape (8, N) or "
                       f"(8, P, N), got {sc.dtype}{sc.shape}")
    batched = sc.ndim == 3
    if not batched:
        sc = sc[:, None]
    _, P, N = sc.shape
    if bx.shape[nd] != N:
        raise BadInput(f"ops.msm_split.msm_streamed: {N} scalars per partition but {bx.shape[nd]} bases")
    cs, plan = stream_chunks(N, chunk)
    if N < cs:  # one short chunk: pad it (bases at infinity, scalars zero)
        pad = cs - N
        bx = np.pad(bx, [(0, 0)] * nd + [(0, pad)])
        by = np.pad(by, [(0, 0)] * nd + [(0, pad)])
        binf = np.pad(binf, (0, pad), constant_values=True)
        sc = jnp.pad(sc, ((0, 0), (0, 0), (0, pad))) if on_device else np.pad(sc, ((0, 0), (0, 0), (0, pad)))
    if split and capacity is None:
        if on_device:
            counts = np.asarray(_device_chunk_counts(cs, len(plan))(sc, jax.device_put(binf, device)))
        else:
            counts = _host_kind_counts(sc, binf, cs)
        capacity = capacity_for(np.moveaxis(counts, 0, -1).reshape(3, -1))
    # the chunk MSM is the shared jitted program of the resident path (same compiled code, one per chunk shape)
    kw = {} if window is None else {"window": window}
    prog = (msm_split_jit(gname, config, capacity=int(capacity), **kw) if split else M.msm_jit(gname, config, **kw))
    add = _add_program(gname)
    slice_ = _slice_program(cs)

    def put(j):
        s, skip = plan[j]
        arrs = [bx[..., s:s + cs], by[..., s:s + cs], binf[s:s + cs]]
        if not on_device:
            scj = sc[..., s:s + cs]
            if skip:
                scj = np.where(np.arange(cs) < skip, np.uint32(0), scj)
            arrs.append(scj)
        return jax.device_put(arrs, device)  # device None: uncommitted, the same compiled programs as resident

    acc = None
    nxt = put(0)
    for j, (start, skip) in enumerate(plan):
        cur = nxt
        if j + 1 < len(plan):
            nxt = put(j + 1)  # issued before chunk j's MSM: the copy overlaps it
        scj = slice_(sc, jnp.int32(start), jnp.int32(skip)) if on_device else cur[3]
        r = prog(Affine(*cur[:3]), scj)
        acc = r if acc is None else add(acc, r)
        acc = jax.block_until_ready(acc)  # at most two chunks of bases on the device: this one and the next
        del cur, scj, r
    return acc if batched else Jacobian(*[x[..., 0] for x in acc])


# ---------------------------------------------------------------------------------------------------------------
# Device memory estimate (for the memory planner)
# ---------------------------------------------------------------------------------------------------------------

# Per-element byte costs of the XLA-path programs' temporaries, calibrated on XLA's buffer assignment
# (``compiled.memory_analysis()`` on CPU, G1 and G2, 2^6..2^14 points, 1-4 partitions; the estimate is 1.0-1.4x
# it, which the tests check). A GPU sort may take more scratch than XLA:CPU's; the bucket state is counted apart.
PAIR_BYTES = 40  # plain path, per (key, value) pair: key, value, their sorted and padded copies, window words/digits
POINT_BYTES_PLAIN = 48  # plain path, per (partition, point): masked scalars, the uint64 limbs of the digit recoding
SPLIT_SLOT_BYTES = 96  # split path, per (partition, point): kind masks, ranks, merged-list keys/values and copies
SPLIT_PAIR_BYTES = 128  # split path, per "other" digit pair: compacted scalars, digits, keys, values, the sort
# XLA step machine, per lane: the temporaries of its one XYZZ addition (stacked 64-bit CIOS products of a round)
# and of every phase's operand selection; the Pallas kernels keep theirs in registers.
LANE_BYTES = {"g1": 6 << 10, "g2": 36 << 10}


def _coord_bytes(group: str) -> int:
    return 48 if group == "g1" else 96


def base_bytes(n: int, group: str) -> int:
    """Device bytes of ``n`` affine bases: two coordinates of 12 (G1) / 24 (G2) uint32 limbs and an ``inf`` byte."""
    return n * (2 * _coord_bytes(group) + 1)


def _pass_state_bytes(plan: M.Plan, group: str, config: MsmConfig) -> int:
    """Bucket / partial / accumulator arrays of one accumulation pass (XYZZ points: 4 coordinates)."""
    pt = 4 * _coord_bytes(group)
    if config.kernel == "xla":
        ms = M.machine_shape(plan)
        return pt * (2 * (plan.NB + 1) + 8 * ms.lanes + 4 * (2 * ms.lanes + 1)) + LANE_BYTES[group] * ms.lanes
    # Pallas (ops.msm._pallas_pass): E, the buckets, the zero buffer, the kernel outputs -- ~6 (4 Lc, nbuf) arrays
    block = config.block or M.pallas_block(plan.M)
    seg = config.seg or M.pallas_seg(plan.M)
    nseg = -(-plan.M // (seg * block)) * block
    nbuf = M.pow2_ceil(max(2 * nseg, plan.NB + 2, 2 * block))
    return 6 * pt * nbuf


def _plain_work_bytes(n: int, p: int, group: str, config: MsmConfig, window=None,
                      max_pairs: int | None = None) -> int:
    n = M.padded_size(n)
    c, G, chunk = M.pass_shape(p, n, max_pairs or M.default_max_pairs(n, window), window)
    plan = M.Plan(G=G, n=chunk, c=c, shared_bases=True)
    return PAIR_BYTES * plan.M + POINT_BYTES_PLAIN * p * n + _pass_state_bytes(plan, group, config)


def _split_work_bytes(n: int, p: int, group: str, config: MsmConfig, capacity: int, window=None,
                      max_pairs: int = M.DEFAULT_MAX_PAIRS) -> int:
    n = M.padded_size(n)
    chunk, capacity, c = split_chunk(p, n, capacity, max_pairs, window)
    W = M.num_windows(c)
    L = p * chunk + W * p * capacity
    plan = M.Plan(G=p, n=-(-L // (p * W)), c=c, shared_bases=True)
    return (SPLIT_SLOT_BYTES * p * chunk + SPLIT_PAIR_BYTES * W * p * capacity
            + _pass_state_bytes(plan, group, config))


def msm_device_bytes(n: int, p: int, group: str = "g1", path: str = "plain", chunk: int | None = None, *,
                     capacity: int | None = None, config: MsmConfig | str | None = None,
                     window: int | None = None) -> int:
    """Estimated peak device bytes of one MSM of ``p`` partitions over ``n`` shared bases of ``group``.

    Terms (B(n) = :func:`base_bytes`, 97 / 193 bytes per G1 / G2 point; S = 32 bytes per scalar; work(n) the
    temporaries of one program over n points, below):

    * ``"plain"`` (bases and scalars resident, :func:`cuzk_jax.ops.msm.msm`): ``B(n) + 32 p n + work_plain(p, n)``;
    * ``"split"`` (:func:`msm_split`): ``B(n) + 32 p n + work_split(p, n, capacity)``;
    * ``"streamed"`` / ``"streamed_split"`` (:func:`msm_streamed`, numpy scalars): ``2 (B(chunk) + 32 p chunk) +
      work(p, chunk)`` -- two chunks in flight, independent of ``n``;
    * ``"streamed_device_scalars"`` / ``"streamed_split_device_scalars"``: ``32 p n + 2 B(chunk) + 32 p chunk +
      work(p, chunk)`` -- the scalars stay resident.

    ``work_plain(p, n) = 40 M + 48 p n + state``: ``M = G W n'`` (key, value) pairs of one pass (``G`` partitions
    of ``n'`` points per pass as :func:`cuzk_jax.ops.msm.group_and_chunk` decides, so it stops growing past
    ``max_pairs``); ``work_split(p, n) = 96 p n' + 128 W p capacity + state`` (``n'`` points per pass,
    :func:`split_chunk`; ``W`` windows sized for ``capacity``); ``state``: the pass's bucket / partial /
    accumulator XYZZ arrays (XLA step machine: ``2 NB + 16 lanes`` points plus :data:`LANE_BYTES` per lane;
    Pallas: six ``(4 Lc, nbuf)`` buffers). ``capacity`` defaults to ``n / 64`` (the ~1 % "other" share of a PoRep
    witness, rounded to a power of two, at least 64). ``config``
    defaults to the platform's :meth:`MsmConfig.default`. An upper bound within a small factor of XLA's buffer
    assignment at test sizes (the tests check both), not an exact figure: allocator rounding and fragmentation are
    not modelled.
    """
    if path not in PATHS:
        raise BadInput(f"ops.msm_split.msm_device_bytes: unknown path {path!r}; expected one of {PATHS}")
    if n < 0 or p <= 0:
        raise BadInput(f"ops.msm_split.msm_device_bytes: need n >= 0 and p >= 1, got n={n}, p={p}")
    config = MsmConfig.coerce(config)
    streamed = path.startswith("streamed")
    split = "split" in path
    if streamed:
        if not chunk or chunk <= 0:
            raise BadInput(f"ops.msm_split.msm_device_bytes: path {path!r} needs a positive chunk, got {chunk!r}")
        cs = M.padded_size(chunk)
    else:
        cs = n
    if n == 0:
        return 0
    if capacity is None:
        capacity = M.pow2_ceil(max(MIN_CAPACITY, -(-min(n, cs) // 64)))
    work = (_split_work_bytes(cs, p, group, config, capacity, window) if split
            else _plain_work_bytes(cs, p, group, config, window))
    if not streamed:
        return base_bytes(M.padded_size(n), group) + 32 * p * M.padded_size(n) + work
    if path.endswith("device_scalars"):
        return 32 * p * n + 2 * base_bytes(cs, group) + 32 * p * cs + work
    return 2 * (base_bytes(cs, group) + 32 * p * cs) + work
