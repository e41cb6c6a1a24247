"""Pallas kernel: one pass of the NTT of :mod:`cuzk_jax.ops.ntt` -- a whole ``M``-point sub-transform per tile.

Layout: ``x`` is the ``(8, BR, M, C)`` uint32 Montgomery view of a pass (:mod:`cuzk_jax.ops.ntt`, module docstring:
``M = 2^s`` the points of the pass's sub-transforms, along axis 2; ``C`` contiguous columns; ``BR`` independent
rows), ``w`` the ``(8, n/2)`` root table ``w_n^e``. Each program owns one ``(M, Cb)`` tile (all 8 limbs):
``M`` points of ``Cb`` adjacent columns (``Cb = min(C, max(1, block // M))``: with ``Cb >= 8`` every row read is a
32-byte segment), loads it once, runs all ``s`` radix-2 stages on values held by the program (registers, and the
shared memory Triton uses for the reshapes between stages), multiplies by the four-step twiddle
``w_n^((k j R) mod n)`` (``k`` the row, ``j`` the global column; ``-w^(e - n/2)`` for ``e >= n/2``) and stores the
tile once (a first pass may also scale its input by coset powers on load, ``pre``): one read and one write of the
data per pass instead of one per stage (the structure of sppark's GPU NTT, which keeps 2^k-point sub-transforms in
shared memory).

Stages: Stockham's self-sorting radix-2 FFT (natural order in and out, so no bit reversal; C. Van Loan,
"Computational Frameworks for the FFT", Alg. 1.7.2). Stage ``q = 1..s`` with ``L = 2^q``, ``r = M / L`` reads the
tile as ``(2, r, L/2, Cb)`` (halves ``a0``, ``a1``) and writes ``(r, 2, L/2, Cb)``: ``a0 + t a1`` and
``a0 - t a1`` with ``t = w_L^j`` (``j < L/2``; ``w_L^j = w_n^(j r n / M)``). Only reshapes, equal two-way splits,
last-axis stacks and transposes: the value operations Pallas lowers to Triton.

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

from cuzk_jax.ops.ntt_network import fourstep_exponents

LIMBS = 8
DEFAULT_BLOCK = 256
TILES = ("stockham", "rows", "rows_lm")
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
    f = _field(interpret)
    M = 1 << s
    col0 = (pl.program_id(0) % nc) * Cb
    v = [x_ref[l].astype(f.dtype) for l in range(LIMBS)]  # each (M, Cb)
    if pre:  # x[j] * hi[j >> c] * lo[j mod 2^c], j = k C + column (the first pass: R_ = 1)
        lo_ref, hi_ref, o_ref = refs
        c = lo_ref.shape[1].bit_length() - 1
        j = fourstep_exponents(M, Cb, 1, n, col0=col0, row_stride=nc * Cb)
        lo = [lo_ref[l, (j & U32((1 << c) - 1)).astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)]
        hi = [hi_ref[l, (j >> U32(c)).astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)]
        v = f.mul(v, f.mul(hi, lo))
    else:
        (o_ref,) = refs
    for q in range(1, s + 1):
        Ls = 1 << (q - 1)
        r = M >> q
        halves = [jnp.split(x, 2, axis=0) for x in v]
        a0 = [h[0].reshape(r, Ls, Cb) for h in halves]
        a1 = [h[1].reshape(r, Ls, Cb) for h in halves]
        tau = jax.lax.broadcasted_iota(jnp.int32, (Ls,), 0) * jnp.int32(r * (n // M))  # w_L^j = w_n^(j r n/M)
        t = _bcast([w_ref[l, tau].astype(f.dtype).reshape(1, Ls, 1) for l in range(LIMBS)], (r, Ls, Cb))
        p = f.mul(a1, t)
        u, d = f.add(a0, p), f.sub(a0, p)
        v = [jnp.transpose(jnp.stack([x, y], axis=-1), (0, 3, 1, 2)).reshape(M, Cb) for x, y in zip(u, d)]
    if twiddle:
        e = fourstep_exponents(M, Cb, R_, n, col0=col0)
        idx = (e & U32(n // 2 - 1)).astype(jnp.int32)
        t = [w_ref[l, idx].astype(f.dtype) for l in range(LIMBS)]
        y = f.mul(v, t)
        v = f.select(e >= U32(n // 2), f.neg(y), y)  # w^(e + n/2) = -w^e
    for l in range(LIMBS):
        o_ref[l] = v[l].astype(U32)


def _kernel_rows(x_ref, w_ref, *refs, n: int, s: int, R_: int, Cb: int, nc: int, twiddle: bool, pre: bool,
                 interpret: bool, limb_minor: bool):
    """The ``rows`` tile: the ``M`` rows of a ``(Rb, M, Cb)`` tile are ``M`` separate ``(Rb, Cb)`` arrays, so every
    butterfly is elementwise between two of them (no reshape, no data exchange between threads); the stages are
    radix-2 decimation in time over a bit-reversed Python list (the bit reversal is only the order in which rows are
    read, free), with one scalar twiddle per butterfly column (uniform across the program). ``w_ref`` is the root
    table, ``(8, n/2)`` or, ``limb_minor``, ``(n/2, 8)`` (one 32-byte sector per gathered element)."""
    f = _field(interpret)
    M = 1 << s
    col0 = (pl.program_id(0) % nc) * Cb
    Rb = x_ref.shape[1]
    shape = (Rb, Cb)

    def table(idx, l):
        return w_ref[idx, l] if limb_minor else w_ref[l, idx]

    rows = [[x_ref[l, :, k, :].astype(f.dtype) for l in range(LIMBS)] for k in range(M)]
    j = (jax.lax.broadcasted_iota(jnp.int32, (1, Cb), 1) + col0).astype(U32)  # global column, per lane
    if pre:  # x[k, j] * hi[i >> c] * lo[i mod 2^c], i = k C + j (the first pass: R_ = 1)
        lo_ref, hi_ref, o_ref = refs
        c = lo_ref.shape[1].bit_length() - 1
        for k in range(M):
            i = U32(k * nc * Cb) + j
            lo = [lo_ref[l, (i & U32((1 << c) - 1)).astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)]
            hi = [hi_ref[l, (i >> U32(c)).astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)]
            rows[k] = f.mul(rows[k], _bcast(f.mul(hi, lo), shape))
    else:
        (o_ref,) = refs
    a = [rows[int(bitrev_int(k, s))] for k in range(M)]
    for q in range(1, s + 1):
        h = 1 << (q - 1)
        for t in range(h):  # w_(2h)^t = w_n^(t n / 2h): one scalar per butterfly column
            tw = None if t == 0 else _bcast([table(t * (n // (2 * h)), l).astype(f.dtype) for l in range(LIMBS)],
                                            shape)
            for b in range(0, M, 2 * h):
                u, v = a[b + t], a[b + t + h]
                if tw is not None:
                    v = f.mul(v, tw)
                a[b + t], a[b + t + h] = f.add(u, v), f.sub(u, v)
    if twiddle:
        for k in range(1, M):
            e = (U32(k * R_) * j) & U32(n - 1)
            idx = (e & U32(n // 2 - 1)).astype(jnp.int32)
            y = f.mul(a[k], _bcast([table(idx, l).astype(f.dtype) for l in range(LIMBS)], shape))
            a[k] = f.select(jnp.broadcast_to(e >= U32(n // 2), shape), f.neg(y), y)  # w^(e + n/2) = -w^e
    for k in range(M):
        for l in range(LIMBS):
            o_ref[l, :, k, :] = a[k][l].astype(U32)


def bitrev_int(k: int, bits: int) -> int:
    """``k`` with its low ``bits`` bits reversed (a Python int: the row order of the ``rows`` tile)."""
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
                  tile: str = "stockham"):
    """One pass on ``x`` ``(8, BR, M, C)`` (``M = 2^s``): the M-point NTT along axis 2 with root ``w_n^(n/M)``, then
    (``twiddle``) the four-step factor ``w_n^(k j R_)``; same shape out. See the module docstring.

    ``pre = (lo, hi)`` (first pass only, ``R_ = 1``): first multiply input ``x[..., k, j]`` by
    ``hi[i >> c] lo[i mod 2^c]`` with ``i = k C + j`` its index in the transform and ``2^c = len(lo)`` -- the coset
    scaling of :func:`cuzk_jax.ops.ntt.scale_parts`, fused into the pass.

    ``block`` (a power of two): elements per program; ``triton`` forces (True) or omits (False) the Triton compiler
    parameters, default: on when the default backend is a GPU (used to lower for CUDA on a machine without one).

    ``tile``: ``"stockham"`` -- one ``(M, Cb)`` tile per program, Stockham stages through reshapes (module
    docstring); ``"rows"`` / ``"rows_lm"`` -- a ``(Rb, M, Cb)`` tile (``Rb Cb = block / M`` lanes: ``Rb`` rows of
    the batch axis when a pass has fewer than ``block / M`` columns, as the last pass, where ``C = 1``) held as
    ``M`` separate lane arrays (:func:`_kernel_rows`); ``"rows_lm"`` takes ``w`` limb-minor, ``(n/2, 8)``.
    """
    _, BR, M, C = x.shape
    if M != 1 << s:
        raise ValueError(f"sub_transform: axis 2 has {M} points, expected 2^{s}")
    if block <= 0 or block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    if tile not in TILES:
        raise ValueError(f"unknown tile {tile!r}; expected one of {TILES}")
    lanes = max(1, block // M)
    Cb = min(C, lanes)
    nc = C // Cb
    if pre is not None and (R_ != 1 or pre[0].shape[1] * pre[1].shape[1] != M * C):
        raise ValueError("sub_transform: pre-scaling applies to a first pass (R_ = 1, len(lo) len(hi) = M C)")
    if tile == "stockham":
        kernel = functools.partial(_kernel, n=n, s=s, R_=R_, Cb=Cb, nc=nc, twiddle=twiddle, pre=pre is not None,
                                   interpret=interpret)
        spec = pl.BlockSpec((LIMBS, None, M, Cb), lambda i: (0, i // nc, 0, i % nc))
        grid = BR * nc
    else:
        Rb = math.gcd(BR, lanes // Cb)  # a power of two (lanes // Cb is one) dividing the batch-row count
        kernel = functools.partial(_kernel_rows, n=n, s=s, R_=R_, Cb=Cb, nc=nc, twiddle=twiddle,
                                   pre=pre is not None, interpret=interpret, limb_minor=tile == "rows_lm")
        spec = pl.BlockSpec((LIMBS, Rb, M, Cb), lambda i: (0, i // nc, 0, i % nc))
        grid = (BR // Rb) * nc
    tables = [w] + ([] if pre is None else list(pre))
    with jax.enable_x64(True):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, U32),
            grid=(grid,),  # one long grid axis: CUDA caps grid y/z at 65535
            in_specs=[spec] + [pl.BlockSpec(tuple(t.shape), lambda i: (0, 0)) for t in tables],
            out_specs=spec,
            interpret=interpret,
            compiler_params=_compiler_params(num_warps, triton),
        )(x, *tables)
