"""NTT over Fr on limb-major Montgomery arrays: forward, inverse and coset transforms, batched, natural order.

Representation
--------------
The public functions take and return ``uint32`` arrays of shape ``(8, *batch, n)``: Fr elements in Montgomery form,
fully reduced (as :mod:`cuzk_jax.ops.field`), the **domain axis last** and any batch axes (e.g. a leading partition
axis ``(8, P, n)``) in between. ``n = 2^k``, ``0 <= k <= 32`` (memory bounds the practical size: an ``(8, 2^26)``
array is 2 GiB). Semantics are those of :mod:`cuzk_jax.reference.ntt`:

* ``ntt(x)[i] = sum_j x[j] w^(i j)`` with ``w = 7^((r-1)/n)`` (``generator=5`` gives snarkjs's roots);
* ``ntt(x, inverse=True)`` is its inverse (divides by n);
* ``ntt(x, coset=g)[i] = sum_j x[j] (g w^i)^j`` (evaluation on the coset ``g H``), and the inverse with ``coset=g``
  returns the coefficients from evaluations on ``g H``.

Algorithm
---------
Radix-2 decimation in time in Pease's **constant-geometry** form (M. C. Pease, "An adaptation of the fast Fourier
transform for parallel processing", JACM 1968): every stage reads the pairs ``(x[2i], x[2i+1])`` and writes
``y[i] = e + w o`` and ``y[i + n/2] = e - w o``, so all stages have the same data movement and the stage loop is one
``lax.fori_loop`` whose body is one fused butterfly (no per-stage Python unrolling). Stage ``s`` (0-based) uses the
twiddle ``w^(i with its low log2(n)-1-s bits cleared)`` from one table of ``n/2`` powers, read in non-decreasing order. The
input must be in bit-reversed order, which a gather does in the first pass; that pass also applies the pointwise
pre-scaling (``1/n`` or coset powers) and the first stage, whose twiddles are all 1 (no multiplication). Output is in
natural order, so no final permutation is needed.

Kernels (:class:`~cuzk_jax.ops.config.NttConfig`, ``config=``; the platform default is chosen in
:meth:`NttConfig.default <cuzk_jax.ops.config.NttConfig.default>`):

* ``xla``: radix-2 stages, the carry one ``(B, 8, n)`` array, each iteration one fused butterfly (the default off
  GPUs);
* ``pallas``: radix-4 stages -- each loop iteration fuses 2 consecutive stages, reading ``x[4 q + d]`` (``d < 4``)
  and writing ``z[q + C n/4]`` (``C < 4``): the same multiplications, half the passes over memory -- as the Pallas
  kernel of :mod:`cuzk_jax.ops.pallas.ntt`, whose field operations are PTX carry-chain blocks (the GPU default; a
  stage left over when ``log_n - 1`` is odd runs first as one radix-2 kernel pass);
* ``pallas_interpret``: that kernel under the Pallas interpreter with the rolled jnp field (CPU tests).

Every kernel computes the same function; ``scripts/bench.py --op=ntt`` measures them.

Internally the batch is flattened to ``B`` and the layout is ``(B, 8, n)`` (each batch entry's limb planes
contiguous), converted from/to the public ``(8, B, n)`` inside the first and last passes.

Tables (twiddles ``w^e`` for ``e < n/2``, coset powers) are computed once per (size, root, kind) and cached as
device arrays (:func:`clear_cache` frees them); the program for each shape is jit-compiled once and the tables are
passed to it as arguments, so the forward and inverse transforms share one compiled stage loop.
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
from cuzk_jax.ops.ntt_network import network
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
# Host-side tables, cached on the device
# ---------------------------------------------------------------------------------------------------------------

_TABLES: dict = {}
_HOST_MAX = 1 << 12  # geometric tables up to this length are built from Python ints directly


def clear_cache() -> None:
    """Drop the cached twiddle / coset tables (they are rebuilt on demand)."""
    _TABLES.clear()


@jax.jit
def _outer_mul(a, b):
    # one-off table construction: the rolled schedule compiles fast and its speed does not matter here
    return F.fr_rolled.mul(a, b)


def _mont(values: list[int]) -> np.ndarray:
    return encoding.ints_to_limbs(values, "fr", montgomery=True)


def _geometric(first: int, ratio: int, count: int) -> jax.Array:
    """``[first * ratio^k for k < count]`` as a device ``(8, count)`` Montgomery array.

    Long tables are an outer product ``hi[a] * lo[b]`` (``k = a * len(lo) + b``) of two short host-computed
    tables, done by one device multiplication, so building a 2^25-entry table costs milliseconds of host time.
    """
    first %= R
    ratio %= R
    if count <= _HOST_MAX:
        vals, x = [], first
        for _ in range(count):
            vals.append(x)
            x = x * ratio % R
        return jnp.asarray(_mont(vals))
    lo_n = _HOST_MAX
    hi_n = count // lo_n
    lo, x = [], 1
    for _ in range(lo_n):
        lo.append(x)
        x = x * ratio % R
    step = x  # ratio^lo_n
    hi, x = [], first
    for _ in range(hi_n):
        hi.append(x)
        x = x * step % R
    with jax.enable_x64(True):
        out = _outer_mul(jnp.asarray(_mont(hi))[:, :, None], jnp.asarray(_mont(lo))[:, None, :])
    return out.reshape(LIMBS, count)


def _cached(key, build):
    t = _TABLES.get(key)
    if t is None:
        with jax.ensure_compile_time_eval():  # concrete even when called inside a caller's jit trace
            t = build()
        _TABLES[key] = t
    return t


def root_of_unity(n: int, generator: int = GENERATOR) -> int:
    return ref_ntt.root_of_unity(n, generator)


def twiddles(n: int, inverse: bool = False, generator: int = GENERATOR) -> jax.Array:
    """``(8, max(n/2, 1))`` Montgomery table of ``w^e`` (``w^-e`` if inverse), ``w`` the n-th root from
    ``generator``."""
    w = root_of_unity(n, generator)
    if inverse:
        w = pow(w, R - 2, R)
    return _cached(("tw", n, inverse, generator), lambda: _geometric(1, w, max(n // 2, 1)))


def scale_table(n: int, first: int, ratio: int) -> jax.Array:
    """``(8, n)`` table ``first * ratio^k``."""
    return _cached(("geo", n, first % R, ratio % R), lambda: _geometric(first, ratio, n))


def constant(v: int) -> jax.Array:
    """``(8, 1)`` Montgomery form of ``v``."""
    return _cached(("const", v % R), lambda: jnp.asarray(_mont([v % R])))


def inv_mod_r(v: int) -> int:
    """``v^-1 mod r`` as a Python int (Fermat; ``v`` must not be 0 mod r)."""
    return pow(v % R, R - 2, R)


# ---------------------------------------------------------------------------------------------------------------
# Limb-list arithmetic (lists of 8 uint64 arrays holding 32-bit words)
# ---------------------------------------------------------------------------------------------------------------


def _field(schedule: str):
    return F.fr.with_schedule(schedule)


def _addsub(a, b, schedule: str, subtract: bool):
    shape = jnp.broadcast_shapes(a[0].shape, b[0].shape)
    a = [jnp.broadcast_to(x, shape) for x in a]
    b = [jnp.broadcast_to(x, shape) for x in b]
    if schedule == "rolled":
        # the field layer's rolled add/sub (one lax.scan over the limbs): XLA:CPU would otherwise copy the whole
        # carry chain into every output limb and compile slowly
        f = _field("rolled")
        A = jnp.stack([x.astype(U32) for x in a])
        Bv = jnp.stack([x.astype(U32) for x in b])
        out = f.sub(A, Bv) if subtract else f.add(A, Bv)
        return [out[l].astype(U64) for l in range(LIMBS)]
    return F.sub_limbs(a, b, fr.p_limbs) if subtract else F.add_limbs(a, b, fr.p_limbs)


def _add(a, b, schedule: str):
    return _addsub(a, b, schedule, False)


def limb_sub(a, b, schedule: str):
    """``a - b mod r`` on limb lists (8 uint64 arrays of 32-bit words, broadcast to one shape) under ``schedule``."""
    return _addsub(a, b, schedule, True)


def _stack_pairs(pairs):
    """Broadcast each (a, b) pair to a common shape and stack all pairs on a new leading axis (if more than one)."""
    norm = []
    for a, b in pairs:
        shape = jnp.broadcast_shapes(a[0].shape, b[0].shape)
        norm.append(([jnp.broadcast_to(x, shape) for x in a], [jnp.broadcast_to(x, shape) for x in b]))
    if len(norm) == 1:
        return norm[0]
    a = [jnp.stack([p[0][l] for p in norm]) for l in range(LIMBS)]
    b = [jnp.stack([p[1][l] for p in norm]) for l in range(LIMBS)]
    return a, b


def _unstack(out, m: int):
    return [out] if m == 1 else [[x[j] for x in out] for j in range(m)]


def _addsub_many(pairs, schedule: str, subtract: bool):
    """Sums (or differences) of several limb-list pairs. Under the rolled (CPU) schedule they are stacked into ONE
    field addition (small programs); straight-line code stays per pair (no stacking inside Pallas kernels)."""
    if schedule != "rolled":
        return [_addsub(a, b, schedule, subtract) for a, b in pairs]
    a, b = _stack_pairs(pairs)
    return _unstack(_addsub(a, b, schedule, subtract), len(pairs))


def limb_mul_many(pairs, schedule: str):
    """Montgomery products of several (a, b) limb-list pairs, stacked into ONE field multiplication (small programs).

    Operands of a pair are broadcast to a common shape; all pairs must then agree in shape.
    """
    a, b = _stack_pairs(pairs)
    if schedule == "unrolled":
        prod = F.cios_limbs(a, b, fr.p_limbs, fr.pinv)
    else:
        out = _field("rolled").mul(jnp.stack([x.astype(U32) for x in a]), jnp.stack([x.astype(U32) for x in b]))
        prod = [out[l].astype(U64) for l in range(LIMBS)]
    return _unstack(prod, len(pairs))


def _bitrev(i, bits: int):
    """Reverse the low ``bits`` bits of the uint32 vector ``i`` (the bit-reversal permutation)."""
    if bits == 0:
        return jnp.zeros_like(i)
    x = i
    for shift, mask in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF)):
        x = ((x >> shift) & U32(mask)) | ((x & U32(mask)) << shift)
    x = (x >> 16) | (x << 16)
    return x >> (32 - bits)


def gather(a, idx):
    """``a[..., idx]`` (indices promised in bounds: no clamping in the program)."""
    return a.at[..., idx].get(mode="promise_in_bounds")


# ---------------------------------------------------------------------------------------------------------------
# XLA programs
# ---------------------------------------------------------------------------------------------------------------


def _xla_twiddle_getter(W):
    def get(taus):
        idx = jnp.stack(taus)  # (m, Q)
        g = gather(W, idx)  # (8, m, Q)
        return [[g[l, j].astype(U64) for l in range(LIMBS)] for j in range(len(taus))]

    return get


def _xla_step_stacked(X, W, stage, log_n: int, k: int, schedule: str):
    """One iteration (k stages) on the stacked carry ``(B, 8, n)``."""
    B = X.shape[0]
    n = 1 << log_n
    Q = n >> k
    V = X.reshape(B, LIMBS, Q, 1 << k)
    xs = [[V[:, l, :, d].astype(U64) for l in range(LIMBS)] for d in range(1 << k)]
    q = lax.iota(U32, Q)
    zs = network(xs, q, stage, log_n, k, _xla_twiddle_getter(W), lambda pairs: limb_mul_many(pairs, schedule),
                 lambda pairs, subtract: _addsub_many(pairs, schedule, subtract))
    out = [zs[C][l].astype(U32) for l in range(LIMBS) for C in range(1 << k)]
    return jnp.stack(out, axis=1).reshape(B, LIMBS, n)


def _stage_loop(X, W, first: int, count: int, log_n: int, k: int, config: NttConfig):
    """``count`` iterations of k stages each, starting at stage ``first``."""
    if count <= 0:
        return X
    if config.kernel != "xla":
        from cuzk_jax.ops.pallas import ntt as pntt

        def body(t, X):
            return pntt.step(X, W, first + k * t, log_n=log_n, k=k, interpret=config.kernel == "pallas_interpret",
                             block=config.block, num_warps=config.warps)

        return lax.fori_loop(0, count, body, X)
    return lax.fori_loop(0, count, lambda t, X: _xla_step_stacked(X, W, first + k * t, log_n, k, config.schedule), X)


def _stages_impl(X, W, *, log_n: int, config: NttConfig):
    """Stages 1 .. log_n-1 (stage 0 is done by the pre-pass) on the internal layout ``(B, 8, n)``: radix-2
    iterations for the XLA kernel, radix-4 for the Pallas kernel (a stage left over runs first as radix 2)."""
    k = 1 if config.kernel == "xla" else 2
    todo = log_n - 1
    if todo <= 0:
        return X
    lead = todo % k  # stages left over when todo is not a multiple of k
    X = _stage_loop(X, W, 1, lead, log_n, 1, config)
    return _stage_loop(X, W, 1 + lead, (todo - lead) // k, log_n, k, config)


_stages_jit = jax.jit(_stages_impl, static_argnames=("log_n", "config"))
_stages_jit_donate = jax.jit(_stages_impl, static_argnames=("log_n", "config"), donate_argnums=0)


def stage0(a, b, schedule: str):
    """The first DIT stage: twiddles are all 1. a, b: limb lists of x[2i], x[2i+1] -> (u, v) for y[i], y[i+n/2]."""
    return _add(a, b, schedule), limb_sub(a, b, schedule)


def pack_stage0(u, v, B: int, n: int):
    """Limb lists ``(u, v)`` of :func:`stage0` (limbs ``(B, n/2)``) -> the internal layout ``(B, 8, n)``: ``u`` in
    positions ``[0, n/2)``, ``v`` in ``[n/2, n)``."""
    planes = []
    for l in range(LIMBS):
        planes += [u[l].astype(U32), v[l].astype(U32)]
    return jnp.stack(planes, axis=1).reshape(B, LIMBS, n)


def pre_indices(log_n: int):
    """Source positions of the first stage's pairs: x[rev(2i)] and x[rev(2i+1)] = x[rev'(i)], x[rev'(i) + n/2]."""
    h = 1 << (log_n - 1)
    r = _bitrev(lax.iota(U32, h), log_n - 1)
    return jnp.stack([r, r + U32(h)])  # (2, h)


def _pre_impl(x, scale, *, log_n: int, layout: str, scale_kind: str, schedule: str):
    """Bit-reversal gather + optional pointwise scaling + stage 0; output internal ``(B, 8, n)``.

    ``layout``: 'ext' for a public ``(8, B, n)`` input, 'int' for an internal ``(B, 8, n)`` one.
    ``scale_kind``: 'none', 'const' (``scale`` is ``(8, 1)``) or 'table' (``scale`` is ``(8, n)``, natural order).
    """
    n = 1 << log_n
    idx = pre_indices(log_n)
    g = gather(x, idx)  # (8, B, 2, h) or (B, 8, 2, h)
    if layout == "ext":
        B = x.shape[1]
        vals = [g[l].astype(U64) for l in range(LIMBS)]
    else:
        B = x.shape[0]
        vals = [g[:, l].astype(U64) for l in range(LIMBS)]
    if scale_kind == "const":
        s = [scale[l].astype(U64) for l in range(LIMBS)]  # shape (1,), broadcasts
        vals = limb_mul_many([(vals, s)], schedule)[0]
    elif scale_kind == "table":
        sg = gather(scale, idx)  # (8, 2, h)
        vals = limb_mul_many([(vals, [sg[l].astype(U64) for l in range(LIMBS)])], schedule)[0]
    elif scale_kind != "none":
        raise ValueError(scale_kind)
    u, v = stage0([x[:, 0] for x in vals], [x[:, 1] for x in vals], schedule)
    return pack_stage0(u, v, B, n)


_pre_jit = jax.jit(_pre_impl, static_argnames=("log_n", "layout", "scale_kind", "schedule"))


def _post_impl(Y, scale, *, scale_kind: str, schedule: str):
    """Internal ``(B, 8, n)`` -> public ``(8, B, n)``, optionally times a pointwise table/constant."""
    if scale_kind == "none":
        return jnp.transpose(Y, (1, 0, 2))
    vals = [Y[:, l].astype(U64) for l in range(LIMBS)]  # (B, n)
    s = [scale[l].astype(U64) for l in range(LIMBS)]  # (n,) or (1,)
    out = limb_mul_many([(vals, s)], schedule)[0]
    return jnp.stack([x.astype(U32) for x in out])


_post_jit = jax.jit(_post_impl, static_argnames=("scale_kind", "schedule"))


# ---------------------------------------------------------------------------------------------------------------
# Building blocks for the QAP module (all under x64; internal layout (B, 8, n))
# ---------------------------------------------------------------------------------------------------------------


def pre(x, log_n: int, config: NttConfig, layout: str = "ext", scale=None):
    kind = "none" if scale is None else ("const" if scale.shape[-1] == 1 else "table")
    if scale is None:
        scale = jnp.zeros((LIMBS, 1), U32)
    return _pre_jit(x, scale, log_n=log_n, layout=layout, scale_kind=kind, schedule=config.schedule)


def _stages_program(X):
    # donate the intermediate buffer on accelerators (halves peak memory at 2^26 x partitions); not inside a trace
    return _stages_jit_donate if (jax.default_backend() != "cpu" and not isinstance(X, _Tracer)) else _stages_jit


def stages(X, W, log_n: int, config: NttConfig):
    return _stages_program(X)(X, W, log_n=log_n, config=config)


def lower_stages(X, W, log_n: int, config: NttConfig):
    """The program :func:`stages` runs for these arguments (arrays or ``jax.ShapeDtypeStruct``), lowered and not
    compiled (``.compile().as_text()`` for its HLO)."""
    return _stages_program(X).lower(X, W, log_n=log_n, config=config)


def post(Y, config: NttConfig, scale=None):
    kind = "none" if scale is None else "table"
    if scale is None:
        scale = jnp.zeros((LIMBS, 1), U32)
    return _post_jit(Y, scale, scale_kind=kind, schedule=config.schedule)


# ---------------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------------


def ntt(x, *, inverse: bool = False, coset: int | None = None, generator: int = GENERATOR,
        config: NttConfig | None = None):
    """NTT over Fr along the last axis of ``x`` ``(8, *batch, n)`` (Montgomery form); same shape out.

    ``coset=g`` evaluates on (or, with ``inverse``, interpolates from) the coset ``g H``; ``generator`` picks the
    roots of unity (7: zcash/arkworks; 5: snarkjs); ``config`` the kernel (None: :meth:`NttConfig.default`). Works
    inside a caller's ``jax.jit`` (tables are built eagerly and captured as constants).
    """
    config = NttConfig.coerce(config)
    x = check_input(x, "x", "ops.ntt.ntt")
    n = x.shape[-1]
    log_n = log2_size(n)
    if coset is not None:
        coset = int(coset) % R
        if coset == 0 or pow(coset, n, R) == 1:
            raise ValueError(f"coset generator {coset} must satisfy g^n != 1 (g outside the domain subgroup)")
    if n == 1:
        return x  # a constant polynomial: every transform is the identity
    batch = x.shape[1:-1]
    B = int(np.prod(batch)) if batch else 1
    xb = x.reshape(LIMBS, B, n)
    with jax.enable_x64(True):
        W = twiddles(n, inverse, generator)
        if not inverse:
            scale = scale_table(n, 1, coset) if coset is not None else None
            X = pre(xb, log_n, config, "ext", scale)
            X = stages(X, W, log_n, config)
            y = post(X, config)
        elif coset is None:
            X = pre(xb, log_n, config, "ext", constant(inv_mod_r(n)))
            X = stages(X, W, log_n, config)
            y = post(X, config)
        else:
            X = pre(xb, log_n, config, "ext")
            X = stages(X, W, log_n, config)
            y = post(X, config, scale_table(n, inv_mod_r(n), inv_mod_r(coset)))
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
