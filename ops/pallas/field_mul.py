"""Pallas kernel: elementwise Montgomery multiplication of limb-major field arrays.

The building block of the MSM bucket kernel. The kernel body is the same no-carry CIOS code as the XLA path
(:func:`cuzk_jax.ops.field.cios_limbs`), applied to one block of ``block`` elements at a time: each limb row is
loaded as a 1-D vector (Triton wants power-of-two tensor shapes, and 12 limbs is not one), promoted to uint64 for
the 32x32->64-bit partial products, and the reduced result is stored row by row.

``mul(a, b, field, interpret=...)`` is the public wrapper; the ops layer (:func:`cuzk_jax.ops.field.PrimeField.mul`
callers, benchmarks) chooses between it and the XLA fallback. ``interpret=True`` runs the kernel through the Pallas
interpreter (any backend, used by the CPU tests).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from cuzk_jax.ops import field as F

DEFAULT_BLOCK = 256


def _kernel(a_ref, b_ref, o_ref, *, p_limbs, pinv):
    n = len(p_limbs)
    a = [a_ref[l, :].astype(jnp.uint64) for l in range(n)]
    b = [b_ref[l, :].astype(jnp.uint64) for l in range(n)]
    out = F.cios_limbs(a, b, p_limbs, pinv)
    for l in range(n):
        o_ref[l, :] = out[l].astype(jnp.uint32)


def _compiler_params(num_warps: int | None):
    if jax.default_backend() != "gpu" or num_warps is None:
        return None
    from jax.experimental.pallas import triton as pltriton

    return pltriton.CompilerParams(num_warps=num_warps, num_stages=1)


def _elementwise(kernel, a, b, block: int, interpret: bool, params, *more):
    """``kernel(a_ref, b_ref, *more_refs, o_ref)`` over ``(L, N)`` operands, one ``(L, block)`` tile per program."""
    n_limbs, n = a.shape
    spec = pl.BlockSpec((n_limbs, block), lambda i: (0, i))
    with jax.enable_x64(True):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((n_limbs, n), jnp.uint32),
            grid=(n // block,),
            in_specs=[spec] * (2 + len(more)),
            out_specs=spec,
            interpret=interpret,
            compiler_params=params,
        )(a, b, *more)


@functools.partial(jax.jit, static_argnames=("field", "block", "interpret", "num_warps"))
def _mul_2d(a, b, field: str, block: int, interpret: bool, num_warps: int | None):
    f = F.FIELDS[field]
    kernel = functools.partial(_kernel, p_limbs=f.p_limbs, pinv=f.pinv)
    return _elementwise(kernel, a, b, block, interpret, _compiler_params(num_warps))


def mul(a, b, field: str = "fq", *, block: int = DEFAULT_BLOCK, interpret: bool = False, num_warps: int | None = 4):
    """Montgomery product of two ``(L, *batch)`` uint32 arrays of ``field`` ("fq" or "fr") with the Pallas kernel.

    Same contract as :meth:`cuzk_jax.ops.field.PrimeField.mul`: Montgomery form, fully reduced in and out. The
    batch is flattened and padded to a multiple of ``block`` (a power of two).
    """
    if field not in ("fq", "fr"):
        raise ValueError(f"field must be 'fq' or 'fr', got {field!r}")
    if block <= 0 or block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    f = F.FIELDS[field]
    a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
    if a.ndim < 1 or a.shape[0] != f.limbs or a.dtype != jnp.uint32:
        raise ValueError(f"{field} operands must be uint32 of shape ({f.limbs}, ...), got {a.dtype}{a.shape}")
    (a2, b2), size = _flat_padded((a, b), block)
    out = _mul_2d(a2, b2, field, block, interpret, num_warps)
    return out[:, :size].reshape(a.shape)


def _flat_padded(xs, block: int):
    """``(L, *batch)`` arrays of one shape -> ``((L, padded) arrays, size)``: the batch flattened (``size``
    elements) and zero-padded to a multiple of ``block``, at least one block."""
    size = 1
    for d in xs[0].shape[1:]:
        size *= d
    padded = max(block, -(-size // block) * block)
    flats = [x.reshape(x.shape[0], size) for x in xs]
    if padded != size:
        flats = [jnp.pad(x, ((0, 0), (0, padded - size))) for x in flats]
    return flats, size


def _ptx_field(field: str, interpret: bool):
    """The kernels' field for ``field`` ("fq" / "fr"): the PTX blocks compiled, the jnp array field interpreted."""
    from . import limb_field, ptx_field

    if interpret:
        return limb_field.array_fq if field == "fq" else limb_field.array_fr
    return ptx_field.fq_loop if field == "fq" else ptx_field.fr


def _ptx_params(num_warps: int, interpret: bool):
    """Triton parameters for a kernel with inline PTX (Triton only, also when lowering for CUDA on a machine
    without a GPU); None interpreted."""
    if interpret:
        return None
    from jax.experimental.pallas import triton as pltriton

    return pltriton.CompilerParams(num_warps=num_warps, num_stages=1)


def _chain_kernel(a_ref, b_ref, o_ref, *, field, k: int, interpret: bool):
    n = field.limbs
    x, y = ([r[l, :] for l in range(n)] for r in (a_ref, b_ref))
    if interpret:  # the array field works on the rows stacked
        out = jax.lax.fori_loop(0, k, lambda _, v: field.mul(v, jnp.stack(y)), jnp.stack(x))
        out = [out[l] for l in range(n)]
    else:
        out = list(jax.lax.fori_loop(0, k, lambda _, v: tuple(field.mul(list(v), y)), tuple(x)))
    for l in range(n):
        o_ref[l, :] = out[l].astype(jnp.uint32)


@functools.partial(jax.jit, static_argnames=("field", "k", "block", "interpret", "num_warps"))
def ptx_chain(a, b, field: str = "fq", k: int = 16, *, block: int = 256, interpret: bool = False,
              num_warps: int | None = 4):
    """``a * b^k / R^k`` per element: ``k`` DEPENDENT Montgomery products per element in one kernel (a
    ``fori_loop``), the state a curve formula's products see -- the measurement of the compiled kernels' product
    (:func:`cuzk_jax.ops.pallas.ptx_field.mont_mul_asm`). ``a``, ``b``: uint32
    ``(L, N)`` limb-major, Montgomery form, fully reduced; ``N`` a multiple of ``block``. Compiled: the PTX field
    (NVIDIA GPUs only); ``interpret=True``: the same loop on the jnp array field (CPU tests)."""
    if field not in ("fq", "fr"):
        raise ValueError(f"field must be 'fq' or 'fr', got {field!r}")
    kernel = functools.partial(_chain_kernel, field=_ptx_field(field, interpret), k=k, interpret=interpret)
    return _elementwise(kernel, a, b, block, interpret, _ptx_params(num_warps or 4, interpret))


def _mul_sub_kernel(a_ref, b_ref, c_ref, o_ref, *, field, interpret: bool):
    n = field.limbs
    a, b, c = ([r[l, :] for l in range(n)] for r in (a_ref, b_ref, c_ref))
    if interpret:  # the array field works on the rows stacked
        out = field.sub(field.mul(jnp.stack(a), jnp.stack(b)), jnp.stack(c))
        out = [out[l] for l in range(n)]
    else:
        out = field.sub(field.mul(a, b), c)
    for l in range(n):
        o_ref[l, :] = out[l].astype(jnp.uint32)


MUL_SUB_BLOCK = 1024


@functools.partial(jax.jit, static_argnames=("block", "interpret", "num_warps"))
def mul_sub(a, b, c, *, block: int = MUL_SUB_BLOCK, interpret: bool = False, num_warps: int = 4):
    """``a * b / R - c`` elementwise over Fr limb arrays ``(8, *batch)`` (Montgomery form, fully reduced in and
    out): the H step's pointwise ``A B - C`` (:mod:`cuzk_jax.ops.qap`) as one kernel pass over the three inputs.
    Compiled: the PTX product and difference blocks (NVIDIA GPUs); ``interpret=True``: the jnp array field (CPU
    tests). The batch is flattened and padded to a multiple of ``block`` (a power of two)."""
    if block <= 0 or block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    shape = a.shape
    if shape[0] != F.fr.limbs or b.shape != shape or c.shape != shape:
        raise ValueError(f"mul_sub: Fr operands of one shape (8, ...) expected, got {a.shape}, {b.shape}, {c.shape}")
    (a2, b2, c2), size = _flat_padded((a, b, c), block)
    kernel = functools.partial(_mul_sub_kernel, field=_ptx_field("fr", interpret), interpret=interpret)
    out = _elementwise(kernel, a2, b2, block, interpret, _ptx_params(num_warps, interpret), c2)
    return out[:, :size].reshape(shape)
