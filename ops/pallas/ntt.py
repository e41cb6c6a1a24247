"""Pallas kernel: one iteration (k radix-2 stages) of the constant-geometry NTT of :mod:`cuzk_jax.ops.ntt`.

Same butterfly network as the XLA path (:func:`cuzk_jax.ops.ntt_network.network`); what the kernel buys is control over
the schedule: each program owns ``block`` consecutive groups q of one batch entry, gathers its ``2^k`` inputs
``x[2^k q + d]`` (all 8 limbs) and the twiddles straight from the unblocked input refs (``x_ref[l, idx]``: a
dynamic-index gather, which Triton does well on an H200), keeps every product in registers, and stores the ``2^k``
outputs ``z[q + C n/2^k]`` as contiguous rows. No intermediate limb array ever goes to memory.

Layout: ``x`` is the internal ``(B, 8, n)`` uint32 Montgomery array, ``w`` the ``(8, n/2)`` twiddle table, ``stage``
the first stage of the iteration (a traced int32 scalar). ``step`` returns the ``(B, 8, n)`` result.

Field arithmetic: compiled for a GPU, every Fr product, sum and difference is one PTX carry-chain block on uint32
limbs (:mod:`cuzk_jax.ops.pallas.ptx_field`); ``interpret=True`` (CPU tests) runs the same network with the rolled
jnp limb field (:class:`~cuzk_jax.ops.pallas.limb_field.LimbField`: same function; inline PTX has no interpreter).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from cuzk_jax.ops.ntt_network import network

LIMBS = 8
DEFAULT_BLOCK = 128
U32, U64 = jnp.uint32, jnp.uint64


def _field(interpret: bool):
    """The kernel's field: PTX blocks compiled, the rolled jnp limb field interpreted (see the module docstring)."""
    if interpret:
        from .limb_field import fr
    else:
        from .ptx_field import fr
    return fr


def _kernel(s_ref, x_ref, w_ref, o_ref, *, log_n: int, k: int, block: int, interpret: bool):
    S = 1 << k
    j = pl.program_id(0)  # the long grid axis first: CUDA caps grid y/z at 65535
    q = (j * block + jnp.arange(block, dtype=jnp.int32)).astype(U32)
    stage = s_ref[0]
    f = _field(interpret)
    xs = []
    for d in range(S):
        idx = (q * U32(S) + U32(d)).astype(jnp.int32)
        xs.append([x_ref[l, idx].astype(f.dtype) for l in range(LIMBS)])

    def get_twiddles(taus):
        return [[w_ref[l, t.astype(jnp.int32)].astype(f.dtype) for l in range(LIMBS)] for t in taus]

    def addsub(pairs, subtract):
        return [(f.sub if subtract else f.add)(a, b) for a, b in pairs]

    zs = network(xs, q, stage, log_n, k, get_twiddles, f.mul_many, addsub)
    for C in range(S):
        for l in range(LIMBS):
            o_ref[l, C, :] = zs[C][l].astype(U32)


def _compiler_params(num_warps, triton: bool | None):
    if triton is None:
        triton = jax.default_backend() == "gpu"
    if not triton or num_warps is None:
        return None
    from jax.experimental.pallas import triton as pltriton

    return pltriton.CompilerParams(num_warps=num_warps, num_stages=1)


def step(x, w, stage, *, log_n: int, k: int, interpret: bool = False, block: int = DEFAULT_BLOCK,
         num_warps: int | None = 4, triton: bool | None = None):
    """One k-stage iteration on ``x`` ``(B, 8, n)``; see the module docstring.

    ``block`` (a power of two) groups per program; ``triton`` forces (True) or omits (False) the Triton compiler
    parameters, default: on when the default backend is a GPU (used to lower for CUDA on a machine without one).
    """
    B = x.shape[0]
    n = 1 << log_n
    S = 1 << k
    Q = n // S
    if block <= 0 or block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    block = min(block, Q)
    s = jnp.asarray(stage, jnp.int32).reshape(1)
    kernel = functools.partial(_kernel, log_n=log_n, k=k, block=block, interpret=interpret)
    with jax.enable_x64(True):
        out = pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((B, LIMBS, S, Q), U32),
            grid=(Q // block, B),
            in_specs=[
                pl.BlockSpec((1,), lambda j, b: (0,)),
                pl.BlockSpec((None, LIMBS, n), lambda j, b: (b, 0, 0)),
                pl.BlockSpec(tuple(w.shape), lambda j, b: (0, 0)),
            ],
            out_specs=pl.BlockSpec((None, LIMBS, S, block), lambda j, b: (b, 0, 0, j)),
            interpret=interpret,
            compiler_params=_compiler_params(num_warps, triton),
        )(s, x, w)
    return out.reshape(B, LIMBS, n)
