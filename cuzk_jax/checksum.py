"""Block-parallel SHA-256 of large buffers (a hash list), for the memory-mapped file formats.

A file region is cut into fixed-size blocks; each block's SHA-256 is computed in a worker thread (``hashlib``
releases the GIL on buffers over 2 KiB), so hashing a memory-mapped file runs on several cores and is bounded by
memory / disk bandwidth instead of one core's SHA-256 speed (~0.85 GB/s on this project's CPU). Used by
``circuits/compiled.py`` (one digest list per file) and ``groth16/keyfile.py`` (one list per section).

Base layer: imports nothing from the project and no JAX.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import hashlib
import os
from typing import Iterator

__all__ = ["threads", "block_digests", "block_count"]


def threads() -> int:
    """Worker threads for block hashing: ``min(os.cpu_count(), 16)``, at least 1."""
    return max(1, min(16, os.cpu_count() or 1))


def block_count(nbytes: int, block: int) -> int:
    """Blocks of ``block`` bytes covering ``nbytes`` (the last one may be short; zero bytes -> zero blocks)."""
    return -(-nbytes // block)


def _digest(buf, start: int, stop: int) -> bytes:
    return hashlib.sha256(buf[start:stop]).digest()


def block_digests(buf, start: int, stop: int, block: int, pool=None) -> Iterator[bytes]:
    """The SHA-256 digest (32 bytes) of each ``block``-byte block of ``buf[start:stop]`` (``buf`` a memoryview, e.g.
    of an ``mmap``), in order, computed by ``pool``'s threads (a ``ThreadPoolExecutor``; ``None``: one of
    :func:`threads` workers for this call) with a bounded number of blocks in flight, so memory stays flat whatever
    the block count. Close the generator (or exhaust it) before releasing ``buf``: closing waits for the blocks
    still in flight."""
    if block < 1:
        raise ValueError(f"block_digests: block must be positive, got {block}")
    with contextlib.ExitStack() as stack:
        if pool is None:
            pool = stack.enter_context(concurrent.futures.ThreadPoolExecutor(threads()))
        depth = 4 * getattr(pool, "_max_workers", threads())
        pending: collections.deque = collections.deque()
        try:
            for s in range(start, stop, block):
                pending.append(pool.submit(_digest, buf, s, min(stop, s + block)))
                if len(pending) >= depth:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:  # an early close: let the blocks in flight finish (they hold views of buf)
            for f in pending:
                f.cancel()
            concurrent.futures.wait(pending)
