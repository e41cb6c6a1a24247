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

``radix 2^k`` variants fuse k consecutive stages into one loop iteration: the iteration reads ``x[2^k q + d]``
(``d < 2^k``) and writes ``z[q + C n/2^k]`` (``C < 2^k``) -- the same multiplications, 1/k of the passes over
memory. Implementations (:func:`set_impl`, the ``CUZK_NTT_IMPL`` environment variable, or ``impl=``):

* ``xla-r2``, ``xla-r4``: the carry is one ``(B, 8, n)`` array, each iteration one root concatenate of limb planes;
* ``xla-r2-tuple``, ``xla-r4-tuple``: the carry is a tuple of ``(B, n/2^k)`` limb planes per output section, so
  each iteration is a multi-output elementwise computation (XLA can share one multiplication between outputs);
* ``pallas-r2``, ``pallas-r4``, ``pallas-r8``: each iteration is a Pallas kernel (:mod:`cuzk_jax.ops.pallas.ntt`);
  ``:b=BLOCK:w=WARPS`` suffixes set its block size and warp count (``pallas-r4:b=256:w=8``), ``:ms=rolled`` /
  ``:ms=rolled_loop`` run the CIOS outer loop (and, for ``rolled_loop``, all products of a round through one
  multiplier) as loops inside the kernel: smaller kernels to compile; ``unrolled`` is the default. The
  ``_ptx`` forms (``unrolled_ptx``, ``rolled_ptx``, ``rolled_ptx_loop``) compute each 32x32->64-bit limb product
  as one PTX ``mad.wide.u32`` (GPU only; interpreted, they use jnp products); ``asm`` makes every product, sum
  and difference one PTX carry-chain block on uint32 limbs (:mod:`cuzk_jax.ops.pallas.ptx_field`; GPU only,
  interpreted it runs ``rolled``). Every impl takes ``:lead=K``:
  stages left over by the radix run first as one radix-2^K iteration where that fits (see :func:`_stages_impl`).

Which is fastest on a GPU is measured by ``scripts/bench.py --op=ntt``; every variant computes the same function.
The default (:func:`default_impl`) is ``pallas-r4:ms=asm:b=256:w=8`` on a GPU -- on the H200 ``pallas-r4:ms=asm``
compiled in under 1 s per size and ran 2^20 in 1.92 ms, 2^24 in 25.1 ms and 10 x 2^20 in 9.8 ms, against 2.26 /
26.6 / 11.3 ms for ``pallas-r4:ms=rolled_loop`` in the same run, and 256-group blocks of 8 warps took 2^20 to
1.80 ms (BUILD.md) -- and ``xla-r2`` elsewhere (the Pallas kernels are Triton kernels; on CPU they only run interpreted).

Internally the batch is flattened to ``B`` and the layout is ``(B, 8, n)`` (each batch entry's limb planes
contiguous), converted from/to the public ``(8, B, n)`` inside the first and last passes.

Tables (twiddles ``w^e`` for ``e < n/2``, coset powers) are computed once per (size, root, kind) and cached as
device arrays (:func:`clear_cache` frees them); the program for each shape is jit-compiled once and the tables are
passed to it as arguments, so the forward and inverse transforms share one compiled stage loop.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from cuzk_jax import encoding
from cuzk_jax.ops import field as F
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

IMPLS = ("xla-r2", "xla-r4", "xla-r2-tuple", "xla-r4-tuple", "pallas-r2", "pallas-r4", "pallas-r8")
# the kernel's products (cuzk_jax.ops.pallas.ntt._products)
PALLAS_MUL = ("unrolled", "rolled", "rolled_loop", "unrolled_ptx", "rolled_ptx", "rolled_ptx_loop", "asm")
_impl_override: str | None = os.environ.get("CUZK_NTT_IMPL") or None


def set_impl(impl: str | None) -> None:
    """Choose the stage implementation (one of :data:`IMPLS`, Pallas ones optionally with ``:b=BLOCK:w=WARPS``,
    e.g. ``pallas-r4:b=256:w=8``; ``None`` restores the backend default of :func:`default_impl`)."""
    global _impl_override
    if impl is not None:
        _parse_impl(impl)
    _impl_override = impl


GPU_DEFAULT_IMPL = "pallas-r4:ms=asm:b=256:w=8"


def default_impl() -> str:
    """The override (:func:`set_impl`, ``CUZK_NTT_IMPL``), else :data:`GPU_DEFAULT_IMPL` on a GPU and ``xla-r2``
    elsewhere (module docstring)."""
    if _impl_override:
        return _impl_override
    return GPU_DEFAULT_IMPL if jax.default_backend() == "gpu" else "xla-r2"


def _parse_impl(impl: str) -> tuple[str, int, str, tuple]:
    """'xla-r4-tuple' -> ('xla', 2, 'tuple', ()); 'pallas-r4:b=256:w=8' -> ('pallas', 2, 'stacked',
    (('block', 256), ('num_warps', 8))): backend, stages per iteration (log2 radix), carry, kernel options."""
    name, *opts = str(impl).split(":")
    if name not in IMPLS:
        raise ValueError(f"unknown NTT impl {impl!r}; expected one of {IMPLS}")
    parts = name.split("-")
    kw = []
    for o in opts:
        key, _, val = o.partition("=")
        ok = (parts[0] == "pallas" and ((key in ("b", "w") and val.isdigit()) or (key == "ms" and val in PALLAS_MUL))
              or (key == "lead" and val in ("1", "2", "3")))
        if not ok:
            raise ValueError(f"unknown NTT impl option {o!r} in {impl!r} (Pallas impls take b=BLOCK, w=WARPS, "
                             f"ms={'|'.join(PALLAS_MUL)}; every impl takes lead=1|2|3)")
        kw.append(({"b": "block", "w": "num_warps", "ms": "mul_schedule", "lead": "lead"}[key],
                   val if key == "ms" else int(val)))
    k = {"r2": 1, "r4": 2, "r8": 3}[parts[1]]
    return parts[0], k, (parts[2] if len(parts) > 2 else "stacked"), tuple(kw)


# ---------------------------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------------------------


def log2_size(n: int) -> int:
    """log2 of an NTT size; ValueError unless n is a power of two in [1, 2^32]."""
    return ref_ntt.log2_size(int(n))


def check_input(x, name: str = "x"):
    """Validate a public-layout Fr array ``(8, *batch, n)`` (uint32); returns it as a jax array."""
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        raise ValueError(f"{name} must be a uint32 array of shape (8, *batch, n), got {type(x).__name__}")
    if dtype != np.uint32:
        raise ValueError(f"{name} must have dtype uint32 (Montgomery-form Fr limbs), got {dtype}")
    if len(shape) < 2 or shape[0] != LIMBS:
        raise ValueError(f"{name} must have shape (8, *batch, n) with the domain axis last, got {tuple(shape)}")
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
    return fr.mul(a, b, schedule="rolled")


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


def _inv(v: int) -> int:
    return pow(v % R, R - 2, R)


# ---------------------------------------------------------------------------------------------------------------
# Limb-list arithmetic (lists of 8 uint64 arrays holding 32-bit words)
# ---------------------------------------------------------------------------------------------------------------


def _addsub(a, b, schedule: str, subtract: bool):
    shape = jnp.broadcast_shapes(a[0].shape, b[0].shape)
    a = [jnp.broadcast_to(x, shape) for x in a]
    b = [jnp.broadcast_to(x, shape) for x in b]
    if schedule == "rolled":
        # the field layer's rolled add/sub (one lax.scan over the limbs): XLA:CPU would otherwise copy the whole
        # carry chain into every output limb and compile slowly
        A = jnp.stack([x.astype(U32) for x in a])
        Bv = jnp.stack([x.astype(U32) for x in b])
        out = fr.sub(A, Bv) if subtract else fr.add(A, Bv)
        return [out[l].astype(U64) for l in range(LIMBS)]
    return F.sub_limbs(a, b, fr.p_limbs) if subtract else F.add_limbs(a, b, fr.p_limbs)


def _add(a, b, schedule: str = "unrolled"):
    return _addsub(a, b, schedule, False)


def _sub(a, b, schedule: str = "unrolled"):
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


def _mul_many(pairs, schedule: str):
    """Products of several (a, b) limb-list pairs, stacked into ONE field multiplication (small programs).

    Operands of a pair are broadcast to a common shape; all pairs must then agree in shape.
    """
    a, b = _stack_pairs(pairs)
    if schedule == "unrolled":
        prod = F.cios_limbs(a, b, fr.p_limbs, fr.pinv)
    elif schedule == "rolled":
        out = fr.mul(jnp.stack([x.astype(U32) for x in a]), jnp.stack([x.astype(U32) for x in b]), schedule="rolled")
        prod = [out[l].astype(U64) for l in range(LIMBS)]
    else:
        raise ValueError(f"unknown mul schedule {schedule!r}")
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


def _gather(a, idx):
    return a.at[..., idx].get(mode="promise_in_bounds")


# ---------------------------------------------------------------------------------------------------------------
# The constant-geometry butterfly network of one loop iteration (shared by the XLA and Pallas paths)
# ---------------------------------------------------------------------------------------------------------------


def network(xs, q, stage, log_n: int, k: int, get_twiddles, mul_many, schedule: str = "unrolled", addsub=None):
    """k consecutive DIT stages (``stage .. stage+k-1``) on one group of inputs.

    ``xs[d]`` (``d < 2^k``) is the limb list of ``x[2^k q + d]``; returns ``zs`` with ``zs[C]`` the limb list of
    ``z[q + C n/2^k]``. ``q`` is the uint32 vector of group indices; ``stage`` may be traced.
    ``get_twiddles(taus)`` gathers the twiddle limb lists ``w^tau`` for a list of index vectors;
    ``mul_many(pairs)`` multiplies limb-list pairs; ``schedule`` picks the add/sub form, unless ``addsub(pairs,
    subtract)`` is given (a field's own additions, e.g. the PTX blocks of :mod:`cuzk_jax.ops.pallas.ptx_field`).

    After j of the k stages, the value labelled (c_1..c_j, dd) sits at position
    ``sum_m c_m 2^(L-1-(j-m)) + q 2^(k-j) + dd``; stage j+1 pairs dd = 2t, 2t+1 (pair index = position >> 1) and
    uses the twiddle ``w^((i >> sh) << sh)``, ``sh = L-1-(stage+j)``.
    """
    L = log_n
    addsub = addsub or functools.partial(_addsub_many, schedule=schedule)
    state = {((), d): xs[d] for d in range(1 << k)}
    for j in range(k):
        sh = (jnp.asarray(L - 1 - j, U32) - jnp.asarray(stage, U32)).astype(U32)
        keys = sorted({(cs, dd >> 1) for (cs, dd) in state})
        taus, pairs = [], []
        for cs, t in keys:
            base = 0
            for m, c in enumerate(cs, start=1):
                base += c << (L - 2 - (j - m))
            i = (q << U32(k - j - 1)) + U32(base + t)
            taus.append((i >> sh) << sh)
        tws = get_twiddles(taus)
        for (cs, t), tw in zip(keys, tws):
            pairs.append((state[(cs, 2 * t + 1)], tw))
        prods = mul_many(pairs)
        ets = [(state[(cs, 2 * t)], tprod) for (cs, t), tprod in zip(keys, prods)]
        sums = addsub(ets, subtract=False)  # stacked: one addition and one subtraction per stage
        diffs = addsub(ets, subtract=True)
        state = {}
        for (cs, t), u, v in zip(keys, sums, diffs):
            state[(cs + (0,), t)] = u
            state[(cs + (1,), t)] = v
    zs = []
    for C in range(1 << k):
        cs = tuple((C >> (m - 1)) & 1 for m in range(1, k + 1))
        zs.append(state[(cs, 0)])
    return zs


# ---------------------------------------------------------------------------------------------------------------
# XLA programs
# ---------------------------------------------------------------------------------------------------------------


def _xla_twiddle_getter(W):
    def get(taus):
        idx = jnp.stack(taus)  # (m, Q)
        g = _gather(W, idx)  # (8, m, Q)
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
    zs = network(xs, q, stage, log_n, k, _xla_twiddle_getter(W),
                 lambda pairs: _mul_many(pairs, schedule), schedule)
    out = [zs[C][l].astype(U32) for l in range(LIMBS) for C in range(1 << k)]
    return jnp.stack(out, axis=1).reshape(B, LIMBS, n)


def _to_tuple(X, k: int):
    B, _, n = X.shape
    S = 1 << k
    V = X.reshape(B, LIMBS, S, n // S)
    return tuple(V[:, l, C] for C in range(S) for l in range(LIMBS))


def _from_tuple(T, k: int):
    S = 1 << k
    B, Q = T[0].shape
    planes = [T[C * LIMBS + l] for l in range(LIMBS) for C in range(S)]
    return jnp.stack(planes, axis=1).reshape(B, LIMBS, S * Q)


def _xla_step_tuple(T, W, stage, log_n: int, k: int, schedule: str):
    """One iteration on the tuple carry: ``T[C*8 + l]`` is limb l of section C (positions C n/2^k + q)."""
    S = 1 << k
    B, Q = T[0].shape
    full = [jnp.concatenate([T[C * LIMBS + l] for C in range(S)], axis=-1).reshape(B, Q, S) for l in range(LIMBS)]
    xs = [[full[l][:, :, d].astype(U64) for l in range(LIMBS)] for d in range(S)]
    q = lax.iota(U32, Q)
    zs = network(xs, q, stage, log_n, k, _xla_twiddle_getter(W),
                 lambda pairs: _mul_many(pairs, schedule), schedule)
    return tuple(zs[C][l].astype(U32) for C in range(S) for l in range(LIMBS))


def _stage_loop(X, W, first: int, count: int, log_n: int, k: int, backend: str, carry: str, schedule: str,
                opts: tuple = ()):
    """``count`` iterations of k stages each, starting at stage ``first``."""
    if count <= 0:
        return X
    if backend == "pallas":
        from cuzk_jax.ops.pallas import ntt as pntt

        interpret = jax.default_backend() == "cpu"
        body = lambda t, X: pntt.step(X, W, first + k * t, log_n=log_n, k=k, interpret=interpret, **dict(opts))
        return lax.fori_loop(0, count, body, X)
    if carry == "tuple":
        T = _to_tuple(X, k)
        T = lax.fori_loop(0, count, lambda t, T: _xla_step_tuple(T, W, first + k * t, log_n, k, schedule), T)
        return _from_tuple(T, k)
    return lax.fori_loop(0, count, lambda t, X: _xla_step_stacked(X, W, first + k * t, log_n, k, schedule), X)


def _stages_impl(X, W, *, log_n: int, impl: str, schedule: str):
    """Stages 1 .. log_n-1 (stage 0 is done by the pre-pass) on the internal layout ``(B, 8, n)``.

    When ``log_n - 1`` is not a multiple of ``k``, the stages left over run first as radix-2 iterations, or --
    with the impl option ``lead=K`` -- as ONE radix-2^K iteration when that leaves a multiple of ``k`` (a 2^20
    transform with ``pallas-r4:lead=3``: one radix-8 pass and eight radix-4 ones, 9 kernel passes instead of 10)."""
    backend, k, carry, opts = _parse_impl(impl)
    opts = dict(opts)
    lead_k = opts.pop("lead", None)
    opts = tuple(opts.items())
    todo = log_n - 1
    if todo <= 0:
        return X
    lead = todo % k  # stages left over when todo is not a multiple of k
    if lead and lead_k and lead_k <= todo and (todo - lead_k) % k == 0:
        X = _stage_loop(X, W, 1, 1, log_n, lead_k, backend, carry, schedule, opts)
        lead = lead_k
    else:
        X = _stage_loop(X, W, 1, lead, log_n, 1, backend, carry, schedule, opts)
    return _stage_loop(X, W, 1 + lead, (todo - lead) // k, log_n, k, backend, carry, schedule, opts)


_stages_jit = jax.jit(_stages_impl, static_argnames=("log_n", "impl", "schedule"))
_stages_jit_donate = jax.jit(_stages_impl, static_argnames=("log_n", "impl", "schedule"), donate_argnums=0)


def _stage0(a, b, schedule: str):
    """The first DIT stage: twiddles are all 1. a, b: limb lists of x[2i], x[2i+1] -> (u, v) for y[i], y[i+n/2]."""
    return _add(a, b, schedule), _sub(a, b, schedule)


def _pack_stage0(u, v, B: int, n: int):
    planes = []
    for l in range(LIMBS):
        planes += [u[l].astype(U32), v[l].astype(U32)]
    return jnp.stack(planes, axis=1).reshape(B, LIMBS, n)


def _pre_indices(log_n: int):
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
    idx = _pre_indices(log_n)
    g = _gather(x, idx)  # (8, B, 2, h) or (B, 8, 2, h)
    if layout == "ext":
        B = x.shape[1]
        vals = [g[l].astype(U64) for l in range(LIMBS)]
    else:
        B = x.shape[0]
        vals = [g[:, l].astype(U64) for l in range(LIMBS)]
    if scale_kind == "const":
        s = [scale[l].astype(U64) for l in range(LIMBS)]  # shape (1,), broadcasts
        vals = _mul_many([(vals, s)], schedule)[0]
    elif scale_kind == "table":
        sg = _gather(scale, idx)  # (8, 2, h)
        vals = _mul_many([(vals, [sg[l].astype(U64) for l in range(LIMBS)])], schedule)[0]
    elif scale_kind != "none":
        raise ValueError(scale_kind)
    u, v = _stage0([x[:, 0] for x in vals], [x[:, 1] for x in vals], schedule)
    return _pack_stage0(u, v, B, n)


_pre_jit = jax.jit(_pre_impl, static_argnames=("log_n", "layout", "scale_kind", "schedule"))


def _post_impl(Y, scale, *, scale_kind: str, schedule: str):
    """Internal ``(B, 8, n)`` -> public ``(8, B, n)``, optionally times a pointwise table/constant."""
    if scale_kind == "none":
        return jnp.transpose(Y, (1, 0, 2))
    vals = [Y[:, l].astype(U64) for l in range(LIMBS)]  # (B, n)
    s = [scale[l].astype(U64) for l in range(LIMBS)]  # (n,) or (1,)
    out = _mul_many([(vals, s)], schedule)[0]
    return jnp.stack([x.astype(U32) for x in out])


_post_jit = jax.jit(_post_impl, static_argnames=("scale_kind", "schedule"))


# ---------------------------------------------------------------------------------------------------------------
# Building blocks for the QAP module (all under x64; internal layout (B, 8, n))
# ---------------------------------------------------------------------------------------------------------------


def pre(x, log_n: int, layout: str = "ext", scale=None):
    kind = "none" if scale is None else ("const" if scale.shape[-1] == 1 else "table")
    if scale is None:
        scale = jnp.zeros((LIMBS, 1), U32)
    return _pre_jit(x, scale, log_n=log_n, layout=layout, scale_kind=kind, schedule=F.mul_schedule())


def stages(X, W, log_n: int, impl: str | None = None):
    impl = impl or default_impl()
    _parse_impl(impl)
    # donate the intermediate buffer on accelerators (halves peak memory at 2^26 x partitions); not inside a trace
    fn = _stages_jit_donate if (jax.default_backend() != "cpu" and not isinstance(X, _Tracer)) else _stages_jit
    return fn(X, W, log_n=log_n, impl=impl, schedule=F.mul_schedule())


def post(Y, scale=None):
    kind = "none" if scale is None else "table"
    if scale is None:
        scale = jnp.zeros((LIMBS, 1), U32)
    return _post_jit(Y, scale, scale_kind=kind, schedule=F.mul_schedule())


# ---------------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------------


def ntt(x, *, inverse: bool = False, coset: int | None = None, generator: int = GENERATOR, impl: str | None = None):
    """NTT over Fr along the last axis of ``x`` ``(8, *batch, n)`` (Montgomery form); same shape out.

    ``coset=g`` evaluates on (or, with ``inverse``, interpolates from) the coset ``g H``; ``generator`` picks the
    roots of unity (7: zcash/arkworks; 5: snarkjs). Works inside a caller's ``jax.jit`` (tables are built eagerly
    and captured as constants).
    """
    x = check_input(x)
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
            X = pre(xb, log_n, "ext", scale)
            X = stages(X, W, log_n, impl)
            y = post(X)
        elif coset is None:
            X = pre(xb, log_n, "ext", constant(_inv(n)))
            X = stages(X, W, log_n, impl)
            y = post(X)
        else:
            X = pre(xb, log_n, "ext")
            X = stages(X, W, log_n, impl)
            y = post(X, scale_table(n, _inv(n), _inv(coset)))
    return y.reshape(x.shape)


def intt(x, **kwargs):
    """Inverse NTT (see :func:`ntt`)."""
    return ntt(x, inverse=True, **kwargs)


def coset_ntt(x, g: int = COSET_GENERATOR, **kwargs):
    """Evaluations at ``g w^i`` of the polynomials with coefficients ``x`` (default g = 7)."""
    return ntt(x, coset=g, **kwargs)


def coset_intt(x, g: int = COSET_GENERATOR, **kwargs):
    """Coefficients of the polynomials whose evaluations at ``g w^i`` are ``x`` (default g = 7)."""
    return ntt(x, inverse=True, coset=g, **kwargs)
