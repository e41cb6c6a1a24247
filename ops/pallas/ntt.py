"""Pallas kernel: one iteration (k radix-2 stages) of the constant-geometry NTT of :mod:`cuzk_jax.ops.ntt`.

Same butterfly network as the XLA path (:func:`cuzk_jax.ops.ntt.network`); what the kernel buys is control over
the schedule: each program owns ``block`` consecutive groups q of one batch entry, gathers its ``2^k`` inputs
``x[2^k q + d]`` (all 8 limbs) and the twiddles straight from the unblocked input refs (``x_ref[l, idx]``: a
dynamic-index gather, which Triton does well on an H200), keeps every product in registers, and stores the ``2^k``
outputs ``z[q + C n/2^k]`` as contiguous rows. No intermediate limb array ever goes to memory.

Layout: ``x`` is the internal ``(B, 8, n)`` uint32 Montgomery array, ``w`` the ``(8, n/2)`` twiddle table, ``stage``
the first stage of the iteration (a traced int32 scalar). ``step`` returns the ``(B, 8, n)`` result.

``interpret=True`` runs the kernel in the Pallas interpreter (CPU tests); the ops layer picks it on CPU. Compiled for
a GPU the products are the straight-line CIOS (:func:`cuzk_jax.ops.field.cios_limbs`, ``mul_schedule="unrolled"``,
the default) or rolled forms (:func:`_products`) that make the kernel several times smaller -- the unrolled
radix-4 kernel took 71-75 s to compile on an H200 against the issue's 30 s budget, and Triton's compile time grows
about quadratically with kernel size (BUILD.md); under the interpreter ``unrolled`` runs rolled, an 8x smaller
program for XLA:CPU to compile.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from cuzk_jax.ops import field as F

LIMBS = 8
DEFAULT_BLOCK = 128
U32, U64 = jnp.uint32, jnp.uint64


def _ptx_field(mul_schedule: str, interpret: bool):
    """The field of ``mul_schedule="asm"`` compiled for a GPU: every Fr product, sum and difference one PTX
    carry-chain block on uint32 limbs (:mod:`cuzk_jax.ops.pallas.ptx_field`); None otherwise (the interpreter runs
    ``asm`` as ``rolled``: same function)."""
    if mul_schedule != "asm" or interpret:
        return None
    from .ptx_field import fr

    return fr


def _products(mul_schedule: str, interpret: bool):
    """``pairs -> products`` for the kernel (see the module docstring): ``unrolled`` is the straight-line CIOS per
    product (everything in registers; used compiled only), ``rolled`` runs each product's outer CIOS loop as a
    ``fori_loop`` (:class:`~cuzk_jax.ops.pallas.limb_field.LimbField`, ``schedule="rolled"``: the multiplier's
    limbs ride in the loop carry, so it lowers to Triton), ``rolled_loop`` also sends all products of a round through
    ONE multiplier and runs the final subtraction as a loop (the compile-lean form of the MSM kernels). Under the
    interpreter ``unrolled`` becomes ``rolled`` (same arithmetic, 8x less for XLA:CPU to compile). The ``*_ptx*``
    forms compute every 32x32->64-bit limb product as one PTX ``mad.wide.u32`` (compiled GPU kernels only; under
    the interpreter they run the same schedule with jnp products)."""
    if mul_schedule == "unrolled" and not interpret:
        return lambda pairs: [F.cios_limbs(a, b, F.fr.p_limbs, F.fr.pinv) for a, b in pairs]
    from .limb_field import LimbField

    if mul_schedule == "asm":  # under the interpreter (compiled: _ptx_field)
        mul_schedule = "rolled"

    schedule = "unrolled" if mul_schedule.startswith("unrolled") and not interpret else "rolled"
    wide = "ptx" if "_ptx" in mul_schedule and not interpret else "jnp"
    return LimbField(F.fr, schedule=schedule, wide=wide, mul_loop=mul_schedule.endswith("_loop")).mul_many


def _kernel(s_ref, x_ref, w_ref, o_ref, *, log_n: int, k: int, block: int, interpret: bool, mul_schedule: str):
    from cuzk_jax.ops import ntt as N  # the shared network (imported lazily: ops.ntt imports this module lazily too)

    fr = F.fr
    S = 1 << k
    j = pl.program_id(0)  # the long grid axis first: CUDA caps grid y/z at 65535
    q = (j * block + jnp.arange(block, dtype=jnp.int32)).astype(U32)
    stage = s_ref[0]
    ptx = _ptx_field(mul_schedule, interpret)
    wide = U32 if ptx else U64  # limb registers: the PTX blocks work on 32-bit words, the jnp forms on 64-bit
    xs = []
    for d in range(S):
        idx = (q * U32(S) + U32(d)).astype(jnp.int32)
        xs.append([x_ref[l, idx].astype(wide) for l in range(LIMBS)])

    def get_twiddles(taus):
        return [[w_ref[l, t.astype(jnp.int32)].astype(wide) for l in range(LIMBS)] for t in taus]

    if ptx:
        mul_many = ptx.mul_many
        addsub = lambda pairs, subtract: [(ptx.sub if subtract else ptx.add)(a, b) for a, b in pairs]  # noqa: E731
    else:
        mul_many, addsub = _products(mul_schedule, interpret), None

    zs = N.network(xs, q, stage, log_n, k, get_twiddles, mul_many, addsub=addsub)
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
         num_warps: int | None = 4, triton: bool | None = None, mul_schedule: str = "unrolled"):
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
    from cuzk_jax.ops.ntt import PALLAS_MUL  # lazily, as the kernel imports the network

    if mul_schedule not in PALLAS_MUL:
        raise ValueError(f"mul_schedule must be one of {PALLAS_MUL}, got {mul_schedule!r}")
    kernel = functools.partial(_kernel, log_n=log_n, k=k, block=block, interpret=interpret, mul_schedule=mul_schedule)
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
