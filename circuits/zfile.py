"""Host buffers for a batch of witnesses ``z`` (``(8, P, num_vars)`` uint32 Fr limbs): private anonymous memory,
or a file that worker processes write into and the parent maps (the batched witness paths of :mod:`.porep_like`
and :mod:`.block_witness`)."""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile

import numpy as np

from cuzk_jax.errors import BadInput

SHARED_DIR_ENV = "CUZK_JAX_SHM_DIR"


def alloc_z(shape) -> np.ndarray:
    """An uninitialised uint32 array for ``z``: anonymous memory advised for transparent huge pages where the
    platform offers it (first-touch page faults of 4 KiB pages cost more than filling a sector's 4 GiB per
    partition), else ``np.empty``."""
    nbytes = 4 * int(np.prod(shape))
    if nbytes < (64 << 20) or not hasattr(mmap, "MADV_HUGEPAGE"):
        return np.empty(shape, np.uint32)
    mm = mmap.mmap(-1, nbytes)
    try:
        mm.madvise(mmap.MADV_HUGEPAGE)
    except OSError:
        pass
    return np.frombuffer(mm, np.uint32).reshape(shape)


def shared_dir(nbytes: int) -> str:
    """Where the workers' shared ``z`` file goes: ``$CUZK_JAX_SHM_DIR``, else ``/dev/shm`` when it has room (a
    container's default /dev/shm is often 64 MiB: writing past it would kill the workers with SIGBUS), else the
    temporary directory; BadInput when none has ``nbytes`` free."""
    env = os.environ.get(SHARED_DIR_ENV)
    candidates = [env] if env else ["/dev/shm", tempfile.gettempdir()]
    for d in candidates:
        try:
            st = os.statvfs(d)
        except OSError:
            continue
        if st.f_bavail * st.f_frsize >= nbytes:
            return d
    raise BadInput(f"witness_batch: no room for the {nbytes / 2**30:.1f} GiB shared witness file in "
                   f"{', '.join(candidates)} (set ${SHARED_DIR_ENV} or use workers=1)")


def map_shared(path: str, shape, fd: int | None = None) -> np.ndarray:
    """The shared ``z`` file as a writable ``shape`` uint32 array: a worker's ``np.memmap`` of ``path``, or (with
    ``fd``, the parent's open descriptor) a shared mapping that outlives the file's unlinking."""
    if fd is None:
        return np.memmap(path, np.uint32, "r+", shape=tuple(shape))
    return np.frombuffer(mmap.mmap(fd, 0), np.uint32).reshape(tuple(shape))


def new_file(nbytes: int, prefix: str = "cuzk-z-") -> tuple[int, str]:
    """``(fd, path)`` of a new, empty (sparse) file of ``nbytes`` bytes under :func:`shared_dir` (BadInput when
    no directory has room); the caller closes and removes it."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".u32", dir=shared_dir(nbytes))
    try:
        os.ftruncate(fd, nbytes)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    return fd, path


def pwrite_all(fd: int, data, pos: int) -> None:
    """Write all of the bytes-like ``data`` at offset ``pos`` of ``fd`` (``os.pwrite`` may write less than asked:
    at most ~2 GiB per call on Linux)."""
    data = memoryview(data).cast("B")
    while len(data):
        done = os.pwrite(fd, data[:1 << 30], pos)
        data, pos = data[done:], pos + done


@contextlib.contextmanager
def shared_z(shape):
    """A file of ``shape`` uint32 values under :func:`shared_dir` for worker processes to write into (each maps it
    with ``map_shared(path, shape)``): yields ``(path, mapped)``, where ``mapped()`` (called inside the block, once
    the workers are done) is the parent's array over it. The file is unlinked on leaving the block; the mapping
    outlives it."""
    fd, path = new_file(4 * int(np.prod(shape)))
    try:
        yield path, lambda: map_shared(path, shape, fd=fd)
    finally:
        os.close(fd)
        os.unlink(path)
