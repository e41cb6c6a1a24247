"""Ways to copy a witness batch ``z`` from host memory to one device, bit for bit (the prover's *stage* phase).

``z`` is uint32 ``(8, P, n)``: 8 limb rows (limb-major, as :mod:`cuzk_jax.ops.field`), each a contiguous ``(P, n)``
block of the host array. At a 2^27 domain one partition is 4.2 GB, and the stage phase copied it at ~7.5 GB/s
(0.52 s per partition, session 19): pageable host memory, one limb row after another. Two alternatives, for the
``--op=stage`` A/B (:mod:`cuzk_jax.bench.stage`):

* :func:`copy_rows` with ``threads > 1``: the limb rows are issued from a thread pool, so the host-side copies of
  pageable memory into the runtime's transfer buffers run side by side.
* :func:`pack` / :func:`unpack`: a Filecoin witness is mostly bits (PoRep: ~52 % zeros, ~47 % ones, issue 19), so
  the host sends one kind byte per variable -- 0 (all limbs zero), 1 (the limbs of ``one``: Montgomery or canonical
  1, as the batch holds it), 2 (anything else) -- plus the positions and limbs of the "other" values, and the device
  rebuilds ``z``: ~1.3 bytes per variable instead of 32 for a PoRep witness. The kinds are computed by ``threads``
  threads over column ranges (numpy releases the GIL on large arrays). A dense witness (WindowPoSt's Poseidon
  values) gains nothing: :func:`pack` is for the A/B, not a default.

All three give the same device array (``tests/test_staging.py``).
"""

from __future__ import annotations

import concurrent.futures
import functools

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax.errors import BadInput

__all__ = ["copy_rows", "pack", "unpack", "stage_packed"]


def _check(z) -> np.ndarray:
    z = np.asarray(z)
    if z.dtype != np.uint32 or z.ndim != 3 or z.shape[0] != 8:
        raise BadInput(f"witness batch must be uint32 (8, P, n), got {z.dtype} {z.shape}")
    return z


def copy_rows(z, device=None, threads: int = 1) -> list:
    """The 8 limb rows of ``z`` as device arrays ``(P, n)``, committed to ``device`` (or uncommitted), each copy
    issued from one of ``threads`` threads; returns once every row is on the device."""
    z = _check(z)
    put = (lambda a: jax.device_put(a, device)) if device is not None else jnp.asarray

    def one(limb):
        return jax.block_until_ready(put(np.ascontiguousarray(z[limb])))

    if threads <= 1:
        return [one(limb) for limb in range(8)]
    with concurrent.futures.ThreadPoolExecutor(min(8, threads), thread_name_prefix="stage-rows") as pool:
        return list(pool.map(one, range(8)))


def _kinds_range(z, one, kinds, p: int, a: int, b: int) -> None:
    zero = z[0, p, a:b] == 0
    is_one = z[0, p, a:b] == one[0]
    for limb in range(1, 8):
        row = z[limb, p, a:b]
        zero &= row == 0
        is_one &= row == one[limb]
    k = kinds[p, a:b]
    k.fill(2)
    k[zero] = 0
    k[is_one] = 1


def pack(z, one, threads: int = 1, span: int = 1 << 22):
    """``(kinds, pos, vals)`` of a batch ``z`` (uint32 ``(8, P, n)``): ``kinds`` uint8 ``(P, n)`` (0 zero, 1 equal to
    ``one``'s 8 limbs, 2 other), ``pos`` int64 ``(K,)`` the flat indices ``p n + i`` of the others in order, ``vals``
    uint32 ``(8, K)`` their limbs. ``threads`` threads classify ranges of ``span`` columns."""
    z = _check(z)
    one = np.asarray(one, np.uint32).reshape(8)
    _, P, n = z.shape
    kinds = np.empty((P, n), np.uint8)
    jobs = [(p, a, min(a + span, n)) for p in range(P) for a in range(0, n, span)]
    if threads <= 1 or len(jobs) == 1:
        for job in jobs:
            _kinds_range(z, one, kinds, *job)
    else:
        with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="stage-pack") as pool:
            list(pool.map(lambda job: _kinds_range(z, one, kinds, *job), jobs))
    pos = np.flatnonzero(kinds.reshape(-1) == 2)
    vals = z.reshape(8, P * n)[:, pos]
    return kinds, pos, vals


@functools.partial(jax.jit, static_argnames=("width",))
def unpack(kinds, pos, vals, one, width: int):
    """The device batch ``(8, P, width)`` from :func:`pack`'s arrays (on the device): ``one``'s limbs where the kind
    is 1, the listed values at ``pos``, zeros elsewhere and in the padding columns ``n .. width - 1``."""
    P, n = kinds.shape
    base = jnp.where(kinds[None] == 1, one.reshape(8, 1, 1), jnp.uint32(0))  # (8, P, n)
    flat = base.reshape(8, P * n).at[:, pos].set(vals, mode="drop", unique_indices=True)
    return jnp.pad(flat.reshape(8, P, n), [(0, 0), (0, 0), (0, width - n)])


def stage_packed(z, one, width: int, device=None, threads: int = 1):
    """:func:`pack` on the host, the three arrays copied, :func:`unpack` on the device: ``(8, P, width)``."""
    kinds, pos, vals = pack(z, one, threads)
    if pos.size and pos[-1] >= 2**31:
        raise BadInput(f"batch of {kinds.size} variables is past int32 positions; stage it by rows")
    put = (lambda a: jax.device_put(a, device)) if device is not None else jnp.asarray
    args = [put(a) for a in (kinds, pos.astype(np.int32), vals, np.asarray(one, np.uint32).reshape(8))]
    return unpack(*args, width=width)
