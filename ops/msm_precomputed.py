"""Pippenger MSM over precomputed window bases: one bucket set for all windows (the resident-SRS variant).

:mod:`cuzk_jax.ops.msm` gives every ``c``-bit window its own ``H = 2^(c-1)`` buckets, reduces each window's buckets
(row sums, window sums) and then scales window ``w`` by ``2^(c w)`` -- a chain of ``c (W - 1)`` doublings. On an
H200 those reduction stages, chains of dependent point operations on few lanes, are most of a small MSM's time
(BUILD.md, "Where a G1 2^16 MSM's time goes"). When the bases are fixed (a proving key kept on the device, as cuzk
keeps its SRS), the scaling can be paid once instead: store ``T[w N + i] = 2^(c w) B_i`` for every window, and

    sum_i s_i B_i = sum_i sum_w d_{w,i} 2^(c w) B_i = sum_{w,i} d_{w,i} T[w N + i],

an MSM over ``W N`` bases whose scalars are the signed ``c``-bit digits. All windows then share ONE set of ``H``
buckets per partition: one bucket reduction instead of ``W``, no window sums and no doubling chain. The
accumulation work (one mixed addition per non-zero digit) is unchanged; memory grows ``W``-fold (a 2^20 G1 query
at c = 16: 16 x 96 MB = 1.5 GB), which is the trade of the "precompute factor" in GPU MSM libraries (ICICLE's
``MSMConfig.precompute_factor``, of which this is the full-W case).

The digits, the sort and the accumulation/reduction passes (XLA step machine or Pallas kernels) are those of
:mod:`cuzk_jax.ops.msm` with a plan of one reduction window over ``W N`` table entries.

Layouts: ``bases`` / the table are :class:`~cuzk_jax.ops.curve.Affine` in Montgomery form with coordinates
``(*coord, N)`` / ``(*coord, W N)`` (window-major: entry ``w N + i``), shared by every partition; scalars canonical
uint32 ``(8, N)`` or ``(8, P, N)``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from . import msm as M
from .config import MsmConfig
from .curve import XYZZ, Affine, Jacobian
from .field import x64


def window_bits(n: int) -> int:
    """Window for ``n`` bases with precomputed windows: argmin over ``c`` in 2..22 of ``W(c) n + 16 * 2^(c-1)``
    (the reduction is paid once, not once per window, so larger windows than :func:`cuzk_jax.ops.msm.window_bits`
    pay off: c = 13 at 2^16, 16 at 2^20, 20 at 2^24). The bucket weight 16 is measured (BUILD.md), not the 2.5
    additions per bucket of the operation count: the reduction runs as chains of dependent additions on few
    lanes, so larger windows cost more than the count predicts. The table holds ``W(c) n`` points: pass a smaller ``c`` to trade time for memory."""
    best = None
    for c in range(2, M.MAX_WINDOW + 1):
        cost = M.num_windows(c) * n + 16 * (1 << (c - 1))
        if best is None or cost < best[0]:
            best = (cost, c)
    return best[1]


# Bases per table-building program: bounds the build's scratch (the XYZZ windows, the running products and the
# affine windows of one chunk: ~11 GB for G2 at c = 16) whatever N is; the table itself is W N points.
PRECOMPUTE_CHUNK = 1 << 20


def _check_window(c: int) -> None:
    if not 2 <= c <= M.MAX_WINDOW:
        raise ValueError(f"window c must be in 2..{M.MAX_WINDOW}, got {c}")


def precompute(bases: Affine, group="g1", *, c: int, config: MsmConfig | None = None,
               chunk: int = PRECOMPUTE_CHUNK) -> Affine:
    """The window table ``T[w N + i] = 2^(c w) bases[i]`` (``w < W = ceil(256 / c)``), an Affine batch of
    ``W N`` points, window-major.

    ``W - 1`` rounds of ``c`` doublings of all ``N`` points (about 255 doublings per base in all, the cost of one
    scalar multiplication), then one batched inversion to affine. ``config`` (None: :meth:`MsmConfig.default`):
    kernel ``"pallas"`` runs each round as one call of the MSM's SHIFT kernel (every lane ``2^c X``: mode SHIFT
    with ``e0 = c``; the kernel the MSM compiles anyway; ``config.block`` lanes per program); ``"xla"`` as a
    ``lax.scan`` of Jacobian doublings with the rolled multiplication (short compile, but launch-bound on a GPU);
    ``"pallas_interpret"`` for CPU tests. A one-off per key and window, like setup. More than ``chunk`` bases are built ``chunk`` at a
    time by one compiled program (the last chunk padded with points at infinity) and joined, so the build's
    scratch stays that of one chunk; peak memory is then about twice the table (the chunks and the joined
    table)."""
    curve = M.curve_of(group)
    nd = curve.coord_ndim
    if bases.x.ndim != nd + 1:
        raise ValueError(f"precompute: bases must have one batch axis (shared bases), got {bases.x.shape}")
    _check_window(c)
    config = MsmConfig.coerce(config)
    if chunk < 1:
        raise ValueError(f"chunk must be positive, got {chunk}")

    def build(b: Affine) -> Affine:  # coords (*coord, W, n)
        if config.kernel == "xla":
            return _precompute_xla(b, group, c)
        return _precompute_pallas(b, group, c, config.kernel == "pallas_interpret", config.block)

    N = int(bases.inf.shape[-1])
    W = M.num_windows(c)
    if N <= chunk:
        return _window_major(build(bases), nd, W, N)
    parts = []
    for start in range(0, N, chunk):
        part = Affine(*[v[..., start:start + chunk] for v in bases])
        pad = chunk - int(part.inf.shape[-1])
        if pad:  # padding points at infinity give table entries at infinity, cut off below
            padw = lambda v, value: jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, pad)], constant_values=value)  # noqa: E731
            part = Affine(padw(part.x, 0), padw(part.y, 0), padw(part.inf, True))
        parts.append(build(part))
    joined = Affine(*[jnp.concatenate(vs, axis=-1)[..., :N] for vs in zip(*parts)])
    del parts
    return _window_major(joined, nd, W, N)


@functools.partial(jax.jit, static_argnames=("group", "c"))
def _precompute_xla(bases: Affine, group, c: int) -> Affine:
    """The table of :func:`precompute`, coords ``(*coord, W, N)``."""
    curve = M.rolled(M.curve_of(group))
    W = M.num_windows(c)

    def step(pt, _):
        return lax.fori_loop(0, c, lambda _, a: curve.jacobian_double(a), pt), curve.jacobian_to_xyzz(pt)

    _, stack = lax.scan(step, curve.affine_to_jacobian(bases), None, length=W)  # coords (W, *coord, N)
    return _windows_to_affine(curve, stack)


def _windows_to_affine(curve, stack: XYZZ) -> Affine:
    """XYZZ windows, coords ``(W, *coord, N)``, to Affine ``(*coord, W, N)`` with ONE inversion chain.

    Montgomery's trick across the window axis, one window (``N`` lanes) per loop step: a forward scan keeps the
    running products ``P_w = t_0 ... t_w`` of the denominators ``t_w = ZZ_w ZZZ_w`` (1 at infinity, so the
    products stay invertible), ``F.batch_inv`` inverts the ``N`` totals, and a reverse scan peels one window at a
    time: ``1/t_w = (1/P_w) P_(w-1)``, ``1/P_(w-1) = (1/P_w) t_w``, then ``x = X ZZZ / t``, ``y = Y ZZ / t`` as in
    :meth:`cuzk_jax.ops.curve.Curve.to_affine`. Converting all ``W N`` points in one ``to_affine`` materialises
    the whole batch's limb products (over 100 GiB at a 2^20 G2 table), and one ``to_affine`` per window pays
    ``W`` sequential Fermat inversions."""
    F = curve.field

    def denom(p: XYZZ):
        (t,) = F.mul_many([(p.zz, p.zzz)])
        inf = F.is_zero(p.zz)
        return jnp.where(inf, F.ones(inf.shape), t), inf

    def fwd(acc, p):
        t, _ = denom(XYZZ(*p))
        (nxt,) = F.mul_many([(acc, t)])
        return nxt, acc  # acc = P_(w-1), the product before window w

    n = stack.x.shape[-1]
    total, before = lax.scan(fwd, F.ones((n,)), tuple(stack))
    inv = F.batch_inv(total)

    def bwd(inv_p, inp):  # inv_p = 1 / P_w
        p, prev = XYZZ(*inp[0]), inp[1]
        t, inf = denom(p)
        inv_t, inv_prev = F.mul_many([(inv_p, prev), (inv_p, t)])
        izz, izzz = F.mul_many([(p.zzz, inv_t), (p.zz, inv_t)])
        x, y = F.mul_many([(p.x, izz), (p.y, izzz)])
        zero = jnp.zeros_like(x)
        return inv_prev, Affine(jnp.where(inf, zero, x), jnp.where(inf, zero, y), inf)

    _, aff = lax.scan(bwd, inv, (tuple(stack), before), reverse=True)
    return Affine(*[jnp.moveaxis(v, 0, v.ndim - 2) for v in aff])  # (W, *coord, N) -> (*coord, W, N)


def _window_major(aff: Affine, nd: int, W: int, N: int) -> Affine:
    flat = lambda v: v.reshape(v.shape[:nd] + (W * N,))  # noqa: E731  (*coord, W, N) -> entry w N + i
    return Affine(flat(aff.x), flat(aff.y), aff.inf.reshape(W * N))


@functools.partial(jax.jit, static_argnames=("group", "c", "interpret", "block"))
def _precompute_pallas(bases: Affine, group, c: int, interpret: bool, block: int | None) -> Affine:
    """The table of :func:`precompute`, coords ``(*coord, W, N)``."""
    from .pallas import bucket as pk

    curve = M.curve_of(group)
    W = M.num_windows(c)
    N = bases.x.shape[-1]
    block = block or pk.DEFAULT_BLOCK
    # the general kernel runs N_buf / 2 lanes per call: buffers of 2 N_pad columns, the last one the trash slot
    n_pad = max(2 * block, M.pow2_ceil(N + 1))
    rows0 = M.xyzz_to_rows(curve, M.rolled(curve).affine_to_xyzz(bases))
    rows0 = jnp.pad(rows0, ((0, 0), (0, 2 * n_pad - N)))
    i32 = lambda v: jnp.asarray(v, jnp.int32)  # noqa: E731
    prm = jnp.stack([i32(pk.MODE_SHIFT), i32(N), i32(1), i32(0), i32(c), i32(c), i32(0), i32(1)])
    keys = jnp.full((2 * n_pad,), pk.SENT, jnp.int32)
    kw = dict(block=block, num_warps=max(1, block // 32), interpret=interpret, modes=("shift",))

    def step(rows, _):  # emits window w = 2^(c w) B, then shifts (the W-th shift is wasted: one traced body)
        _, _, nxt = pk.general_step(curve, prm, keys, rows, jnp.zeros_like(rows), **kw)
        return nxt, M.rows_to_xyzz(curve, rows[:, :N], N)

    _, stack = lax.scan(step, rows0, None, length=W)  # XYZZ coords (W, *coord, N)
    return _windows_to_affine(M.rolled(curve), stack)


@x64
def msm(table: Affine, scalars, group="g1", *, c: int, config: MsmConfig | None = None,
        max_pairs: int = M.DEFAULT_MAX_PAIRS, lanes: int | None = None) -> Jacobian:
    """``sum_i scalars[..., i] * bases[i]`` from ``table = precompute(bases, group, c=c)`` (same ``c``).

    ``scalars``: canonical uint32 ``(8, N)`` or ``(8, P, N)`` (values ``< r``, not checked when traced). Returns a
    Jacobian with batch shape ``()`` or ``(P,)``. ``config``, ``lanes`` as in
    :func:`cuzk_jax.ops.msm.msm`. Partitions run together while their ``P W N`` pairs fit ``max_pairs``, else in
    groups (``lax.map``); a single partition above it is a ``ValueError`` (chunk the bases instead).
    """
    curve = M.curve_of(group)
    nd = curve.coord_ndim
    config, scalars, batched = M.check_args(config, scalars)
    _check_window(c)
    _, P, N = scalars.shape
    W = M.num_windows(c)
    if tuple(table.x.shape[nd:]) != (W * N,):
        raise ValueError(f"table batch shape {tuple(table.x.shape[nd:])} is not W N = {W} x {N}: it must come from "
                         f"precompute(bases, c={c}) over the same {N} bases")
    if N == 0:
        res = curve.jacobian_identity((P,))
        return res if batched else type(res)(*[v[..., 0] for v in res])
    G, chunk = M.group_and_chunk(P, N, W, max_pairs)
    if chunk < N:
        raise ValueError(f"{W} x {N} pairs per partition exceed max_pairs={max_pairs}")
    plan = M.Plan(G=G, n=W * N, c=c, shared_bases=True, windows=1)
    # bases at infinity (window 0 of the table is the bases themselves) get scalar zero, as in ops.msm
    scalars = jnp.where(table.inf[:N][None, None], jnp.uint32(0), scalars)
    digits = M.signed_digits(scalars, c)  # (W, P, N)
    digits = jnp.transpose(digits, (1, 0, 2)).reshape(P, W * N)  # entry w N + i of each partition

    def run_group(d):  # d: (G, W N)
        keys, vals = M.bucket_keys(d[None], plan)
        keys, vals, count = M.sort_pairs(keys, vals, plan)
        return M.run_pass(curve, plan, config, Affine(table.x, table.y, None), keys, vals, count,
                          curve.xyzz_identity((G,)), lanes=lanes)

    if G == P:
        res = run_group(digits)
    else:
        res = lax.map(run_group, digits.reshape(P // G, G, W * N))
        res = type(res)(*[jnp.moveaxis(v, 0, nd).reshape(v.shape[1:nd + 1] + (P,)) for v in res])
    jac = M.rolled(curve).xyzz_to_jacobian(res)
    return jac if batched else Jacobian(*[v[..., 0] for v in jac])


def msm_jit(group: str = "g1", c: int = 16, config: MsmConfig | str | None = None, **static):
    """A cached ``jax.jit`` of :func:`msm` for a group, window, config and fixed keyword arguments, as
    :func:`cuzk_jax.ops.msm.msm_jit` (the config is part of the cache key)."""
    return _msm_jit(group, c, MsmConfig.coerce(config), tuple(sorted(static.items())))


@functools.lru_cache(maxsize=None)
def _msm_jit(group, c, config: MsmConfig, static):
    return jax.jit(functools.partial(msm, group=group, c=c, config=config, **dict(static)))
