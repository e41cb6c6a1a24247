"""NTT over Fr on limb-major Montgomery arrays: forward, inverse and coset transforms, batched, natural order.

Representation
--------------
The public functions take and return ``uint32`` arrays of shape ``(8, *batch, n)``: Fr elements in Montgomery form,
fully reduced (as :mod:`cuzk_jax.ops.field`), the **domain axis last** and any batch axes (e.g. a leading partition
axis ``(8, P, n)``) in between. ``n = 2^k``, ``0 <= k <= 32`` (memory bounds the practical size: an ``(8, 2^26)``
array is 2 GiB). Every program works on this layout (flattened to ``(8, B, n)``): no layout conversion pass.
Semantics are those of :mod:`cuzk_jax.reference.ntt`:

* ``ntt(x)[i] = sum_j x[j] w^(i j)`` with ``w = 7^((r-1)/n)`` (``generator=5`` gives snarkjs's roots);
* ``ntt(x, inverse=True)`` is its inverse (divides by n);
* ``ntt(x, coset=g)[i] = sum_j x[j] (g w^i)^j`` (evaluation on the coset ``g H``), and the inverse with ``coset=g``
  returns the coefficients from evaluations on ``g H``.

Algorithm: passes of sub-transforms (Bailey's four-step, applied recursively)
-------------------------------------------------------------------------------
D. H. Bailey, "FFTs in external or hierarchical memory" (J. Supercomputing, 1990); the same decomposition as
sppark's GPU NTT. ``log2 n`` is split into digits ``s_1 + ... + s_P`` (:func:`plan`: balanced, each at most
``NttConfig.sub``). Pass ``p`` views the data as ``(8, B R, M, C)`` with ``M = 2^(s_p)``, ``R = 2^(s_1 + ... +
s_(p-1))`` and ``C = n / (R M)``, and

1. transforms every length-``M`` column (the ``M`` axis, for each of the ``C`` contiguous columns): an ``M``-point
   NTT with root ``w_(MC) ^ C``;
2. multiplies element ``(k, j)`` (``k < M`` the transformed index, ``j < C`` the column) by ``w_(MC)^(k j)``, the
   four-step twiddle (``w_(MC) = w^R``; skipped in the last pass, where ``C = 1``);
3. leaves each length-``C`` row to the later passes.

With ``j = j_M C + j_C`` and ``k = k_M + M k_C`` this is ``X[k] = sum_(j_C) w_C^(j_C k_C) w_(MC)^(j_C k_M)
sum_(j_M) w_M^(j_M k_M) x[j]`` (Cooley-Tukey with radices ``M`` and ``C``). After the last pass output index
``k = k_1 + M_1 (k_2 + M_2 (...))`` sits at position ``(k_1, k_2, ..., k_P)`` (major to minor): reversing the digit
axes gives natural order (:func:`~cuzk_jax.ops.ntt_network.digit_reverse`: absent for a single pass, one 2-D
transpose for two, and for three or more the blocked reversal -- two block copies, the first two digits swapped past
the rest, then the rest reversed in whole blocks; XLA fuses the scaling that follows, when there is one, with the
reversal).

The sub-transform of a pass is per kernel (:class:`~cuzk_jax.ops.config.NttConfig`, ``config=``; the platform
default is chosen in :meth:`NttConfig.default <cuzk_jax.ops.config.NttConfig.default>`):

* ``xla``: radix-2 decimation in time in Pease's **constant-geometry** form (M. C. Pease, "An adaptation of the
  fast Fourier transform for parallel processing", JACM 1968): every stage reads the pairs ``(x[2i], x[2i+1])``
  along the ``M`` axis and writes ``y[i] = e + t o``, ``y[i + M/2] = e - t o`` with ``t = w_M^(i with its low
  s-1-stage bits cleared)``, so all stages have the same shapes and the stage loop is one ``lax.fori_loop`` (one
  field multiplication in the program, whatever n). The bit reversal it needs is folded into the pass's first
  read (a gather), which also does stage 0 (twiddles all 1); output is in natural order. XLA runs one stage per
  kernel (its fusions give each output its own thread, so a multi-stage fusion would recompute shared products),
  so the default ``sub`` for ``xla`` is "one pass" (no four-step twiddles).
* ``pallas``: the whole ``M``-point sub-transforms of a tile in ONE kernel launch per pass
  (:mod:`cuzk_jax.ops.pallas.ntt`): the tile's ``M`` rows held as lane arrays in registers, radix-2 stages as
  elementwise butterflies (rows read in bit-reversed order, so output is natural), the four-step twiddle fused into
  the store and the coset scaling into the first pass's load; PTX carry-chain field blocks. A 2^20 NTT with the
  default ``sub=3`` is 7 kernel launches (plus the digit reversal's two copies), not 20 passes over memory.
* ``pallas_interpret``: that kernel under the Pallas interpreter with the rolled jnp field (CPU tests).

Tables (never program constants)
--------------------------------
One table per (n, direction, generator): ``T = [w^e for e < n/2]`` (``w^-1`` for the inverse), ``(8, n/2)``.
Sub-transform twiddles are ``T[e n / M]`` and four-step twiddles ``+-T[e mod n/2]`` (``w^(n/2) = -1``). Coset and
``1/n`` scalings are outer products ``hi[j >> c] * lo[j mod 2^c]`` of two ``~sqrt(n)`` tables. All of them are made
on the device from a few roots by :func:`_powers_impl` (a doubling loop: ``log2`` of the length steps, one
multiplication each) and one outer product, and enter the transform programs as **arguments**: called eagerly,
``ntt`` builds them once per key and caches the device arrays (:func:`clear_cache` frees them); called inside a
caller's ``jit`` (the Groth16 H phase), the same generator is traced into the caller's program, so its size does
not grow with n (only a handful of 32-byte roots are constants). Each program is compiled once per (shape, config),
and the forward and inverse transforms of one shape share it (the table is an argument).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from cuzk_jax import encoding
from cuzk_jax.errors import BadInput
from cuzk_jax.ops import field as F
from cuzk_jax.ops.config import NttConfig
from cuzk_jax.ops.ntt_network import bitrev, digit_reverse, fourstep_exponents, plan
from cuzk_jax.reference import ntt as ref_ntt

try:  # jax.core.Tracer moves between JAX versions
    from jax.core import Tracer as _Tracer
except ImportError:  # pragma: no cover
    from jax._src.core import Tracer as _Tracer

fr = F.fr
LIMBS = 8
R = ref_ntt.R
MAX_LOG_N = ref_ntt.TWO_ADICITY
GENERATOR = ref_ntt.GENERATOR
COSET_GENERATOR = ref_ntt.COSET_GENERATOR
U32 = jnp.uint32
U64 = jnp.uint64

# ---------------------------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------------------------


def log2_size(n: int) -> int:
    """log2 of an NTT size; ValueError unless n is a power of two in [1, 2^32]."""
    return ref_ntt.log2_size(int(n))


def check_input(x, name: str = "x", where: str = "ops.ntt"):
    """Validate a public-layout Fr array ``(8, *batch, n)`` (uint32); returns it as a jax array.
    :class:`~cuzk_jax.errors.BadInput` (a ValueError) naming ``where`` and the argument otherwise (dtype and shape
    are static: free under ``jit``)."""
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        raise BadInput(f"{where}: {name} must be a uint32 array of shape (8, *batch, n) (Fr limbs), got "
                       f"{type(x).__name__}")
    try:
        is_u32 = np.dtype(dtype) == np.uint32
    except TypeError:
        is_u32 = False
    if not is_u32:
        raise BadInput(f"{where}: {name} must have dtype uint32 (Montgomery-form Fr limbs, shape (8, *batch, n)), "
                       f"got {dtype}")
    if len(shape) < 2 or shape[0] != LIMBS:
        raise BadInput(f"{where}: {name} must have shape (8, *batch, n) (8 uint32 Fr limbs leading, the domain axis "
                       f"last), got {tuple(shape)}")
    log2_size(shape[-1])
    return jnp.asarray(x)


# ---------------------------------------------------------------------------------------------------------------
# Tables: generated on the device from a few roots, passed to the programs as arguments
# ---------------------------------------------------------------------------------------------------------------

_TABLES: dict = {}


def clear_cache() -> None:
    """Drop the cached twiddle / scaling tables (they are rebuilt on demand)."""
    _TABLES.clear()


def root_of_unity(n: int, generator: int = GENERATOR) -> int:
    return ref_ntt.root_of_unity(n, generator)


def inv_mod_r(v: int) -> int:
    """``v^-1 mod r`` as a Python int (Fermat; ``v`` must not be 0 mod r)."""
    return pow(v % R, R - 2, R)


def _mont(values) -> jax.Array:
    """Montgomery limbs ``(8, len(values))`` of a few Python ints (the only constants a traced table build holds)."""
    return jnp.asarray(encoding.ints_to_limbs([int(v) % R for v in values], "fr", montgomery=True))


def _powers_impl(firsts, ratios, *, log_t: int):
    """``out[:, k, e] = firsts[k] * ratios[k]^e`` for ``e < 2^log_t``: ``(8, K, 2^log_t)`` from ``(8, K)`` roots.

    A doubling loop (``lax.fori_loop``, ONE rolled multiplication in the program): step ``s`` fills entries
    ``[2^s, 2^(s+1))`` as entries ``[0, 2^s)`` times ``ratio^(2^s)``, whose square rides along as an extra column
    of the same product.
    """
    f = F.fr_rolled
    K = firsts.shape[1]
    T = 1 << log_t
    idx = lax.iota(U32, T)
    t = jnp.broadcast_to(firsts[:, :, None], (LIMBS, K, T))

    def body(s, carry):
        t, sq = carry  # sq: (8, K, 1) = ratio^(2^s)
        half = jnp.left_shift(U32(1), s.astype(U32))
        src = jnp.where(idx >= half, idx - half, idx)
        moved = t[:, :, src]
        prod = f.mul(jnp.concatenate([moved, sq], axis=-1),
                     jnp.concatenate([jnp.broadcast_to(sq, moved.shape), sq], axis=-1))
        fill = (idx >= half) & (idx < 2 * half)
        return jnp.where(fill, prod[..., :T], t), prod[..., T:]

    t, _ = lax.fori_loop(0, log_t, body, (t, ratios[:, :, None]))
    return t


def _outer_impl(hi, lo):
    """``(8, len(hi) * len(lo))`` table ``hi[a] * lo[b]`` at index ``a len(lo) + b`` (``len(lo)`` a power of two),
    made in windows (:func:`cuzk_jax.ops.field.map_last_axis`): a 2^26-entry table in one product held 18 GiB of
    temporaries on an H200."""
    c = log2_size(lo.shape[-1])
    return F.map_last_axis(lambda j: F.fr_rolled.mul(gather(hi, j >> c), gather(lo, j & U32((1 << c) - 1))),
                           positions=True, shape=(hi.shape[-1] << c,), limbs=LIMBS)


def _split_log(log_count: int) -> tuple[int, int]:
    c = (log_count + 1) // 2
    return c, log_count - c


def _parts_impl(roots, *, log_count: int):
    """``(lo, hi)`` from ``roots = [first, 1 | ratio, ratio^(2^c)]`` ``(8, 4)``: ``lo[b] = first ratio^b``
    (``b < 2^c``), ``hi[a] = ratio^(a 2^c)``, ``c = ceil(log_count / 2)``, so ``first ratio^e = hi[e >> c]
    lo[e mod 2^c]`` for ``e < 2^log_count``."""
    c, h = _split_log(log_count)
    out = _powers_impl(roots[:, :2], roots[:, 2:], log_t=c)
    return out[:, 0, : 1 << c], out[:, 1, : 1 << h]


def _table_impl(roots, *, log_count: int):
    """The full ``(8, 2^log_count)`` table ``first ratio^e``: :func:`_parts_impl` and one outer product."""
    lo, hi = _parts_impl(roots, log_count=log_count)
    return _outer_impl(hi, lo)


# one small program per table size (eager calls; inside a caller's trace they become part of its program)
_parts_jit = jax.jit(_parts_impl, static_argnames=("log_count",))
_table_jit = jax.jit(_table_impl, static_argnames=("log_count",))


def _roots(first: int, ratio: int, log_count: int) -> jax.Array:
    c, _ = _split_log(log_count)
    return _mont([first, 1, ratio, pow(ratio, 1 << c, R)])


def cached(key, build, eager: bool):
    """``build()``'s device arrays, cached under ``key`` (freed by :func:`clear_cache`) when called eagerly; a
    fresh (traced) build inside a caller's trace -- never a concrete array captured as a program constant."""
    if not eager:
        return build()
    t = _TABLES.get(key)
    if t is None:
        t = build()
        _TABLES[key] = t
    return t


def _eager(x) -> bool:
    return not isinstance(x, _Tracer)


def twiddles(n: int, inverse: bool = False, generator: int = GENERATOR, *, eager: bool = True,
             cache: bool = True) -> jax.Array:
    """``(8, max(n/2, 1))`` Montgomery table ``T[e] = w^e`` (``w^-e`` if inverse), ``w`` the n-th root from
    ``generator``. ``eager=False`` builds it in the current trace (no cache); ``cache=False`` builds a fresh one
    the caller owns."""
    w = root_of_unity(n, generator)
    if inverse:
        w = inv_mod_r(w)
    log_h = max(log2_size(n) - 1, 0)

    def build():
        with jax.enable_x64(True):
            return _table_jit(_roots(1, w, log_h), log_count=log_h)

    return cached(("tw", n, inverse, generator), build, eager) if cache else build()


def kernel_table(T, config: NttConfig):
    """A root table ``(8, n/2)`` in the layout the config's pass kernel reads (:func:`_passes_impl` with
    ``kernel_layout=True``): limb-minor ``(n/2, 8)`` for the Pallas kernels (one 32-byte sector per gathered
    twiddle), as it is for ``xla``."""
    return T if config.kernel == "xla" else T.T


def scale_parts(n: int, first: int, ratio: int, *, eager: bool = True, cache: bool = True):
    """``(lo, hi)`` with ``first ratio^j = hi[j >> c] lo[j mod 2^c]`` for ``j < n`` (see :func:`_parts_impl`);
    ``eager`` and ``cache`` as in :func:`twiddles`."""

    def build():
        log_n = log2_size(n)
        with jax.enable_x64(True):
            return _parts_jit(_roots(first, ratio, log_n), log_count=log_n)

    return cached(("geo", n, first % R, ratio % R), build, eager) if cache else build()


def layout_scale_digits(digits: tuple) -> tuple[tuple, tuple, int]:
    """``(top, bot, last)``: how :func:`layout_scale_parts` splits a plan's digits -- the leading digits' two
    halves (``hi_a`` over ``top``, ``hi_b`` over ``bot``) and the last digit (``lo``); its tables hold ``2^sum(top)``,
    ``2^sum(bot)`` and ``2^last`` entries. ValueError for a plan of one pass (no layout scaling)."""
    if len(digits) < 2:
        raise ValueError("layout_scale_parts: a transform of one pass needs no layout scaling (use scale_parts)")
    lead = digits[:-1]
    a = (len(lead) + 1) // 2
    return lead[:a], lead[a:], digits[-1]


def layout_scale_parts(n: int, first: int, ratio: int, digits: tuple):
    """``(lo, hi_a, hi_b)`` of ``first ratio^e`` where ``e`` is the NATURAL index of each position of the pass-order
    (digit-reversed) layout of a transform with ``digits`` (:func:`cuzk_jax.ops.ntt_network.plan`): position ``i =
    r M_P + k`` (``k`` the last digit) holds natural index ``e = nat(r) + (n / M_P) k``, so ``first ratio^e =
    hi_a[u] hi_b[v] lo[k]`` with ``r = u len(hi_b) + v`` -- ``lo[k] = ratio^((n/M_P) k)``, and ``hi_a`` / ``hi_b``
    the powers over the leading digits' two halves in their reversed order (:func:`_transposed_impl`'s ``pre``;
    the split: :func:`layout_scale_digits`). Small tables (about ``2 sqrt(n / M_P) + M_P`` entries), made on the
    device (inside the caller's trace when called in one)."""
    top, bot, last = layout_scale_digits(digits)
    Ma = 1 << sum(top)
    with jax.enable_x64(True):
        lo = _table_jit(_roots(1, pow(ratio, n >> last, R), last), log_count=last)
        ha = digit_reverse(_table_jit(_roots(first, ratio, sum(top)), log_count=sum(top))[:, None],
                           tuple(reversed(top)))[:, 0]
        hb = (digit_reverse(_table_jit(_roots(1, pow(ratio, Ma, R), sum(bot)), log_count=sum(bot))[:, None],
                            tuple(reversed(bot)))[:, 0] if bot else constant(1))
    return lo, ha, hb


def constant(v: int) -> jax.Array:
    """``(8, 1)`` Montgomery form of ``v`` (a 32-byte constant)."""
    return _mont([v])


def gather(a, idx, axis: int = -1):
    """``take(a, idx, axis)`` with indices promised in bounds (no clamping in the program)."""
    axis %= a.ndim
    return a.at[(slice(None),) * axis + (idx,)].get(mode="promise_in_bounds")


# ---------------------------------------------------------------------------------------------------------------
# The XLA pass: constant-geometry radix-2 stages along the middle axis of (8, BR, M, C)
# ---------------------------------------------------------------------------------------------------------------


def _fourstep(X, T, *, n: int, R_: int, f):
    """``X`` ``(8, BR, M, C)`` times the four-step twiddle ``w_n^(k j R_)`` (``T`` the ``(8, n/2)`` root table)."""
    _, _, M, C = X.shape
    ex = fourstep_exponents(M, C, R_, n)
    half = n // 2
    tw = gather(T, (ex & U32(half - 1)).reshape(-1)).reshape(LIMBS, 1, M, C)
    Y = f.mul(X, jnp.broadcast_to(tw, X.shape))
    return jnp.where((ex >= U32(half))[None, None], f.neg(Y), Y)  # w^(e + n/2) = -w^e


def _xla_pass(X, T, *, s: int, n: int, R_: int, twiddle: bool, schedule: str, transposed: bool = False):
    """One pass on ``X`` ``(8, BR, M, C)``: M-point NTT along axis 2 (natural order in and out), then the four-step
    twiddle if ``twiddle`` (``transposed``: the twiddle first, the pass's transpose). ``T`` is the ``(8, n/2)`` root
    table."""
    f = fr.with_schedule(schedule)
    if twiddle and transposed:
        X = _fourstep(X, T, n=n, R_=R_, f=f)
    _, BR, M, C = X.shape
    h = M // 2
    stride = n // M  # w_M = w_n^stride
    # bit-reversal read + stage 0 (twiddles 1): y[i] = x[rev(2i)] + x[rev(2i+1)], y[i + M/2] = the difference
    r = bitrev(lax.iota(U32, h), s - 1)
    e = gather(X, r, axis=2)
    o = gather(X, r + U32(h), axis=2)
    X = jnp.concatenate([f.add(e, o), f.sub(e, o)], axis=2)

    def stage(t, X):
        V = X.reshape(LIMBS, BR, h, 2, C)
        e, o = V[:, :, :, 0], V[:, :, :, 1]
        sh = (U32(s - 1) - t.astype(U32)).astype(U32)
        i = lax.iota(U32, h)
        tw = gather(T, ((i >> sh) << sh) * U32(stride)).reshape(LIMBS, 1, h, 1)
        p = f.mul(o, jnp.broadcast_to(tw, o.shape))
        return jnp.concatenate([f.add(e, p), f.sub(e, p)], axis=2)

    X = lax.fori_loop(1, s, stage, X)
    if twiddle and not transposed:
        X = _fourstep(X, T, n=n, R_=R_, f=f)
    return X


def _transposed_impl(x, T, pre=None, *, log_n: int, config: NttConfig):
    """The transform of ``x`` ``(8, B, n)`` given in PASS order (the digit-reversed layout :func:`_passes_impl`
    leaves with ``natural=False``), natural order out, without a digit reversal: the DFT matrix is symmetric, so
    with ``F = Rev P_P ... P_1`` (the passes, then the reversal) ``F Rev = P_1^T ... P_P^T``, and each pass's
    transpose is its twiddle then its sub-transform (:func:`cuzk_jax.ops.pallas.ntt.sub_transform`,
    ``transposed``). ``pre = (lo, hi_a, hi_b)``: :func:`layout_scale_parts`' factors, applied on the load of the
    first pass run (the last digit's); for a transform of one pass, :func:`scale_parts`' pair. ``T`` in the
    kernel's layout (:func:`kernel_table`)."""
    n = 1 << log_n
    B = x.shape[1]
    digits = plan(log_n, config.sub_log())
    if len(digits) <= 1:  # one pass: pass order is natural order (``pre``: scale_parts' pair)
        return _passes_impl(x, T, pre, log_n=log_n, config=config, kernel_layout=True)
    Rs = [1]
    for s in digits[:-1]:
        Rs.append(Rs[-1] << s)
    for p in reversed(range(len(digits))):
        s, R_ = digits[p], Rs[p]
        M = 1 << s
        C = n // (R_ * M)
        X = x.reshape(LIMBS, B * R_, M, C)
        first = p == len(digits) - 1
        if config.kernel == "xla":
            if first and pre is not None:
                X = _scale_rows(X, *pre, R_=R_, schedule=config.schedule)
            X = _xla_pass(X, T, s=s, n=n, R_=R_, twiddle=C > 1, schedule=config.schedule, transposed=True)
        else:
            from cuzk_jax.ops.pallas import ntt as pntt

            X = pntt.sub_transform(X, T, s=s, n=n, R_=R_, twiddle=C > 1, pre=pre if first else None,
                                   interpret=config.kernel == "pallas_interpret", block=config.block,
                                   num_warps=config.warps, transposed=True)
        x = X.reshape(LIMBS, B, n)
    return x


def _scale_rows(X, lo, hi_a, hi_b, *, R_: int, schedule: str):
    """``X`` ``(8, B R_, M, 1)`` times ``hi_a[u] hi_b[v] lo[k]`` at row ``r`` (``r mod R_ = u len(hi_b) + v``), row
    ``k``: the XLA twin of the kernel's row pre-scaling."""
    f = fr.with_schedule(schedule)
    _, BR, M, _ = X.shape
    h = f.mul(jnp.repeat(hi_a, hi_b.shape[-1], axis=-1), jnp.tile(hi_b, (1, hi_a.shape[-1])))  # (8, R_)
    fac = f.mul(jnp.broadcast_to(h[:, :, None], (LIMBS, R_, M)), jnp.broadcast_to(lo[:, None, :], (LIMBS, R_, M)))
    Y = X.reshape(LIMBS, BR // R_, R_, M)
    return f.mul(Y, jnp.broadcast_to(fac[:, None], Y.shape)).reshape(X.shape)


def _passes_impl(x, T, pre=None, post=None, *, log_n: int, config: NttConfig, natural: bool = True,
                 kernel_layout: bool = False):
    """All passes of the transform of ``x`` ``(8, B, n)`` with root table ``T`` (``(8, n/2)``; ``kernel_layout``:
    already in the kernel's layout, :func:`kernel_table`); natural order out (``natural=False``: pass order, see
    the module docstring). ``pre = (lo, hi)``: the input is first scaled by
    :func:`scale_parts`' table (fused into the first kernel pass; an XLA multiplication on the ``xla`` path);
    ``post``: the natural-order output is scaled likewise, or by a constant given as ``(constant(c), constant(1))``
    (XLA fuses it with the digit reversal)."""
    n = 1 << log_n
    B = x.shape[1]
    digits = plan(log_n, config.sub_log())
    if pre is not None and config.kernel == "xla":
        x, pre = _scale_impl(x, *pre, schedule=config.schedule), None
    R_ = 1
    if not kernel_layout:
        T = kernel_table(T, config)
    for p, s in enumerate(digits):
        M = 1 << s
        C = n // (R_ * M)
        X = x.reshape(LIMBS, B * R_, M, C)
        twiddle = C > 1
        if config.kernel == "xla":
            X = _xla_pass(X, T, s=s, n=n, R_=R_, twiddle=twiddle, schedule=config.schedule)
        else:
            from cuzk_jax.ops.pallas import ntt as pntt

            X = pntt.sub_transform(X, T, s=s, n=n, R_=R_, twiddle=twiddle, pre=pre if p == 0 else None,
                                   interpret=config.kernel == "pallas_interpret", block=config.block,
                                   num_warps=config.warps)
        x = X.reshape(LIMBS, B, n)
        R_ *= M
    if not natural:
        return x
    x = digit_reverse(x, digits)
    return x if post is None else _scale_impl(x, *post, schedule=config.schedule)


_stages_jit = jax.jit(_passes_impl, static_argnames=("log_n", "config", "natural"))


def passes(x, T, log_n: int, config: NttConfig, natural: bool = True, pre=None, post=None):
    """The transform of ``x`` ``(8, B, n)`` with root table ``T``, optionally scaled before (``pre = (lo, hi)``)
    and after (``post``: ``(lo, hi)``, or ``(constant(c), constant(1))`` for a constant) -- one jitted program per
    shape, config and scaling kinds; forward and inverse share it (the tables are arguments)."""
    with jax.enable_x64(True):
        return _stages_jit(x, T, pre, post, log_n=log_n, config=config, natural=natural)


def lower_passes(x, T, log_n: int, config: NttConfig):
    """The program :func:`passes` runs (arguments may be ``jax.ShapeDtypeStruct``), lowered, not compiled."""
    with jax.enable_x64(True):
        return _stages_jit.lower(x, T, None, None, log_n=log_n, config=config, natural=True)


def _scale_impl(x, lo, hi, *, schedule: str):
    """``x[..., j] * hi[j >> c] * lo[j mod 2^c]`` (``2^c = len(lo)``); ``x * lo`` when both have length 1 (a
    constant)."""
    f = fr.with_schedule(schedule)
    if hi.shape[-1] == 1 and lo.shape[-1] == 1:
        return F.map_last_axis(lambda w: f.mul(w, jnp.broadcast_to(lo, w.shape)), x)
    # each window makes its own factors from the two small tables (one more product per element): an n-entry
    # table made first costs as much again and holds 32 n bytes (4 GiB at 2^27)
    c = log2_size(lo.shape[-1])
    mask = U32((1 << c) - 1)
    return F.map_last_axis(lambda j, w: f.mul(f.mul(w, gather(hi, j >> c)), gather(lo, j & mask)), x,
                           positions=True)


# ---------------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------------


def check_coset(coset, n: int):
    if coset is None:
        return None
    coset = int(coset) % R
    if coset == 0 or pow(coset, n, R) == 1:
        raise ValueError(f"coset generator {coset} must satisfy g^n != 1 (g outside the domain subgroup)")
    return coset


def ntt(x, *, inverse: bool = False, coset: int | None = None, generator: int = GENERATOR,
        config: NttConfig | None = None):
    """NTT over Fr along the last axis of ``x`` ``(8, *batch, n)`` (Montgomery form); same shape out.

    ``coset=g`` evaluates on (or, with ``inverse``, interpolates from) the coset ``g H``; ``generator`` picks the
    roots of unity (7: zcash/arkworks; 5: snarkjs); ``config`` the kernel (None: :meth:`NttConfig.default`). Works
    inside a caller's ``jax.jit``: the tables are then generated inside that program (module docstring).
    """
    config = NttConfig.coerce(config)
    x = check_input(x, "x", "ops.ntt.ntt")
    n = x.shape[-1]
    log_n = log2_size(n)
    coset = check_coset(coset, n)
    if n == 1:
        return x  # a constant polynomial: every transform is the identity
    eager = _eager(x)
    batch = x.shape[1:-1]
    B = int(np.prod(batch)) if batch else 1
    xb = x.reshape(LIMBS, B, n)
    T = twiddles(n, inverse, generator, eager=eager)
    if not inverse:
        pre = None if coset is None else scale_parts(n, 1, coset, eager=eager)
        y = passes(xb, T, log_n, config, pre=pre)
    elif coset is None:
        y = passes(xb, T, log_n, config, post=(constant(inv_mod_r(n)), constant(1)))
    else:
        y = passes(xb, T, log_n, config, post=scale_parts(n, inv_mod_r(n), inv_mod_r(coset), eager=eager))
    return y.reshape(x.shape)


def intt(x, *, generator: int = GENERATOR, config: NttConfig | None = None):
    """Inverse NTT (see :func:`ntt`)."""
    return ntt(x, inverse=True, generator=generator, config=config)


def coset_ntt(x, g: int = COSET_GENERATOR, *, generator: int = GENERATOR, config: NttConfig | None = None):
    """Evaluations at ``g w^i`` of the polynomials with coefficients ``x`` (default g = 7)."""
    return ntt(x, coset=g, generator=generator, config=config)


def coset_intt(x, g: int = COSET_GENERATOR, *, generator: int = GENERATOR, config: NttConfig | None = None):
    """Coefficients of the polynomials whose evaluations at ``g w^i`` are ``x`` (default g = 7)."""
    return ntt(x, inverse=True, coset=g, generator=generator, config=config)
