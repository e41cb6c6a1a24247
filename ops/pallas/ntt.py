"""Pallas kernel: one pass of the NTT of :mod:`cuzk_jax.ops.ntt` -- whole ``M``-point sub-transforms per program.

Layout: ``x`` is the ``(8, BR, M, C)`` uint32 Montgomery view of a pass (:mod:`cuzk_jax.ops.ntt`, module docstring:
``M = 2^s`` the points of the pass's sub-transforms, along axis 2; ``C`` contiguous columns; ``BR`` independent
rows), ``w`` the root table ``w_n^e`` **limb-minor**, ``(n/2, 8)``: a gathered twiddle is one 32-byte sector. Each
program owns a ``(Rb, M, Cb)`` tile: ``Cb = min(C, block / M)`` adjacent columns and, where a pass has fewer
columns than that (the last pass, ``C = 1``), ``Rb`` rows of the batch axis, so that every program has
``block / M`` lanes. It loads the tile once, transforms it, multiplies by the four-step twiddle ``w_n^((k j R) mod
n)`` (``k`` the row, ``j`` the global column; ``-w^(e - n/2)`` for ``e >= n/2``) and stores it once (a first pass
may also scale its input by coset powers on load, ``pre``): one read and one write of the data per pass instead of
one per stage (the structure of sppark's GPU NTT, which keeps 2^k-point sub-transforms in fast memory).

The tile is held as ``M`` separate ``(Rb, Cb)`` lane arrays, one per row ``k``: every butterfly is elementwise
between two of them, so no data moves between threads, and each butterfly column's twiddle ``w_(2h)^t`` is one
scalar, uniform across the program. Stages: radix-2 decimation in time (Cooley-Tukey) over the rows read in
bit-reversed order -- the reversal is only the Python order of the list, free -- so output is in natural order.
``M`` points x 8 limbs are live per lane: 8-point passes (``sub=3``, the default) keep them in registers.

Field arithmetic: compiled for a GPU, every Fr product, sum and difference is one PTX carry-chain block on uint32
limbs (:mod:`cuzk_jax.ops.pallas.ptx_field`); ``interpret=True`` (CPU tests) runs the same kernel with the rolled
jnp limb field (:class:`~cuzk_jax.ops.pallas.limb_field.LimbField`: same function; inline PTX has no interpreter).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt


LIMBS = 8
DEFAULT_BLOCK = 2048
STRIDES = ("static", "runtime")  # NttConfig.strides: the pass geometry compiled in, or read at run time
U32 = jnp.uint32


def _field(interpret: bool):
    """The kernel's field: PTX blocks compiled, the rolled jnp limb field interpreted (see the module docstring)."""
    if interpret:
        from .limb_field import fr
    else:
        from .ptx_field import fr
    return fr


def _bcast(a, shape):
    return [jnp.broadcast_to(v, shape) for v in a]


def _kernel(x_ref, w_ref, *refs, n: int, s: int, R_: int, Cb: int, nc: int, twiddle: bool, pre: bool,
            interpret: bool):
    """One ``(Rb, M, Cb)`` tile as ``M`` lane arrays (module docstring); ``w_ref`` the limb-minor root table."""
    f = _field(interpret)
    M = 1 << s
    col0 = (pl.program_id(0) % nc) * Cb
    Rb = x_ref.shape[1]
    shape = (Rb, Cb)
    rows = [[x_ref[l, :, k, :].astype(f.dtype) for l in range(LIMBS)] for k in range(M)]
    j = (jax.lax.broadcasted_iota(jnp.int32, (1, Cb), 1) + col0).astype(U32)  # global column, per lane
    if pre:
        lo_ref, hi_ref, o_ref = refs
        rows = _pre_scale(f, rows, lo_ref, hi_ref, [U32(k * nc * Cb) + j for k in range(M)], shape)
    else:
        (o_ref,) = refs
    a = _transform(f, rows, w_ref, n=n, s=s, shape=shape)
    if twiddle:
        a = _twiddle(f, a, w_ref, [U32(k * R_) for k in range(M)], j, n=n, shape=shape)
    for k in range(M):
        for l in range(LIMBS):
            o_ref[l, :, k, :] = a[k][l].astype(U32)


def _roots(f, w_ref, idx):
    """``w^idx``, ``idx < n/2`` (a static int or an int32 lane array), from the limb-minor table."""
    return [w_ref[idx, l].astype(f.dtype) for l in range(LIMBS)]


def _pre_scale(f, rows, lo_ref, hi_ref, index, shape):
    """``rows[k] * hi[i >> c] * lo[i mod 2^c]`` with ``i = index[k]`` (uint32 lane arrays: each element's index in
    the transform; the first pass's coset scaling, ``R_ = 1``)."""
    c = lo_ref.shape[1].bit_length() - 1
    out = []
    for k, i in enumerate(index):
        lo = [lo_ref[l, (i & U32((1 << c) - 1)).astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)]
        hi = [hi_ref[l, (i >> U32(c)).astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)]
        out.append(f.mul(rows[k], _bcast(f.mul(hi, lo), shape)))
    return out


def _transform(f, rows, w_ref, *, n: int, s: int, shape):
    """The ``2^s``-point transform of the lane arrays ``rows`` (radix-2 DIT over the rows read in bit-reversed
    order: natural order out); each butterfly column's twiddle ``w_(2h)^t = w_n^(t n / 2h)`` is one scalar."""
    M = 1 << s
    a = [rows[bitrev_int(k, s)] for k in range(M)]
    for q in range(1, s + 1):
        h = 1 << (q - 1)
        for t in range(h):
            tw = None if t == 0 else _bcast(_roots(f, w_ref, t * (n // (2 * h))), shape)
            for b in range(0, M, 2 * h):
                u, v = a[b + t], a[b + t + h]
                if tw is not None:
                    v = f.mul(v, tw)
                a[b + t], a[b + t + h] = f.add(u, v), f.sub(u, v)
    return a


def _twiddle(f, a, w_ref, kR, j, *, n: int, shape):
    """The four-step factor: row ``k`` times ``w^((k R_ j) mod n)`` (``kR[k] = k R_`` as uint32, ``j`` the global
    column per lane), ``w^(e + n/2) = -w^e``. One gather per element (cheaper on the H200 than one per lane and its
    powers: REMOVED_VARIANTS.md)."""
    out = [a[0]]
    for k in range(1, len(a)):
        e = (kR[k] * j) & U32(n - 1)
        r = _roots(f, w_ref, (e & U32(n // 2 - 1)).astype(jnp.int32))
        out.append(f.mul(a[k], _bcast(f.select(e >= U32(n // 2), f.neg(r), r), shape)))
    return out


def _flat_kernel(prm_ref, x_ref, w_ref, *refs, n: int, s: int, lanes: int, twiddle: bool, pre: bool,
                 interpret: bool):
    """The pass of :func:`_kernel` with its geometry read at run time (``strides="runtime"``): ``prm = (log2 C,
    log2 Cb, log2 R_)``, ``x_ref`` the flat ``(8, BR M C)`` data. Program ``i`` takes column block ``i mod nc``
    (``nc = C / Cb``) of row block ``i / nc``; lane ``l`` is row ``l >> log2 Cb`` of the block, column
    ``l mod Cb``; element ``(row, k, col)`` lies at ``(row M + k) C + col``. Every pass of one ``s`` and ``n`` is
    this one kernel (one Triton compile), all index arithmetic shifts and masks of the parameters."""
    f = _field(interpret)
    M = 1 << s
    log_c, log_cb, log_r = prm_ref[0], prm_ref[1], prm_ref[2]
    log_nc = log_c - log_cb
    i = pl.program_id(0)
    lane = jnp.arange(lanes, dtype=jnp.int32)
    row = ((i >> log_nc) << (lanes.bit_length() - 1 - log_cb)) + (lane >> log_cb)
    col = ((i & ((1 << log_nc) - 1)) << log_cb) + (lane & ((1 << log_cb) - 1))
    idx = [(((row << s) + k) << log_c) + col for k in range(M)]
    shape = (lanes,)
    rows = [[x_ref[l, idx[k]].astype(f.dtype) for l in range(LIMBS)] for k in range(M)]
    j = col.astype(U32)
    if pre:
        lo_ref, hi_ref, o_ref = refs
        rows = _pre_scale(f, rows, lo_ref, hi_ref, [(U32(k) << log_c.astype(U32)) + j for k in range(M)], shape)
    else:
        (o_ref,) = refs
    a = _transform(f, rows, w_ref, n=n, s=s, shape=shape)
    if twiddle:
        a = _twiddle(f, a, w_ref, [U32(k) << log_r.astype(U32) for k in range(M)], j, n=n, shape=shape)
    for k in range(M):
        for l in range(LIMBS):
            plt.store(o_ref.at[l, idx[k]], a[k][l].astype(U32))


def bitrev_int(k: int, bits: int) -> int:
    """``k`` with its low ``bits`` bits reversed (a Python int: the order in which the kernel reads its rows)."""
    return int(format(k, f"0{bits}b")[::-1], 2) if bits else 0


def _compiler_params(num_warps, triton: bool | None):
    if triton is None:
        triton = jax.default_backend() == "gpu"
    if not triton or num_warps is None:
        return None
    from jax.experimental.pallas import triton as pltriton

    return pltriton.CompilerParams(num_warps=num_warps, num_stages=1)


def sub_transform(x, w, *, s: int, n: int, R_: int, twiddle: bool, pre=None, interpret: bool = False,
                  block: int = DEFAULT_BLOCK, num_warps: int | None = 8, triton: bool | None = None,
                  strides: str = "static"):
    """One pass on ``x`` ``(8, BR, M, C)`` (``M = 2^s``): the M-point NTT along axis 2 with root ``w_n^(n/M)``, then
    (``twiddle``) the four-step factor ``w_n^(k j R_)``; same shape out. See the module docstring.

    ``pre = (lo, hi)`` (first pass only, ``R_ = 1``): first multiply input ``x[..., k, j]`` by
    ``hi[i >> c] lo[i mod 2^c]`` with ``i = k C + j`` its index in the transform and ``2^c = len(lo)`` -- the coset
    scaling of :func:`cuzk_jax.ops.ntt.scale_parts`, fused into the pass.

    ``w``: the limb-minor root table ``(n/2, 8)``. ``block`` (a power of two): elements per program (``block / M``
    lanes); ``triton`` forces (True) or omits (False) the Triton compiler parameters, default: on when the default
    backend is a GPU (used to lower for CUDA on a machine without one). Each element's four-step twiddle
    ``w^(k j R_)`` is gathered from ``w``.

    ``strides``: ``"static"`` -- the pass's geometry (``C``, its column blocks, ``R_``) is compiled into its kernel
    (a kernel per pass); ``"runtime"`` -- :func:`_flat_kernel` reads it from a parameter array, so all passes of one
    ``s`` and ``n`` share one kernel (one Triton compile: the first call of a large transform is mostly these
    compiles); a pass of fewer than ``block`` elements runs the static kernel. Same results.
    """
    _, BR, M, C = x.shape
    if M != 1 << s:
        raise ValueError(f"sub_transform: axis 2 has {M} points, expected 2^{s}")
    if block <= 0 or block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    if pre is not None and (R_ != 1 or pre[0].shape[1] * pre[1].shape[1] != M * C):
        raise ValueError("sub_transform: pre-scaling applies to a first pass (R_ = 1, len(lo) len(hi) = M C)")
    if strides not in STRIDES:
        raise ValueError(f"strides must be one of {STRIDES}, got {strides!r}")
    tables = [w] + ([] if pre is None else list(pre))
    _, BR, M, C = x.shape
    total = BR * M * C
    with jax.enable_x64(True):
        if strides == "static" or total < block:
            return _pass_program(s, n, R_, twiddle, interpret, block, num_warps, triton)(x, *tables)
        if total >= 1 << 31:  # the kernel's element indices are int32
            raise ValueError(f"sub_transform: strides='runtime' takes fewer than 2^31 elements per limb, got {total}")
        lanes = block // M
        prm = jnp.array([C.bit_length() - 1, min(C, lanes).bit_length() - 1, R_.bit_length() - 1], jnp.int32)
        program = _flat_program(s, n, twiddle, pre is not None, interpret, block, num_warps, triton)
        return program(prm, x.reshape(LIMBS, total), *tables).reshape(x.shape)


@functools.lru_cache(maxsize=None)
def _pass_program(s: int, n: int, R_: int, twiddle: bool, interpret: bool, block: int, num_warps, triton):
    """One pass as a jitted function of ``(x, w[, lo, hi])``: JAX lowers a jitted function once per program for
    each input shape, so identical passes of one program (the coset step's two transforms share all but their
    first pass) share one Triton compile instead of one each."""

    def run(x, *tables):
        _, BR, M, C = x.shape
        lanes = max(1, block // M)
        Cb = min(C, lanes)
        nc = C // Cb
        Rb = math.gcd(BR, lanes // Cb)  # a power of two (lanes // Cb is one) dividing the batch-row count
        kernel = functools.partial(_kernel, n=n, s=s, R_=R_, Cb=Cb, nc=nc, twiddle=twiddle, pre=len(tables) > 1,
                                   interpret=interpret)
        spec = pl.BlockSpec((LIMBS, Rb, M, Cb), lambda i: (0, i // nc, 0, i % nc))
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, U32),
            grid=((BR // Rb) * nc,),  # one long grid axis: CUDA caps grid y/z at 65535
            in_specs=[spec] + [pl.BlockSpec(tuple(t.shape), lambda i: (0, 0)) for t in tables],
            out_specs=spec,
            interpret=interpret,
            compiler_params=_compiler_params(num_warps, triton),
        )(x, *tables)

    return jax.jit(run)


@functools.lru_cache(maxsize=None)
def _flat_program(s: int, n: int, twiddle: bool, pre: bool, interpret: bool, block: int, num_warps, triton):
    """The ``strides="runtime"`` pass as a jitted function of ``(prm, x (8, N), w[, lo, hi])`` (one lowering per
    program and shape, as :func:`_pass_program`); ``N / block`` programs of ``block / 2^s`` lanes."""

    def run(prm, x, *tables):
        kernel = functools.partial(_flat_kernel, n=n, s=s, lanes=block >> s, twiddle=twiddle, pre=pre,
                                   interpret=interpret)
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, U32),
            grid=(x.shape[1] // block,),
            in_specs=[_whole(prm), _whole(x)] + [_whole(t) for t in tables],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            interpret=interpret,
            compiler_params=_compiler_params(num_warps, triton),
        )(prm, x, *tables)

    return jax.jit(run)


def _whole(a):
    """A block spec of the whole array (read with computed indices)."""
    return pl.BlockSpec(tuple(a.shape), lambda i, nd=a.ndim: (0,) * nd)
