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


LIMBS = 8
DEFAULT_BLOCK = 2048
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


def _kernel(x_ref, w_ref, *refs, n: int, s: int, R_: int, Cb: int, nc: int, twiddle: bool, pre: str | None,
            interpret: bool, transposed: bool = False):
    """One ``(Rb, M, Cb)`` tile as ``M`` lane arrays (module docstring); ``w_ref`` the limb-minor root table.
    ``pre``: None, ``"cols"`` (a first pass's scaling by transform index) or ``"rows"`` (a transposed last pass's
    scaling by layout position, :func:`sub_transform`); ``transposed``: the four-step twiddle on load."""
    f = _field(interpret)
    M = 1 << s
    col0 = (pl.program_id(0) % nc) * Cb
    Rb = x_ref.shape[1]
    shape = (Rb, Cb)

    def roots(idx):  # w^idx, idx < n/2 (a static int or an int32 lane array)
        return [w_ref[idx, l].astype(f.dtype) for l in range(LIMBS)]

    def signed_roots(e):  # w^e for uint32 exponents e < n: w^(e + n/2) = -w^e
        r = roots((e & U32(n // 2 - 1)).astype(jnp.int32))
        return f.select(e >= U32(n // 2), f.neg(r), r)

    rows = [[x_ref[l, :, k, :].astype(f.dtype) for l in range(LIMBS)] for k in range(M)]
    j = (jax.lax.broadcasted_iota(jnp.int32, (1, Cb), 1) + col0).astype(U32)  # global column, per lane
    if pre == "rows":  # x[r, k] * hi_a[u] hi_b[v] lo[k], (r mod R_) = u 2^vb + v (C = 1: one lane per row r)
        lo_ref, ha_ref, hb_ref, o_ref = refs
        vb = hb_ref.shape[1].bit_length() - 1
        row0 = (pl.program_id(0) // nc) * Rb
        r = (jax.lax.broadcasted_iota(jnp.int32, shape, 0) + row0).astype(U32) & U32(R_ - 1)
        ha = [ha_ref[l, (r >> U32(vb)).astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)]
        hb = [hb_ref[l, (r & U32((1 << vb) - 1)).astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)]
        h = f.mul(ha, hb)
        for k in range(M):
            lo = [lo_ref[l, k].astype(f.dtype) for l in range(LIMBS)]
            rows[k] = f.mul(rows[k], f.mul(h, _bcast(lo, shape)))
    elif pre == "cols":  # x[k, j] * hi[i >> c] * lo[i mod 2^c], i = k C + j (the first pass: R_ = 1)
        lo_ref, hi_ref, o_ref = refs
        c = lo_ref.shape[1].bit_length() - 1
        for k in range(M):
            i = U32(k * nc * Cb) + j
            lo = [lo_ref[l, (i & U32((1 << c) - 1)).astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)]
            hi = [hi_ref[l, (i >> U32(c)).astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)]
            rows[k] = f.mul(rows[k], _bcast(f.mul(hi, lo), shape))
    else:
        (o_ref,) = refs
    if twiddle and transposed:  # the transposed pass: the four-step factor on the input rows (module docstring)
        for k in range(1, M):
            rows[k] = f.mul(rows[k], _bcast(signed_roots((U32(k * R_) * j) & U32(n - 1)), shape))
    a = [rows[bitrev_int(k, s)] for k in range(M)]
    for q in range(1, s + 1):
        h = 1 << (q - 1)
        for t in range(h):  # w_(2h)^t = w_n^(t n / 2h): one scalar per butterfly column
            tw = None if t == 0 else _bcast(roots(t * (n // (2 * h))), shape)
            for b in range(0, M, 2 * h):
                u, v = a[b + t], a[b + t + h]
                if tw is not None:
                    v = f.mul(v, tw)
                a[b + t], a[b + t + h] = f.add(u, v), f.sub(u, v)
    if twiddle and not transposed:  # one gather per element (cheaper on the H200 than one per lane and its powers)
        for k in range(1, M):
            a[k] = f.mul(a[k], _bcast(signed_roots((U32(k * R_) * j) & U32(n - 1)), shape))
    for k in range(M):
        for l in range(LIMBS):
            o_ref[l, :, k, :] = a[k][l].astype(U32)


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
                  transposed: bool = False):
    """One pass on ``x`` ``(8, BR, M, C)`` (``M = 2^s``): the M-point NTT along axis 2 with root ``w_n^(n/M)``, then
    (``twiddle``) the four-step factor ``w_n^(k j R_)``; same shape out. See the module docstring.

    ``pre = (lo, hi)`` (first pass only, ``R_ = 1``): first multiply input ``x[..., k, j]`` by
    ``hi[i >> c] lo[i mod 2^c]`` with ``i = k C + j`` its index in the transform and ``2^c = len(lo)`` -- the coset
    scaling of :func:`cuzk_jax.ops.ntt.scale_parts`, fused into the pass.

    ``w``: the limb-minor root table ``(n/2, 8)``. ``block`` (a power of two): elements per program (``block / M``
    lanes); ``triton`` forces (True) or omits (False) the Triton compiler parameters, default: on when the default
    backend is a GPU (used to lower for CUDA on a machine without one). Each element's four-step twiddle
    ``w^(k j R_)`` is gathered from ``w``.

    ``transposed``: the pass's transpose instead -- the four-step factor ``w_n^(k j R_)`` multiplies input row
    ``k`` BEFORE the M-point NTT (both factors are symmetric matrices, so the transpose of "NTT then twiddle" is
    "twiddle then NTT"): :func:`cuzk_jax.ops.ntt._transposed_impl` runs the passes so, last to first, to take
    digit-reversed input to natural output. Its first pass (the last digit, ``C = 1``) may scale by
    layout position: ``pre = (lo, hi_a, hi_b)`` multiplies row ``k`` of batch row ``r`` by ``hi_a[u] hi_b[v]
    lo[k]`` with ``r mod R_ = u len(hi_b) + v`` (``len(lo) = M``, ``len(hi_a) len(hi_b) = R_``).
    """
    _, BR, M, C = x.shape
    if M != 1 << s:
        raise ValueError(f"sub_transform: axis 2 has {M} points, expected 2^{s}")
    if block <= 0 or block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    kind = None
    if pre is not None and len(pre) == 3:
        kind = "rows"
        if C != 1 or pre[0].shape[1] != M or pre[1].shape[1] * pre[2].shape[1] != R_:
            raise ValueError("sub_transform: row pre-scaling applies to a last pass (C = 1, len(lo) = M, "
                             "len(hi_a) len(hi_b) = R_)")
    elif pre is not None:
        kind = "cols"
        if R_ != 1 or pre[0].shape[1] * pre[1].shape[1] != M * C:
            raise ValueError("sub_transform: pre-scaling applies to a first pass (R_ = 1, len(lo) len(hi) = M C)")
    tables = [w] + ([] if pre is None else list(pre))
    with jax.enable_x64(True):
        return _pass_program(s, n, R_, twiddle, interpret, block, num_warps, triton, kind, transposed)(x, *tables)


@functools.lru_cache(maxsize=None)
def _pass_program(s: int, n: int, R_: int, twiddle: bool, interpret: bool, block: int, num_warps, triton,
                  pre: str | None = None, transposed: bool = False):
    """One pass as a jitted function of ``(x, w[, pre tables])``: JAX lowers a jitted function once per program for
    each input shape, so identical passes of one program (e.g. a forward and an inverse transform of one shape)
    share one Triton compile instead of one each."""

    def run(x, *tables):
        _, BR, M, C = x.shape
        lanes = max(1, block // M)
        Cb = min(C, lanes)
        nc = C // Cb
        Rb = math.gcd(BR, lanes // Cb)  # a power of two (lanes // Cb is one) dividing the batch-row count
        kernel = functools.partial(_kernel, n=n, s=s, R_=R_, Cb=Cb, nc=nc, twiddle=twiddle, pre=pre,
                                   interpret=interpret, transposed=transposed)
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
