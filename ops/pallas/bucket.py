"""Pallas kernels for the MSM bucket phase (accumulation, reduction, window combination) -- see ops/msm.py.

Two kernels, each a private ``_kernel`` body with a public wrapper taking ``interpret=``:

* :func:`accumulate_bases` (``_acc_mixed_kernel``): the hot loop. The sorted (bucket key, base index | sign)
  pairs are cut into segments of ``seg`` pairs, one per lane (``block`` lanes per program). Each lane walks its
  segment, **gathers the affine base limbs through the sorted index list** (``b_ref[idx, l]`` on the unblocked
  base array, point-major, so one base is a few cache lines -- no sorted copy of the bases is materialised),
  negates y for negative digits, and
  adds it into an XYZZ accumulator with the mixed addition of :mod:`cuzk_jax.ops.curve`. A run of equal keys
  that starts and ends inside the segment is a complete bucket: it is stored straight into the bucket array (its
  only writer). The lane's first run and its last run may continue in the neighbouring segments; they are written
  to the lane's two *partial* slots ``2 l`` and ``2 l + 1`` with their keys (identity / the same key when unused),
  so the partial list is again sorted by key; the next level reads only the ``2 ceil(count / seg)`` slots of live
  lanes. Programs whose segments lie past the live count (the zero digits, sorted last) return at once.
* :func:`general_step` (``_general_kernel``): every later step, chosen by a runtime mode; the MSM's pass
  (:func:`cuzk_jax.ops.msm._pallas_pass`) compiles it once per mode (``modes=(mode,)``: small Triton compiles
  instead of one large one, compile time grows about quadratically with kernel size) and calls the modes
  in a straight line, the ACC levels in ``lax.while_loop`` s:

  - mode ``ACC``: the same segmented accumulation over XYZZ entries (general XYZZ addition) -- merges partials into
    buckets, sums rows into window sums, sums windows into the result. With ``final`` set (only one live segment)
    every run is written straight to its bucket.
  - mode ``WROW``: per lane (row) ``r``: running sums over ``L1`` consecutive entries from the top
    (``S += X_j; T += S``, so ``T = sum (j + 1) X_j``), then ``T + m_r S`` by double-and-add with
    ``m_r = (r mod K) L1`` (bucket reduction: the row's offset inside its window).
  - mode ``SHIFT``: per lane ``r``: ``2^(e0 + c (r mod W)) X_r`` by masked doublings (window combination: window
    ``w`` scaled by ``2^(c w)``, ``e0 = 0``; precomputed window tables: every lane by ``2^c``, ``e0 = c``,
    ``W = 1``). This chain of ``c (W - 1)`` doublings on a handful of lanes is latency, not work, so it has its own
    branch with the dedicated doubling (dbl-2008-s-1: 9 products in 3 rounds against 15 in 4).
  - mode ``MERGE``: ``Y_e + X_e`` (general addition) for the first ``n`` entries, two per lane, written over
    ``Y``: the bucket array of one chunk of an MSM's points added into the sum of the earlier chunks' (the only
    mode that reads ``Y``), so a chunked MSM reduces its buckets once (:func:`cuzk_jax.ops.msm.msm`).

Every loop holds one addition site (operands are selected per step): kernel 1 holds one copy of the mixed
addition, kernel 2 one copy of the general addition per branch (ACC, WROW, MERGE) and the doubling (SHIFT).

Field representation inside kernels: compiled for a GPU, the PTX fields of :mod:`cuzk_jax.ops.pallas.ptx_field`
(every limb row a 1-D uint32 vector of ``block`` lanes -- Triton only handles power-of-two tensors; every Fq product,
sum and difference one PTX carry-chain block, every Fq2 product one block; the products of a formula round through
ONE product block in a loop, and row loads/stores in loops: the compile-lean form); in interpret mode the limb rows
are stacked into ``(12, block)`` arrays (the :mod:`cuzk_jax.ops.field` layout) handled by the constant-free
:class:`~cuzk_jax.ops.pallas.limb_field.ArrayField` (same values, same formulas), which compiles fast on CPU.

Memory layout: points are uint32 "row" arrays ``(4 Lc, K)``: coordinate ``k`` of XYZZ occupies rows
``k Lc .. k Lc + Lc - 1`` with ``Lc = 12`` (G1) or 24 (G2: c0 limbs then c1 limbs); Montgomery form. Bucket /
destination arrays have a trash column (the last) that masked-off lanes write to (in interpret mode a masked
scatter still writes the old value, so masked lanes must not share a slot with live ones). Keys are int32 with the
sentinel :data:`SENT` for empty entries.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from cuzk_jax.ops.curve import XYZZ, Affine, select_point
from cuzk_jax.ops.field import x64
from cuzk_jax.ops.pallas import limb_field, ptx_field

SENT = np.int32(2**31 - 1)  # key of empty entries (sorts last)
MODE_ACC = 0
MODE_WROW = 1  # output T + m S per row, m = (r mod mp1) * L1
MODE_SHIFT = 2  # output 2^e X_r per lane, e = e0 + mp1 * (r mod mp2)
MODE_MERGE = 3  # output Y_e + X_e for every entry e < n (two per lane)
MODES = ("acc", "wrow", "shift", "merge")  # kernel branch names, in MODE_* order
NPRM = 8  # prm = [mode, count|rows|lanes, seg|L1, final, mbits, e0, mp1, mp2]
DEFAULT_BLOCK = 64
DEFAULT_NUM_WARPS = 2


# ---------------------------------------------------------------------------------------------------------------
# Field adapters: limb rows (list of (B,) uint32 vectors) <-> field elements of the kernel field
# ---------------------------------------------------------------------------------------------------------------


class Rep:
    """How a kernel turns limb rows into field elements: ``"limb"`` (compiled: PTX fields on uint32 limb lists) or
    ``"array"`` (interpret mode: stacked arrays)."""

    def __init__(self, curve, kind: str):
        self.curve = curve
        self.kind = kind
        self.g2 = curve.coord_ndim == 2
        self.Lc = 24 if self.g2 else 12
        if kind == "limb":
            self.F = ptx_field.fq2_lazy_loop if self.g2 else ptx_field.fq_loop
        elif kind == "array":
            self.F = limb_field.array_fq2 if self.g2 else limb_field.array_fq
        else:
            raise ValueError(kind)
        self.B = self.F.base if self.g2 else self.F  # the base field Fq (G2's coordinates are Fq2 over it)

    def elem(self, rows):
        if self.kind == "limb":
            v = [r.astype(self.F.dtype) for r in rows]
            return (v[:12], v[12:]) if self.g2 else v
        a = jnp.stack(list(rows))
        return a.reshape((2, 12) + a.shape[1:]) if self.g2 else a

    def rows(self, e):
        if self.kind == "limb":
            flat = (list(e[0]) + list(e[1])) if self.g2 else list(e)
            return [v.astype(jnp.uint32) for v in flat]
        a = e.reshape((self.Lc,) + e.shape[e.ndim - 1 :]) if self.g2 else e
        return [a[i] for i in range(self.Lc)]

    def base_elem(self, rows):
        """An element of the base field Fq from its 12 limb rows (for G1 the same as :meth:`elem`)."""
        if self.kind == "limb":
            return [r.astype(self.B.dtype) for r in rows]
        return jnp.stack(list(rows))

    def base_rows(self, e) -> list:
        """The 12 uint32 limb rows of an Fq element (:meth:`base_elem`'s inverse)."""
        if self.kind == "limb":
            return [v.astype(jnp.uint32) for v in e]
        return [e[i] for i in range(e.shape[0])]

    def point(self, rows) -> XYZZ:
        L = self.Lc
        return XYZZ(*[self.elem(rows[k * L : (k + 1) * L]) for k in range(4)])

    def point_rows(self, p: XYZZ) -> list:
        out = []
        for c in p:
            out += self.rows(c)
        return out

    def ident_rows(self, B):
        z = jnp.zeros((B,), jnp.uint32)
        return [z] * (4 * self.Lc)


def _sel_rows(mask, a, b):
    return [jnp.where(mask, x, y) for x, y in zip(a, b)]


def _is_ident_rows(rep, rows):
    """XYZZ identity <=> ZZ == 0 (rows 2 Lc .. 3 Lc - 1)."""
    acc = rows[2 * rep.Lc]
    for r in rows[2 * rep.Lc + 1 : 3 * rep.Lc]:
        acc = acc | r
    return acc == 0


def load_rows(ref, nrows, idx, major="row", start=0):
    """Rows ``start .. start + nrows - 1`` of ``ref`` at columns ``idx`` (``major="point"``: ``ref[idx, r]``) as ONE
    ``lax.fori_loop`` whose carry holds the rows and shifts by one each iteration (each iteration loads one row with
    a dynamic row index), so the program holds ONE load site instead of ``nrows`` -- the compile-lean form
    (Triton's compile time grows about quadratically with kernel size; straight-line loads and stores, one site
    per row, were no faster on the H200: REMOVED_VARIANTS.md)."""
    get = (lambda r: ref[idx, r + start]) if major == "point" else (lambda r: ref[r + start, idx])
    init = tuple(jnp.zeros(idx.shape, ref.dtype) for _ in range(nrows))
    rows = lax.fori_loop(0, nrows, lambda r, c: c[1:] + (get(r),), init)
    return list(rows)


def store_rows(ref, rows, idx, mask):
    """``ref[r, idx] = rows[r]`` where ``mask``: one store site in a loop (see :func:`load_rows`)."""

    def body(r, carry):
        plt.store(ref.at[r, idx], carry[0], mask=mask)
        return carry[1:] + carry[:1]

    lax.fori_loop(0, len(rows), body, tuple(rows))


# ---------------------------------------------------------------------------------------------------------------
# Segmented accumulation (shared by both kernels)
# ---------------------------------------------------------------------------------------------------------------


def _accumulate(rep, lanes, count, seg, final, keys_ref, fetch, make, add, p_ref, pk_ref, y_ref):
    """Walk ``seg`` sorted entries per lane (see the module docstring): entry ``e``'s operand is
    ``make(fetch(ee), live)`` -- ``fetch`` issues the loads (a tuple of arrays), ``make`` builds the operand from
    them -- and ``add(acc_xyzz, operand) -> xyzz``. Writes complete runs to ``y_ref`` and the two partial slots per
    lane. (Each step loads its own entry, then adds: fetching entry ``t + 1`` during step ``t``'s addition was
    slower on the H200, REMOVED_VARIANTS.md.)"""
    B = lanes.shape[0]
    trash = y_ref.shape[1] - 1
    seg0 = lanes * seg
    ident = rep.ident_rows(B)
    sent = jnp.full((B,), SENT, jnp.int32)

    def load(t):  # (live, key, fetched words) of this lane's entry t
        e = seg0 + t
        live = e < count
        ee = jnp.where(live, e, 0)
        return live, jnp.where(live, keys_ref[ee], SENT), fetch(ee)

    def body(t, carry):
        acc_rows, run_key, first = carry
        live, k, raw = load(t)
        operand = make(raw, live)
        new_run = (t == 0) | (k != run_key)
        flush = (t > 0) & new_run
        is_first = first != 0
        to_first = flush & is_first & ~final
        to_bucket = flush & (~is_first | final) & ~_is_ident_rows(rep, acc_rows)
        store_rows(p_ref, acc_rows, 2 * lanes, to_first)
        plt.store(pk_ref.at[2 * lanes], run_key, mask=to_first)
        store_rows(y_ref, acc_rows, jnp.where(to_bucket, run_key, trash), to_bucket)
        first = jnp.where(flush, 0, first)
        a = rep.point(_sel_rows(new_run, ident, acc_rows))
        r = add(a, operand)
        return rep.point_rows(r), k, first

    carry0 = (ident, sent, jnp.ones((B,), jnp.int32))
    acc_rows, run_key, first = lax.fori_loop(0, seg, body, carry0)
    is_first = first != 0
    # the last run: straight to its bucket when final, else to the partial slots
    to_bucket = final & ~_is_ident_rows(rep, acc_rows)
    store_rows(y_ref, acc_rows, jnp.where(to_bucket, run_key, trash), to_bucket)
    m0 = is_first | final
    store_rows(p_ref, _sel_rows(final, ident, acc_rows), 2 * lanes, m0)
    plt.store(pk_ref.at[2 * lanes], jnp.where(final, SENT, run_key), mask=m0)
    store_rows(p_ref, _sel_rows(final | is_first, ident, acc_rows), 2 * lanes + 1, lanes >= 0)
    plt.store(pk_ref.at[2 * lanes + 1], jnp.where(final, SENT, run_key), mask=lanes >= 0)


# ---------------------------------------------------------------------------------------------------------------
# Kernel 1: accumulation of affine bases (mixed additions), level 1
# ---------------------------------------------------------------------------------------------------------------


def _acc_mixed_kernel(prm_ref, keys_ref, vals_ref, b_ref, yin_ref, p_ref, pk_ref, y_ref, *, rep, block, seg,
                      dbl_branch=False, marked=False):
    del yin_ref  # aliased with y_ref
    pid = pl.program_id(0)
    lanes = pid * block + jnp.arange(block, dtype=jnp.int32)
    count = prm_ref[1]
    final = prm_ref[3] != 0
    F = rep.F
    Lc = rep.Lc
    curve = rep.curve

    def fetch(ee):
        v = vals_ref[ee]
        idx = v & jnp.int32(0x7FFFFFFF)
        if marked:  # value -1: no base (read base 0, unused)
            idx = jnp.where(v == -1, 0, idx)
        # point-major b_ref (num_bases, 2 Lc): one base is 2 Lc consecutive words
        return (v,) + tuple(load_rows(b_ref, 2 * Lc, idx, major="point"))

    def make(raw, live):
        v, xy = raw[0], list(raw[1:])
        x, y = rep.elem(xy[:Lc]), rep.elem(xy[Lc:])
        y = F.select(v < 0, F.neg(y), y)  # the sign bit of the pair's value: a negative digit
        return Affine(x, y, ~live | (v == -1) if marked else ~live)

    def add(a, p):
        if not dbl_branch:  # the unified formula: X1^2 for the doubling case in every step
            return curve.xyzz_add_mixed(a, p, F=F)
        # the addition without the doubling case; a doubling of acc only when a lane of the program needs it
        # (acc == p: a repeated base in one bucket), which distinct bases practically never do
        r, need = curve.xyzz_add_mixed_no_dbl(a, p, F=F)
        any_need = jnp.max(need.astype(jnp.int32)) > 0  # (Triton lowers reduce_max, not reduce_or)
        return lax.cond(any_need, lambda: select_point(F, need, curve.xyzz_double(a, F=F), r), lambda: r)

    # Programs past the live count do nothing: their partial slots lie past the next level's count and are
    # never read.
    @pl.when(pid * block * seg < count)
    def _():
        _accumulate(rep, lanes, count, seg, final, keys_ref, fetch, make, add, p_ref, pk_ref, y_ref)


# ---------------------------------------------------------------------------------------------------------------
# Kernel 2: general XYZZ step (segmented accumulation of XYZZ entries, or weighted row sums)
# ---------------------------------------------------------------------------------------------------------------


def _general_kernel(prm_ref, keys_ref, x_ref, yin_ref, p_ref, pk_ref, y_ref, *, rep, block, modes=MODES):
    pid = pl.program_id(0)
    lanes = pid * block + jnp.arange(block, dtype=jnp.int32)
    mode = prm_ref[0]
    n = prm_ref[1]
    s = prm_ref[2]
    nrows = 4 * rep.Lc
    curve = rep.curve
    F = rep.F

    def add(a, b):
        return curve.xyzz_add(a, b, F=F)

    # ---- ACC ----
    def fetch(ee):
        return tuple(load_rows(x_ref, nrows, ee))

    def make(raw, live):
        return rep.point(_sel_rows(live, list(raw), rep.ident_rows(block)))

    if "acc" in modes:
        @pl.when((mode == MODE_ACC) & (pid * block * s < n))
        def _():
            _accumulate(rep, lanes, n, s, prm_ref[3] != 0, keys_ref, fetch, make, add, p_ref, pk_ref, y_ref)

    # ---- WROW ----
    if "wrow" in modes:
        @pl.when((mode == MODE_WROW) & (pid * block < n))
        def _():
            L1 = s
            mbits = prm_ref[4]
            mp1 = prm_ref[6]
            live = lanes < n
            trash = y_ref.shape[1] - 1
            base = jnp.where(live, lanes * L1, 0)
            # m = (r mod K) L1: phase 1 running sums, phase 2 double-and-add of D over mbits bits, last T + D
            m_rows = (lanes % jnp.maximum(mp1, 1)) * L1
            ident = rep.ident_rows(block)
            nsteps = 2 * L1 + 2 * mbits + 1

            def body(u, carry):
                S_, T_, D_ = carry
                in1 = u < 2 * L1
                in2 = (u >= 2 * L1) & (u < 2 * L1 + 2 * mbits)
                last = ~in1 & ~in2
                even = (u % 2) == 0
                v = u - 2 * L1
                j = jnp.maximum(L1 - 1 - u // 2, 0)
                xj = load_rows(x_ref, nrows, base + j)
                dbl2 = in2 & even  # phase-2 doubling D + D
                add2 = in2 & ~even  # phase-2 addition D + S, kept where the bit is set
                bit = ((m_rows >> jnp.maximum(mbits - 1 - v // 2, 0)) & 1) == 1
                # operands: phase 1 even (S, x_j), odd (T, S); phase 2 (D, D) / (D, S); last (T, D)
                a_s = in1 & even
                a_t = (in1 & ~even) | last
                b_x = in1 & even
                b_s = (in1 & ~even) | add2
                a = [jnp.where(a_s, s1, jnp.where(a_t, t1, d1)) for s1, t1, d1 in zip(S_, T_, D_)]
                b = [jnp.where(b_x, x1, jnp.where(b_s, s1, d1)) for x1, s1, d1 in zip(xj, S_, D_)]
                r = rep.point_rows(add(rep.point(a), rep.point(b)))
                S_n = _sel_rows(a_s, r, S_)
                T_n = _sel_rows(a_t, r, T_)
                D_n = _sel_rows(dbl2 | (add2 & bit), r, D_)
                return S_n, T_n, D_n

            S_, T_, D_ = lax.fori_loop(0, nsteps, body, (ident, ident, ident))
            store_rows(y_ref, T_, jnp.where(live, lanes, trash), live)

    # ---- SHIFT ----
    if "shift" in modes:
        @pl.when((mode == MODE_SHIFT) & (pid * block < n))
        def _():
            mbits = prm_ref[4]
            live = lanes < n
            trash = y_ref.shape[1] - 1
            e_lane = prm_ref[5] + prm_ref[6] * (lanes % jnp.maximum(prm_ref[7], 1))
            D0 = load_rows(x_ref, nrows, jnp.where(live, lanes, 0))

            def body(u, D_):  # infinity doubles to infinity (ZZ = 0), so no special case
                r = rep.point_rows(curve.xyzz_double(rep.point(D_), F=F))
                return tuple(_sel_rows(u < e_lane, r, D_))

            D_ = lax.fori_loop(0, mbits, body, tuple(D0))
            store_rows(y_ref, list(D_), jnp.where(live, lanes, trash), live)

    # ---- MERGE ----
    if "merge" in modes:
        half = x_ref.shape[1] // 2  # the grid has one lane per two entries

        @pl.when((mode == MODE_MERGE) & (pid * block < n))
        def _():
            trash = y_ref.shape[1] - 1

            def body(h, carry):
                e = lanes + h * half
                live = e < n
                at = jnp.where(live, e, 0)
                r = add(rep.point(load_rows(yin_ref, nrows, at)), rep.point(load_rows(x_ref, nrows, at)))
                store_rows(y_ref, rep.point_rows(r), jnp.where(live, e, trash), live)
                return carry

            lax.fori_loop(0, 2, body, 0)  # one addition site


# ---------------------------------------------------------------------------------------------------------------
# Wrappers
# ---------------------------------------------------------------------------------------------------------------


def compiler_params(num_warps, interpret):
    # Triton parameters select the Triton backend explicitly (JAX may otherwise pick Mosaic GPU); num_stages=1: no
    # software pipelining of the loads in the kernels' loops (3 stages were no faster on the H200:
    # REMOVED_VARIANTS.md)
    if interpret:
        return None
    return plt.CompilerParams(num_warps=num_warps, num_stages=1)


def full_spec(shape):
    nd = len(shape)
    return pl.BlockSpec(tuple(shape), lambda i, nd=nd: (0,) * nd)


ANY_SPEC = pl.BlockSpec(memory_space=pl.ANY)


@x64
def accumulate_bases(curve, count, final, keys, vals, bases, buckets, *, seg, block=DEFAULT_BLOCK,
                     num_warps=DEFAULT_NUM_WARPS, interpret=False, dbl_branch=False, marked=False,
                     width: int | None = None):
    """Level-1 accumulation (kernel 1).

    ``count``: live pairs (int32 scalar); ``final``: bool scalar, true when a single lane holds every live pair
    (then every run goes straight to its bucket); ``keys``/``vals``: sorted int32 pairs of length
    ``nseg * seg`` with ``nseg`` a multiple of ``block``; ``bases``: the affine bases as uint32
    ``(num_bases, 2 Lc)``, point-major (x limbs then y limbs of one base are consecutive, so a gathered base is a
    few cache lines); ``buckets``: rows ``(4 Lc, NY)`` (last column trash), updated in place. Returns ``(partials (4 Lc, 2 nseg), partial keys (2 nseg,),
    buckets)``. ``dbl_branch``: the mixed addition without its
    doubling case (10 products instead of 11), the doubling computed in a branch taken only when a lane of the
    program adds a point to itself (``MsmConfig.dbl_branch``; otherwise the unified mixed addition). ``marked``: a
    value of ``-1`` is a pair without a base, whose operand is the point at infinity (the fixed-base method's zero
    digits, :mod:`cuzk_jax.ops.fixed_base`).
    ``width`` (>= ``2 nseg``, default ``2 nseg``): the partial arrays' length, so that a caller whose next level
    reads wider buffers gets them without a padded copy (entries past ``2 nseg`` are left unwritten: the next
    level reads only its live count).
    """
    rep = Rep(curve, "array" if interpret else "limb")
    nrows = 4 * rep.Lc
    size = keys.shape[0]
    if size % (seg * block):
        raise ValueError(f"pair count {size} is not a multiple of seg * block = {seg * block}")
    nseg = size // seg
    width = 2 * nseg if width is None else width
    if width < 2 * nseg:
        raise ValueError(f"width {width} is below the partial slots' 2 nseg = {2 * nseg}")
    prm = jnp.stack([jnp.int32(MODE_ACC), jnp.asarray(count, jnp.int32), jnp.int32(seg),
                     jnp.asarray(final, jnp.int32)] + [jnp.int32(0)] * (NPRM - 4))
    kernel = functools.partial(_acc_mixed_kernel, rep=rep, block=block, seg=seg, dbl_branch=bool(dbl_branch),
                               marked=bool(marked))
    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((nrows, width), jnp.uint32),
            jax.ShapeDtypeStruct((width,), jnp.int32),
            jax.ShapeDtypeStruct(buckets.shape, jnp.uint32),
        ),
        grid=(nseg // block,),
        in_specs=[full_spec(prm.shape), full_spec(keys.shape), full_spec(vals.shape), full_spec(bases.shape),
                  ANY_SPEC],
        out_specs=[ANY_SPEC, ANY_SPEC, ANY_SPEC],
        input_output_aliases={4: 2},
        interpret=interpret,
        compiler_params=compiler_params(num_warps, interpret),
    )(prm, keys, vals, bases, buckets)


@x64
def general_step(curve, prm, keys, x, y, *, block=DEFAULT_BLOCK, num_warps=DEFAULT_NUM_WARPS, interpret=False,
                 modes=MODES):
    """One call of kernel 2 over buffers of ``N`` entries: ``keys`` (N,), ``x`` rows ``(4 Lc, N)``, ``y`` rows
    ``(4 Lc, N)`` (trash = last column), updated in place. Grid: ``N / 2`` lanes. Returns
    ``(partials (4 Lc, N), partial keys (N,), y)`` (partials are only meaningful in mode ACC). ``modes``: the
    branches compiled into this kernel, from :data:`MODES` (a kernel of one mode is a fraction of the code: see
    :func:`cuzk_jax.ops.msm._pallas_pass`)."""
    if not modes or set(modes) - set(MODES):
        raise ValueError(f"modes must be a non-empty subset of {MODES}, got {modes!r}")
    rep = Rep(curve, "array" if interpret else "limb")
    nrows = 4 * rep.Lc
    N = x.shape[1]
    assert N % (2 * block) == 0
    kernel = functools.partial(_general_kernel, rep=rep, block=block, modes=tuple(modes))
    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((nrows, N), jnp.uint32),
            jax.ShapeDtypeStruct((N,), jnp.int32),
            jax.ShapeDtypeStruct(y.shape, jnp.uint32),
        ),
        grid=(N // 2 // block,),
        in_specs=[full_spec(prm.shape), full_spec(keys.shape), full_spec(x.shape), ANY_SPEC],
        out_specs=[ANY_SPEC, ANY_SPEC, ANY_SPEC],
        input_output_aliases={3: 2},
        interpret=interpret,
        compiler_params=compiler_params(num_warps, interpret),
    )(prm, keys, x, y)
