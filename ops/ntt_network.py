"""Index algebra of the NTT's passes, shared by the XLA passes of :mod:`cuzk_jax.ops.ntt` and the Pallas kernel of
:mod:`cuzk_jax.ops.pallas.ntt` (below both, so neither imports the other): the pass plan (Bailey's four-step
applied recursively), the four-step twiddle exponents, the bit reversal of the constant-geometry (Pease) stages and
the final digit reversal. Pure index arithmetic on uint32 vectors; no field operations.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

U32 = jnp.uint32


def plan(log_n: int, sub: int) -> tuple[int, ...]:
    """The digits ``(s_1, ..., s_P)`` of the passes (major first): ``P = ceil(log_n / sub)`` balanced digits, the
    larger ones first; ``()`` for ``log_n = 0``. Pass ``p`` transforms ``2^(s_p)``-point sub-transforms."""
    if log_n <= 0:
        return ()
    p = -(-log_n // max(1, int(sub)))
    base, extra = divmod(log_n, p)
    return tuple(base + 1 if i < extra else base for i in range(p))


def bitrev(i, bits: int):
    """Reverse the low ``bits`` bits of the uint32 vector ``i`` (the bit-reversal permutation)."""
    if bits == 0:
        return jnp.zeros_like(i)
    x = i
    for shift, mask in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF)):
        x = ((x >> shift) & U32(mask)) | ((x & U32(mask)) << shift)
    x = (x >> 16) | (x << 16)
    return x >> (32 - bits)


def fourstep_exponents(M: int, cols: int, R_: int, n: int, col0=0):
    """``(k j R_) mod n`` for rows ``k < M`` and columns ``j = col0 + [0, cols)`` (``col0`` may be traced): the
    four-step twiddle exponents of a pass in units of ``w_n`` (``w_(MC) = w_n^R_``), uint32 ``(M, cols)``. The
    product stays below ``n <= 2^32``: ``k j R_ < M C R_ = n``."""
    k = lax.broadcasted_iota(jnp.int32, (M, cols), 0).astype(U32)
    j = (lax.broadcasted_iota(jnp.int32, (M, cols), 1) + col0).astype(U32)
    return (k * j * U32(R_)) & U32(n - 1)


def digit_reverse(x, digits):
    """``(L, B, n)`` in pass order (digit ``k_1`` major) -> natural order: reverse the digit axes.

    One digit: the identity (a single pass is already in natural order). Two digits: one 2-D transpose
    ``(M_1, M_2) -> (M_2, M_1)``. Three or more (the blocked reversal): two copies that each keep runs of words
    together, where one many-axis transpose would move single words -- first the block of the first two digits
    (``A = M_1 M_2`` points) is swapped past the rest as one 2-D transpose ``(A, n / A) -> (n / A, A)``; then the
    remaining digit axes are reversed, moving whole ``A``-point blocks, while ``k_1`` and ``k_2`` swap inside each
    block. An ``optimization_barrier`` keeps XLA from merging the two back into one transpose (on the H200 the two
    copies beat the one many-axis transpose at every size measured, 2^20 to 2^27: RESULTS.md)."""
    if len(digits) <= 1:
        return x
    L, B = x.shape[0], x.shape[1]
    P = len(digits)
    if P == 2:
        v = x.reshape(L, B, 1 << digits[0], 1 << digits[1])
        return jnp.swapaxes(v, 2, 3).reshape(x.shape)
    a = 1 << (digits[0] + digits[1])
    y = jnp.swapaxes(x.reshape(L, B, a, x.shape[-1] // a), 2, 3)  # position (k_3 .. k_P, k_1, k_2)
    y = lax.optimization_barrier(y)
    v = y.reshape((L, B) + tuple(1 << s for s in digits[2:]) + (1 << digits[0], 1 << digits[1]))
    return jnp.transpose(v, (0, 1) + tuple(range(P - 1, 1, -1)) + (P + 1, P)).reshape(x.shape)
