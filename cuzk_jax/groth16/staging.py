"""The host -> device copy of a witness batch ``z`` on one device (the prover's *stage* phase, :mod:`.pipeline`).

``z`` is uint32 ``(8, P, n)``: 8 limb rows (limb-major, as :mod:`cuzk_jax.ops.field`), each a contiguous ``(P, n)``
block of the host array (also for a slice of partitions). Host memory is pageable -- JAX exposes no portable pinned
allocation for a numpy array -- so every copy first goes through the runtime's own transfer buffers on the host;
issued one row after another, those host-side copies were the stage phase's bottleneck. :func:`copy_rows` issues
the rows from several threads, so they run side by side. Its A/B is ``bench --op=stage``
(:mod:`cuzk_jax.bench.stage`); the packed form that lost it (kinds byte per variable plus the other values,
rebuilt on the device) is in ``bench/results/REMOVED_VARIANTS.md``.
"""

from __future__ import annotations

import concurrent.futures
import functools

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax.errors import BadInput

__all__ = ["copy_rows", "stack_rows"]


def _put(a: np.ndarray, device):
    """One row's copy: committed to ``device``, or uncommitted on the default device (a committed argument would
    change the prove programs' lowering)."""
    return jax.device_put(a, device) if device is not None else jnp.asarray(a)


def copy_rows(z, device=None, threads: int = 1) -> list:
    """The 8 limb rows of ``z`` (uint32 ``(8, P, n)``) as device arrays ``(P, n)``, committed to ``device`` (else
    uncommitted on the default device), the copies issued from ``min(8, threads)`` threads; returns once every row
    is on the device. Bit for bit the host's limbs; an error of any row's copy (e.g. the allocator's
    RESOURCE_EXHAUSTED) is raised here, in the caller's thread."""
    z = np.asarray(z)
    if z.dtype != np.uint32 or z.ndim != 3 or z.shape[0] != 8:
        raise BadInput(f"witness batch must be uint32 (8, P, n), got {z.dtype} {z.shape}")

    def one(limb):
        return jax.block_until_ready(_put(np.ascontiguousarray(z[limb]), device))

    if threads <= 1:
        return [one(limb) for limb in range(8)]
    with concurrent.futures.ThreadPoolExecutor(min(8, threads), thread_name_prefix="stage-rows") as pool:
        return list(pool.map(one, range(8)))


@functools.partial(jax.jit, static_argnames=("width",))
def stack_rows(rows, width: int):
    """The limb rows ``(P, n)`` of :func:`copy_rows` -> the batch ``(8, P, width)``, zero-padded to the prove
    programs' width (the pipeline's stage on one device)."""
    z = jnp.stack(rows)
    return jnp.pad(z, [(0, 0), (0, 0), (0, width - z.shape[-1])])
