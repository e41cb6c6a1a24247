"""Fixed-base batched scalar multiplication: ``s_i * G`` for many scalars and one base (Groth16 setup).

Windowed method (e.g. Menezes, van Oorschot, Vanstone, Handbook of Applied Cryptography, 14.6.3 "fixed-base
windowing"; also how bellman/arkworks generators compute the query points): with ``c``-bit windows, precompute the
table ``T[k][d] = d * 2^(c k) * G`` (``d < 2^c``, ``k < 256/c``) once on the host; then
``s * G = sum_k T[k][digit_k(s)]`` -- ``256/c`` mixed additions per scalar and no doublings. The additions run as
one ``lax.fori_loop`` over the windows (one addition formula in the program), batched over all scalars.

Scalars are canonical (not Montgomery) Fr limbs ``(8, N)`` uint32; the result is a device :class:`Affine` batch.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from cuzk_jax import encoding
from cuzk_jax.reference.field import fq

from . import curve as C

WINDOW = 8
NUM_WINDOWS = 256 // WINDOW


def _ref_coords_to_limbs(points, coord_ndim: int):
    """Reference affine points (None = infinity) -> Montgomery limb arrays (x, y) and an infinity mask (numpy)."""
    inf = np.array([p is None for p in points])
    if coord_ndim == 1:
        xs = [0 if p is None else p[0] for p in points]
        ys = [0 if p is None else p[1] for p in points]
        return (encoding.ints_to_limbs(xs, fq, montgomery=True), encoding.ints_to_limbs(ys, fq, montgomery=True), inf)

    def fq2(vals):
        return np.stack([encoding.ints_to_limbs([v[0] for v in vals], fq, montgomery=True),
                         encoding.ints_to_limbs([v[1] for v in vals], fq, montgomery=True)])

    xs = [(0, 0) if p is None else p[0] for p in points]
    ys = [(0, 0) if p is None else p[1] for p in points]
    return fq2(xs), fq2(ys), inf


def reference_to_affine(curve: C.Curve, points) -> C.Affine:
    """Host reference points -> a device Affine batch (trailing batch axis of length ``len(points)``)."""
    x, y, inf = _ref_coords_to_limbs(list(points), curve.coord_ndim)
    # zero the coordinates of infinity (the Affine invariant)
    return C.Affine(jnp.asarray(x), jnp.asarray(y), jnp.asarray(inf))


@functools.lru_cache(maxsize=8)
def _table_cached(curve_name: str, base: tuple):
    curve = C.g1 if curve_name == "g1" else C.g2
    ref = curve.ref
    pts = []
    row_base = base
    for _ in range(NUM_WINDOWS):
        acc = None
        row = []
        for _d in range(1 << WINDOW):
            row.append(acc)
            acc = ref.add(acc, row_base)
        pts += row
        row_base = acc  # 2^c * previous row base
    return reference_to_affine(curve, pts)


def table(curve: C.Curve, base=None) -> C.Affine:
    """The window table for ``base`` (default: the generator), flattened to batch ``NUM_WINDOWS * 2^WINDOW``."""
    base = curve.ref.generator if base is None else base
    return _table_cached(curve.name, base)


@functools.partial(jax.jit, static_argnums=(0,))
def _mul_table(curve_name: str, tab: C.Affine, scalars):
    # setup is one-off: the compact (rolled) multiplication compiles in seconds instead of minutes on a GPU
    curve = (C.g1 if curve_name == "g1" else C.g2).with_schedule("rolled")
    n = scalars.shape[1]
    mask = (1 << WINDOW) - 1
    per_limb = 32 // WINDOW

    def body(k, acc):
        limb = lax.dynamic_index_in_dim(scalars, k // per_limb, 0, keepdims=False)
        digit = (limb >> ((k % per_limb) * WINDOW).astype(jnp.uint32)) & mask
        idx = k * (1 << WINDOW) + digit.astype(jnp.int32)
        pt = jax.tree_util.tree_map(lambda a: jnp.take(a, idx, axis=-1), tab)
        return curve.jacobian_add_mixed(acc, pt)

    acc = lax.fori_loop(0, NUM_WINDOWS, body, curve.jacobian_identity((n,)))
    return curve.to_affine(acc)


def _canonical_limbs(scalars):
    """``scalars`` as a uint32 ``(8, N)`` array; ValueError for any other shape."""
    scalars = jnp.asarray(scalars, jnp.uint32)
    if scalars.ndim != 2 or scalars.shape[0] != 8:
        raise ValueError(f"scalars must be canonical Fr limbs of shape (8, N), got {scalars.shape}")
    return scalars


def _in_chunks(scalars, chunk: int, program) -> C.Affine:
    """``program`` over consecutive chunks of exactly ``chunk`` scalars (the last one zero-padded, so every call
    reuses one compiled program), the Affine results concatenated and cut to ``N``."""
    n = scalars.shape[1]
    outs = []
    for start in range(0, n, chunk):
        part = scalars[:, start:start + chunk]
        if part.shape[1] < chunk:
            part = jnp.pad(part, ((0, 0), (0, chunk - part.shape[1])))
        outs.append(program(part))
    if len(outs) == 1:
        return jax.tree_util.tree_map(lambda a: a[..., :n], outs[0])
    return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=-1)[..., :n], *outs)


def default_chunk(n: int | None = None) -> int:
    """Scalars per compiled call: 2048 on CPU (one program for every size, which keeps the tests' compile time
    down); on an accelerator the next power of two of ``n`` in ``[2^14, 2^20]`` (larger chunks set up a large key
    several times faster: BUILD.md)."""
    if jax.default_backend() == "cpu":
        return 2048
    return min(1 << 20, max(1 << 14, 1 << max(0, (n or 1) - 1).bit_length()))


def mul(curve: C.Curve, scalars, base=None, chunk: int | None = None) -> C.Affine:
    """``scalars[:, i] * base`` for canonical Fr limbs ``(8, N)`` -> Affine batch of N points.

    Runs in chunks of exactly ``chunk`` scalars (the last one zero-padded; default :func:`default_chunk`), so the
    calls reuse a few compiled programs (one per power-of-two chunk size).
    """
    scalars = _canonical_limbs(scalars)
    n = scalars.shape[1]
    chunk = chunk or default_chunk(n)
    tab = table(curve, base)
    if n == 0:
        return curve.affine_identity((0,))
    return _in_chunks(scalars, chunk, lambda part: _mul_table(curve.name, tab, part))


# ---------------------------------------------------------------------------------------------------------------
# Batch-affine fixed-base multiplication (the device setup's fast path)
# ---------------------------------------------------------------------------------------------------------------
#
# With ``w``-bit windows and ``K = ceil(255 / w)`` windows, ``s * G = sum_k T[k][d_k]`` where ``T[k][d] = d 2^(w k) G``
# and ``d_k`` are the unsigned base-2^w digits of ``s``. The sum runs window by window in AFFINE coordinates: each
# step is the textbook chord addition ``lambda = (y2 - y1) / (x2 - x1)``, ``x3 = lambda^2 - x1 - x2``,
# ``y3 = lambda (x1 - x3) - y1`` (3 products) with the denominators of the whole batch inverted at once
# (Montgomery's trick, ``F.batch_inv``: 3 products each plus a share of one Fermat inversion per lane group) --
# the "batch-affine" accumulation of the ZPrize 2023 MSM entries (DESIGN.md, Algorithms), about half the products
# of a mixed Jacobian addition and no final conversion to affine.
#
# Why the incomplete chord formula is exact here: after windows ``0..k-1`` the accumulator is ``A G`` with
# ``A = sum_{j<k} d_j 2^(w j) < 2^(w k)``, and the addend is ``D G`` with ``D = d_k 2^(w k)``. For a canonical scalar
# ``s < r``, ``0 <= A``, ``0 < D`` and ``A + D <= s < r``; equal x-coordinates would need ``A == D`` (impossible:
# ``A < 2^(w k) <= D``) or ``A + D == 0 mod r`` (impossible: ``0 < A + D < r``). So the doubling and ``P + (-P)``
# cases never occur; the identity (``A == 0`` or ``d_k == 0``) is handled by selects. Scalars are therefore reduced
# below ``r`` first (two conditional subtractions: any 256-bit value is below ``3 r``), which leaves ``s G``
# unchanged. The table is built by the same addition: ``T[k][a 2^h + b] = T_hi[k][a] + T_lo[k][b]`` for
# ``h = ceil(w / 2)``, where the two half tables (``2 K 2^h`` points, scalars ``d 2^(w k + ...) mod r``) come from
# the exact Jacobian method above, and the same argument (``(a 2^h +- b) 2^(w k)`` vanishes mod ``r`` only for
# ``a = b = 0``, as ``a 2^h + b < 2^w < r``) makes every addition a chord: every table entry is exact.


def num_windows(window: int) -> int:
    """Windows of ``window`` bits that cover a canonical Fr scalar (< r < 2^255)."""
    return -(-255 // window)


def _shifted_digit_scalars(count: int, shift: int) -> list[int]:
    """``d 2^shift mod r`` for ``d < count`` (the scalars of one half-table row; at most a few thousand)."""
    from cuzk_jax.reference.constants import R

    step = pow(2, shift, R)
    return [d * step % R for d in range(count)]


def _pow_windowed(F, a, e: int, k: int):
    """``a^e`` (static ``e > 0``) by fixed ``k``-bit windows (HAC 14.82): the table ``a^0 .. a^(2^k - 1)`` from one
    ``lax.scan``, then one ``lax.scan`` step per digit holding ``k`` squarings and one table product -- about
    ``bits / k + 2^k`` dependent loop steps instead of the ~1.5 bits of square-and-multiply. On an accelerator each
    step of a device loop has a fixed cost, and the batched inversion runs once per window of every call, so the
    step count matters as much as the products."""
    digits = []
    while e:
        digits.append(e & ((1 << k) - 1))
        e >>= k
    digits.reverse()
    one = F.ones_like(a)

    def table_step(acc, _):
        acc = F.mul(acc, a)
        return acc, acc

    _, powers = lax.scan(table_step, one, None, length=(1 << k) - 1)
    tab = jnp.concatenate([one[None], powers], axis=0)

    def body(acc, d):
        for _ in range(k):
            acc = F.mul(acc, acc)
        return F.mul(acc, lax.dynamic_index_in_dim(tab, d, 0, keepdims=False)), None

    acc, _ = lax.scan(body, tab[digits[0]], jnp.asarray(digits[1:], jnp.int32))
    return acc


def _batch_inv(F, a, chunk: int, fermat_window: int):
    """Inverse of every element of ``a`` (zeros map to zeros): ``F.batch_inv`` (Montgomery's trick over runs of
    ``chunk``), except that the lane totals are inverted by :func:`_pow_windowed` when ``fermat_window > 1``. Fq2
    reduces to Fq through the norm, as ``Fq2.batch_inv``."""
    if fermat_window <= 1:
        return F.batch_inv(a, chunk=chunk)
    base = getattr(F, "base", None)
    if base is not None:  # Fq2: 1 / (a0 + a1 u) = (a0 - a1 u) / (a0^2 + a1^2)
        s0, s1 = base.mul_many([(a[0], a[0]), (a[1], a[1])])
        ninv = _batch_inv(base, base.add(s0, s1), chunk, fermat_window)
        r0, r1 = base.mul_many([(a[0], ninv), (base.neg(a[1]), ninv)])
        return jnp.stack([r0, r1])
    batch = a.shape[1:]
    size = int(np.prod(batch)) if batch else 1
    flat = a.reshape(F.limbs, size)
    zero = F.is_zero(flat)
    flat = jnp.where(zero[None], F.ones((size,)), flat)
    chunk = max(1, min(chunk, size))
    m = -(-size // chunk)
    if chunk * m - size:
        flat = jnp.concatenate([flat, F.ones((chunk * m - size,))], axis=1)
    x = flat.reshape(F.limbs, chunk, m).transpose(1, 0, 2)

    def fwd(acc, xi):
        acc = F.mul(acc, xi)
        return acc, acc

    total, prefix = lax.scan(fwd, F.ones((m,)), x)
    inv_total = _pow_windowed(F, total, F.modulus - 2, fermat_window)
    prev = jnp.concatenate([F.ones((m,))[None], prefix[:-1]], axis=0)

    def bwd(acc, inp):
        xi, before = inp
        return F.mul(acc, xi), F.mul(acc, before)

    _, invs = lax.scan(bwd, inv_total, (x, prev), reverse=True)
    out = invs.transpose(1, 0, 2).reshape(F.limbs, chunk * m)[:, :size]
    return jnp.where(zero[None], jnp.zeros_like(out), out).reshape((F.limbs,) + batch)


def _affine_chord_add(F, p: C.Affine, q: C.Affine, inv_chunk: int, fermat_window: int = 1) -> C.Affine:
    """``p + q`` for affine batches where ``x(p) != x(q)`` whenever both are finite (see the comment above): one
    batched inversion of all denominators, 3 products. Infinity coordinates stay zero (the Affine invariant)."""
    both = ~p.inf & ~q.inf
    one = F.ones_like(p.x)
    den = F.select(both, F.sub(q.x, p.x), one)
    inv = _batch_inv(F, den, inv_chunk, fermat_window)
    (lam,) = F.mul_many([(F.sub(q.y, p.y), inv)])
    (lam2,) = F.mul_many([(lam, lam)])
    x3 = F.sub(F.sub(lam2, p.x), q.x)
    (t,) = F.mul_many([(lam, F.sub(p.x, x3))])
    y3 = F.sub(t, p.y)
    res = C.Affine(x3, y3, jnp.zeros_like(p.inf))
    res = C.select_point(F, p.inf, q, res)
    return C.select_point(F, q.inf, p, res)


def _reduce_mod_r(scalars):
    """Canonical Fr limbs ``(8, N)``: any 256-bit value minus ``r`` while it is ``>= r`` (at most twice)."""
    from .field import cond_sub_limbs, fr

    limbs = [scalars[i].astype(jnp.uint64) for i in range(8)]
    for _ in range(2):
        limbs = cond_sub_limbs(limbs, fr.p_limbs)
    return jnp.stack(limbs).astype(jnp.uint32)


def _digit(padded, k, window: int):
    """Digit ``k`` (bits ``[w k, w k + w)``) of each scalar, int32; ``padded``: the limbs ``(8, N)`` with a
    ninth zero limb appended; ``k`` may be traced."""
    bit = jnp.asarray(k, jnp.int32) * window
    lo = lax.dynamic_index_in_dim(padded, bit // 32, 0, keepdims=False).astype(jnp.uint64)
    hi = lax.dynamic_index_in_dim(padded, bit // 32 + 1, 0, keepdims=False).astype(jnp.uint64)
    both = lo | (hi << jnp.uint64(32))
    d = (both >> (bit % 32).astype(jnp.uint64)) & jnp.uint64((1 << window) - 1)
    return d.astype(jnp.int32)


def _field_of(curve_name: str, schedule: str):
    curve = C.g1 if curve_name == "g1" else C.g2
    return curve.with_schedule(schedule).field if schedule != "platform" else curve.field


@functools.partial(jax.jit, static_argnames=("curve_name", "window", "schedule", "inv_chunk", "fermat_window"))
def _mul_affine_program(curve_name: str, tab: C.Affine, scalars, window: int, schedule: str, inv_chunk: int,
                        fermat_window: int):
    with jax.enable_x64(True):
        F = _field_of(curve_name, schedule)
        scalars = _reduce_mod_r(scalars)
        padded = jnp.concatenate([scalars, jnp.zeros((1,) + scalars.shape[1:], jnp.uint32)], axis=0)
        size = 1 << window

        def gather(k):
            idx = k * size + _digit(padded, k, window)
            return jax.tree_util.tree_map(lambda a: jnp.take(a, idx, axis=-1), tab)

        def body(k, acc):
            return _affine_chord_add(F, acc, gather(k), inv_chunk, fermat_window)

        return lax.fori_loop(1, num_windows(window), body, gather(0))


@functools.partial(jax.jit, static_argnames=("curve_name", "schedule", "inv_chunk", "fermat_window"))
def _outer_sum_program(curve_name: str, hi: C.Affine, lo: C.Affine, schedule: str, inv_chunk: int,
                       fermat_window: int):
    """``out[k, a * len(lo) + b] = hi[k, a] + lo[k, b]`` (batch shape ``(K, len(hi) * len(lo))``)."""
    with jax.enable_x64(True):
        F = _field_of(curve_name, schedule)
        nh, nl = hi.inf.shape[-1], lo.inf.shape[-1]

        def expand(p, hi_side: bool):
            def f(a):
                a = a[..., :, None] if hi_side else a[..., None, :]
                a = jnp.broadcast_to(a, a.shape[:-2] + (nh, nl))
                return a.reshape(a.shape[:-2] + (nh * nl,))
            return jax.tree_util.tree_map(f, p)

        return _affine_chord_add(F, expand(hi, True), expand(lo, False), inv_chunk, fermat_window)


@functools.lru_cache(maxsize=8)
def _affine_table_cached(curve_name: str, window: int, schedule: str, inv_chunk: int,
                         fermat_window: int) -> C.Affine:
    curve = C.g1 if curve_name == "g1" else C.g2
    K = num_windows(window)
    h = -(-window // 2)
    lo_bits = h
    hi_bits = window - h
    lo_s = [v for k in range(K) for v in _shifted_digit_scalars(1 << lo_bits, window * k)]
    hi_s = [v for k in range(K) for v in _shifted_digit_scalars(1 << hi_bits, window * k + lo_bits)]
    lo_s, hi_s = encoding.ints_to_limbs(lo_s, "fr"), encoding.ints_to_limbs(hi_s, "fr")
    both = mul(curve, np.concatenate([lo_s, hi_s], axis=1), chunk=default_chunk(lo_s.shape[1] + hi_s.shape[1]))
    n_lo = lo_s.shape[1]
    lo = jax.tree_util.tree_map(lambda a: a[..., :n_lo].reshape(a.shape[:-1] + (K, 1 << lo_bits)), both)
    hi = jax.tree_util.tree_map(lambda a: a[..., n_lo:].reshape(a.shape[:-1] + (K, 1 << hi_bits)), both)
    # the table is the same whatever the schedule: build it with the rolled one (one-off; compiles in seconds);
    # out is (K, 2^w), index a * 2^h + b = digit
    out = _outer_sum_program(curve_name, hi, lo, "rolled", inv_chunk, fermat_window)
    return jax.tree_util.tree_map(lambda a: a.reshape(a.shape[:-2] + (K << window,)), out)


def affine_table(curve: C.Curve, window: int, schedule: str = "platform", inv_chunk: int = 64,
                 fermat_window: int = 1) -> C.Affine:
    """The batch-affine method's window table ``T[k][d] = d 2^(w k) G`` flattened to ``K 2^w`` points (``K =
    num_windows(window)``), built on the device (always with the rolled multiplication schedule: a one-off
    program) and cached per argument tuple (the points do not depend on ``schedule``, ``inv_chunk`` or
    ``fermat_window``)."""
    if not 2 <= window <= 24:
        raise ValueError(f"window must be in [2, 24] bits, got {window}")
    return _affine_table_cached(curve.name, window, schedule, inv_chunk, fermat_window)


def default_affine_chunk(n: int | None = None) -> int:
    """Scalars per compiled call of :func:`mul_affine`: 2048 on CPU; on an accelerator the next power of two of
    ``n`` in ``[2^14, 2^22]``: every window runs one batched inversion whose Fermat chain (~570 dependent products)
    is a fixed sequential cost per call, so larger calls amortise it over more points."""
    if jax.default_backend() == "cpu":
        return 2048
    return min(1 << 22, max(1 << 14, 1 << max(0, (n or 1) - 1).bit_length()))


def default_bucket_chunk() -> int:
    """Scalars per compiled call of :func:`mul_bucket`: 2048 on CPU (the interpreter's test path); 2^20 on an
    accelerator whatever the point count, so each group compiles one program for every key size. On the H200 that
    program's compile (the Pallas kernel, the digit sort and an XLA batched inversion, since replaced by the
    conversion kernel) took 108.7 s for G1 and 132.5 s for G2, and a size-dependent chunk paid it again for every
    new size class (bench/results/RESULTS.md, session 11); zero-padding a small key up to 2^20 scalars costs a
    fraction of a second instead."""
    return 2048 if jax.default_backend() == "cpu" else 1 << 20


def default_inv_chunk() -> int:
    """Montgomery-trick run length of the batched inversions (``F.batch_inv(chunk=)``): each inversion costs
    3 products per element plus ``~570 / inv_chunk`` for the Fermat inversions of the lane totals, and
    ``2 inv_chunk`` dependent steps. 64 on CPU, 128 on an accelerator."""
    return 64 if jax.default_backend() == "cpu" else 128


def default_fermat_window() -> int:
    """Window bits of the exponentiation that inverts the lane totals in every batched inversion
    (:func:`_pow_windowed`): 1 (the field's own square-and-multiply, ~570 dependent steps) on CPU, whose tests
    compile one program less; 4 (~110 steps, 5 products per step) on an accelerator."""
    return 1 if jax.default_backend() == "cpu" else 4


def default_window(platform: str | None = None) -> int:
    """Window bits of the batch-affine path (and of the bucket path but for G1 on a GPU,
    :func:`default_bucket_window`) on ``platform`` (default: JAX's default backend): 16 on an accelerator (16
    windows, a 2^20-point table: 96 MiB for G1, 192 MiB for G2); 8 on CPU (a table built in seconds)."""
    return 8 if (platform or jax.default_backend()) == "cpu" else 16


def mul_affine(curve: C.Curve, scalars, *, window: int | None = None, chunk: int | None = None,
               schedule: str = "platform", inv_chunk: int | None = None,
               fermat_window: int | None = None) -> C.Affine:
    """``scalars[:, i] * G`` (G the generator) by the batch-affine windowed method (see the comment above).

    ``scalars``: Fr limbs ``(8, N)`` uint32, canonical (not Montgomery) form; values ``>= r`` are reduced first.
    Same result as :func:`mul` (affine points are unique). Runs in chunks of exactly ``chunk`` scalars (default
    :func:`default_affine_chunk`; the last one zero-padded), one compiled program per (group, window, chunk,
    schedule, inv_chunk, fermat_window); ``window`` defaults to :func:`default_window`, ``inv_chunk`` to
    :func:`default_inv_chunk`, ``fermat_window`` to :func:`default_fermat_window`.
    Accepts a device array and returns a device :class:`Affine` batch of ``N`` points.
    """
    scalars = _canonical_limbs(scalars)
    window = window or default_window()
    inv_chunk = inv_chunk or default_inv_chunk()
    fermat_window = fermat_window or default_fermat_window()
    n = scalars.shape[1]
    if n == 0:
        return curve.affine_identity((0,))
    chunk = chunk or default_affine_chunk(n)
    tab = affine_table(curve, window, schedule, inv_chunk, fermat_window)
    return _in_chunks(scalars, chunk, lambda part: _mul_affine_program(curve.name, tab, part, window, schedule,
                                                                       inv_chunk, fermat_window))


# ---------------------------------------------------------------------------------------------------------------
# Fixed-base multiplication on the MSM's bucket kernel (Pallas)
# ---------------------------------------------------------------------------------------------------------------
#
# ``s_i G = sum_k T[k][d_k(s_i)]`` is a bucket accumulation: output ``i`` is bucket ``i`` and receives the table
# points of its nonzero digits. The level-1 kernel of the MSM (:func:`cuzk_jax.ops.pallas.bucket.accumulate_bases`:
# sorted (bucket key, base index) pairs, ``seg`` pairs per lane, XYZZ mixed additions, gathered bases) does exactly
# that when every lane holds one output's ``K`` pairs: the run of key ``i`` is complete inside its lane, so with
# ``final`` set every run goes straight to its bucket and no merge level runs. A lane's zero digits (table entry
# ``T[k][0]``, the point at infinity, which the table's affine rows cannot hold) are pairs valued ``-1``, which the
# kernel (``marked``) adds as the point at infinity, leaving the sum as it is (the nonzero digits stay in window
# order, so by the argument above the partial sum never meets the addend or its negative). No sort is needed. The
# buckets then go to affine with one batched inversion -- one inversion chain per call instead of one per window in
# the batch-affine path, and the additions run in a Pallas kernel instead of XLA loops. The conversion is a Pallas
# kernel too (:mod:`cuzk_jax.ops.pallas.affine`, Montgomery's trick per lane; interpreted on a CPU). It replaced an XLA
# conversion (one batched inversion on the platform's field products), which lost the session 24 A/B on the H200 in
# speed and in compile time (bench/results/REMOVED_VARIANTS.md).


def _bucket_pairs(scalars, window: int):
    """The (key, base index) pairs of the bucket method for canonical Fr limbs ``(8, N)``: lane ``i`` holds ``K =
    num_windows(window)`` consecutive pairs of key ``i``, one per window in window order, valued ``k 2^w + d_k``
    (the table entry) or ``-1`` for a zero digit (no base: the kernel's ``marked`` pairs). Keys are sorted by
    construction: no sort. Returns ``(keys, vals)``, ``(N K,)`` int32 each."""
    K = num_windows(window)
    n = scalars.shape[1]
    padded = jnp.concatenate([_reduce_mod_r(scalars), jnp.zeros((1, n), jnp.uint32)], axis=0)
    digits = jax.vmap(lambda k: _digit(padded, k, window))(jnp.arange(K, dtype=jnp.int32))  # (K, N)
    vals = jnp.where(digits == 0, jnp.int32(-1), digits + (jnp.arange(K, dtype=jnp.int32) << window)[:, None])
    keys = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32)[:, None], (n, K))
    return keys.reshape(-1), vals.T.reshape(-1)


@functools.partial(jax.jit, static_argnames=("curve_name", "window", "block", "num_warps", "interpret"))
def _mul_bucket_program(curve_name: str, tab: C.Affine, scalars, window: int, block: int, num_warps: int,
                        interpret: bool):
    from .pallas import affine as pa
    from .pallas import bucket as pk

    curve = C.g1 if curve_name == "g1" else C.g2
    n = scalars.shape[1]
    K = num_windows(window)
    with jax.enable_x64(True):
        keys, vals = _bucket_pairs(scalars, window)
    Lc = 24 if curve.coord_ndim == 2 else 12
    brows = jnp.concatenate([tab.x.reshape((Lc, -1)), tab.y.reshape((Lc, -1))], axis=0).T  # point-major
    buckets = jnp.zeros((4 * Lc, n + 1), jnp.uint32)  # n outputs and the kernel's trash column
    _, _, buckets = pk.accumulate_bases(curve, jnp.int32(n * K), jnp.bool_(True), keys, vals, brows, buckets, seg=K,
                                        block=block, num_warps=num_warps, interpret=interpret, marked=True)
    return pa.to_affine(curve, buckets, n, block=min(pa.DEFAULT_BLOCK, n), interpret=interpret)


def default_bucket_window(curve_name: str, platform: str | None = None) -> int:
    """Window bits of :func:`mul_bucket` for a group on ``platform`` (default: JAX's default backend): 20 for G1
    on a GPU -- 13 windows instead of 16, 13 * 2^20 table points (1.22 GiB of coordinates, held once more as the
    kernel's point-major copy inside each call), faster than 16 on the H200 (bench/results/RESULTS.md, session
    24); G2 (not measured at 20) and every other platform keep :func:`default_window` (16; 8 on CPU, whose tests
    run the kernel interpreted)."""
    if curve_name not in ("g1", "g2"):
        raise ValueError(f"unknown group {curve_name!r}; expected g1 or g2")
    platform = platform or jax.default_backend()
    if platform == "gpu" and curve_name == "g1":
        return 20
    return default_window(platform)


def mul_bucket(curve: C.Curve, scalars, *, window: int | None = None, chunk: int | None = None,
               inv_chunk: int | None = None, fermat_window: int | None = None, block: int | None = None,
               num_warps: int = 2, interpret: bool | None = None) -> C.Affine:
    """``scalars[:, i] * G`` (G the generator) by the bucket method (see the comment above): the window table of
    :func:`affine_table`, the MSM's Pallas accumulation kernel, then the Pallas XYZZ -> affine kernel
    (:func:`cuzk_jax.ops.pallas.affine.to_affine`: one batched inversion per lane).

    Same contract as :func:`mul_affine` (canonical Fr limbs ``(8, N)``, values ``>= r`` reduced first; a device
    :class:`Affine` batch of ``N`` points, equal to :func:`mul`'s). ``window``: default
    :func:`default_bucket_window` (per group and platform). ``chunk``: scalars per compiled call, a multiple of
    ``block`` (default :func:`default_bucket_chunk`: one size, so one compile per group); ``block`` /
    ``num_warps``: the kernel's lanes per program (default ``min(64, chunk)``) and warps; ``inv_chunk`` /
    ``fermat_window``: the batched inversions of the window table's build (:func:`affine_table`) only;
    ``interpret``: run the kernels under the Pallas interpreter (default: on a CPU, where Triton does not run --
    the tests' path).
    """
    scalars = _canonical_limbs(scalars)
    if scalars.shape[1] == 0:
        return curve.affine_identity((0,))
    chunk, tab, static = _bucket_args(curve, window, chunk, inv_chunk, fermat_window, block, num_warps, interpret)
    return _in_chunks(scalars, chunk, lambda part: _mul_bucket_program(curve.name, tab, part, *static))


def _bucket_args(curve: C.Curve, window, chunk, inv_chunk, fermat_window, block, num_warps, interpret):
    """:func:`mul_bucket`'s defaults resolved: ``(chunk, table, the program's static arguments after the
    scalars)`` -- shared with :func:`precompile_bucket`, so both reach the same compiled program."""
    window = window or default_bucket_window(curve.name)
    inv_chunk = inv_chunk or default_inv_chunk()
    fermat_window = fermat_window or default_fermat_window()
    if interpret is None:
        interpret = jax.default_backend() == "cpu"
    chunk = chunk or default_bucket_chunk()
    block = block or min(64, chunk)
    if chunk % block:
        raise ValueError(f"chunk {chunk} must be a multiple of block {block}")
    tab = affine_table(curve, window, inv_chunk=inv_chunk, fermat_window=fermat_window)
    return chunk, tab, (window, block, num_warps, interpret)


def precompile_bucket(curve: C.Curve, *, window: int | None = None, chunk: int | None = None,
                      inv_chunk: int | None = None, fermat_window: int | None = None, block: int | None = None,
                      num_warps: int = 2, interpret: bool | None = None) -> None:
    """Compile the program :func:`mul_bucket` runs with the same arguments, without running it (ahead-of-time
    lowering of a ``(8, chunk)`` scalar block; the window table is built). A later :func:`mul_bucket` call finds
    it compiled. Why: on a GPU each group's program takes minutes to compile; the device setup compiles both
    groups' in threads while it computes the scalars (:func:`cuzk_jax.groth16.generator.development_setup`)."""
    chunk, tab, static = _bucket_args(curve, window, chunk, inv_chunk, fermat_window, block, num_warps, interpret)
    _mul_bucket_program.lower(curve.name, tab, jax.ShapeDtypeStruct((8, chunk), jnp.uint32), *static).compile()
