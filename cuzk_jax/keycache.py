"""On-disk cache of proving keys, so a second run of a script does not redo the setup.

Keys live under ``$CUZK_JAX_KEY_DIR`` or ``~/.cache/cuzk_jax/keys`` as ``<circuit>-<preset>-<digest16>.pk``
(the proving-key format of :mod:`cuzk_jax.groth16.data_structures`) with the verifying key beside it (``.vk``).
The R1CS digest in the name and inside the file ties a key to one circuit shape; a cached file that fails to load
(corrupt, truncated, other circuit) is reported and regenerated, never used.

Several processes may share one cache (two ``prove.py`` runs on the same circuit at once):

* **One unit.** The pk and vk are written first, each atomically (a unique ``mkstemp`` file in the same folder,
  ``fsync``, ``os.replace``), then ``<name>.manifest`` (JSON: size and SHA-256 of both files, the setup's time and
  pid), also atomically. A load checks the manifest against both files (and the vk file against the vk embedded
  in the pk); a missing manifest or any mismatch means "no cached key": a crash between the writes, or a vk from
  another setup, never yields a mismatched pair.
* **One setup.** ``<name>.lock`` is locked with ``fcntl.flock``: loading under a shared lock, setup under an
  exclusive one, re-checking the cache once the exclusive lock is held. A second run therefore waits for the
  first's setup and loads its key instead of racing it (flock is released by the kernel if a process dies).

Cached keys are loaded with every format check, the checksum and the curve equation (batched on the device) but
without the subgroup test of the big queries (``ProvingKey.load(subgroup_check=False)``; the module docstring of
``data_structures`` explains why that is safe: such a point can only spoil the prover's own proofs, which are
verified): with it, loading a 2^20-domain key took 434 s on an H200 (BUILD.md). The verifying key is always fully
checked. ``load_or_setup(..., subgroup_check=True)`` runs the full test as well.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import time

from cuzk_jax.groth16 import generator
from cuzk_jax.fileio import atomic_write
from cuzk_jax.groth16.data_structures import KeyFormatError, ProvingKey

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1


def cache_dir() -> str:
    return os.environ.get("CUZK_JAX_KEY_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "cuzk_jax", "keys")


def key_path(circuit, r1cs, directory: str | None = None) -> str:
    return os.path.join(directory or cache_dir(), f"{circuit.name}-{circuit.preset}-{r1cs.digest()[:16]}.pk")


def companion_paths(path: str) -> dict[str, str]:
    """The files of one cached key: ``pk``, ``vk``, ``manifest`` and ``lock`` paths for the ``.pk`` path."""
    stem = path[:-3] if path.endswith(".pk") else path
    return {"pk": stem + ".pk", "vk": stem + ".vk", "manifest": stem + ".manifest", "lock": stem + ".lock"}


@contextlib.contextmanager
def _locked(lock_path: str, exclusive: bool):
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _digest(data: bytes) -> dict:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def read_cached(path: str, r1cs, *, subgroup_check: bool = False) -> ProvingKey | None:
    """The cached key at ``path`` (a ``.pk`` path) if the manifest, both files and the key itself check out, else
    ``None`` (absent); raises :class:`KeyFormatError` for a present but unusable unit (reported by the caller).
    Takes no lock (callers hold one)."""
    paths = companion_paths(path)
    raw_manifest = _read(paths["manifest"])
    if raw_manifest is None:
        return None  # never completed (or an old cache without manifests): absent
    try:
        manifest = json.loads(raw_manifest)
        want_pk, want_vk = manifest["pk"], manifest["vk"]
        if manifest.get("version") != MANIFEST_VERSION:
            raise KeyFormatError(f"manifest version {manifest.get('version')!r}, expected {MANIFEST_VERSION}")
    except (ValueError, KeyError, TypeError) as e:
        raise KeyFormatError(f"unreadable manifest {paths['manifest']} ({e})") from None
    pk_bytes, vk_bytes = _read(paths["pk"]), _read(paths["vk"])
    for name, data, want in (("pk", pk_bytes, want_pk), ("vk", vk_bytes, want_vk)):
        if data is None:
            raise KeyFormatError(f"{paths[name]} is missing")
        if _digest(data) != want:
            raise KeyFormatError(f"{paths[name]} does not match the manifest (size / SHA-256): "
                                 "another setup's file, or a torn write")
    pk = ProvingKey.from_bytes(pk_bytes, subgroup_check=subgroup_check)
    if pk.circuit_digest != r1cs.digest():
        raise KeyFormatError("cached key belongs to another circuit shape")
    if pk.vk.to_bytes() != vk_bytes:
        raise KeyFormatError(f"{paths['vk']} is not the verifying key inside {paths['pk']}")
    return pk


def write_cached(path: str, pk: ProvingKey) -> None:
    """Write pk, vk and (last) the manifest, each atomically. Callers hold the exclusive lock."""
    paths = companion_paths(path)
    pk_bytes, vk_bytes = pk.to_bytes(), pk.vk.to_bytes()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths["manifest"])  # the old unit (if any) stops being valid before its files change
    atomic_write(paths["pk"], pk_bytes)
    atomic_write(paths["vk"], vk_bytes)
    manifest = {"version": MANIFEST_VERSION, "pk": _digest(pk_bytes), "vk": _digest(vk_bytes),
                "created": time.time(), "pid": os.getpid(), "circuit_digest": pk.circuit_digest}
    atomic_write(paths["manifest"], json.dumps(manifest, indent=1).encode())


def load_or_setup(circuit, r1cs=None, *, directory: str | None = None, toxic=None, progress=None,
                  subgroup_check: bool = False) -> ProvingKey:
    """The proving key for ``circuit`` from the cache, or a fresh setup saved to the cache.

    Safe to call from several processes at once on one cache directory: they share one setup (module docstring).
    ``toxic`` (tests only) fixes the toxic waste; by default it comes from the OS CSPRNG. ``progress`` is called
    with short status strings (e.g. ``print``) for long steps.
    """
    say = progress or (lambda msg: log.info("%s", msg))
    r1cs = r1cs if r1cs is not None else circuit.r1cs()
    path = key_path(circuit, r1cs, directory)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lock = companion_paths(path)["lock"]

    def try_load():
        t0 = time.perf_counter()
        try:
            pk = read_cached(path, r1cs, subgroup_check=subgroup_check)
        except KeyFormatError as e:
            say(f"ignoring unusable cached key {path}: {e}")
            return None
        if pk is not None:
            say(f"loaded proving key {path} in {time.perf_counter() - t0:.1f}s")
        return pk

    with _locked(lock, exclusive=False):
        pk = try_load()
    if pk is not None:
        return pk
    with _locked(lock, exclusive=True):
        pk = try_load()  # another process may have finished the setup while we waited for the lock
        if pk is not None:
            return pk
        say(f"setup for {circuit.name}/{circuit.preset} ({r1cs.num_constraints} constraints) ...")
        t0 = time.perf_counter()
        pk = generator.setup(r1cs, toxic, progress=say)
        say(f"setup done in {time.perf_counter() - t0:.1f}s; saving {path}")
        t0 = time.perf_counter()
        write_cached(path, pk)
        say(f"saved in {time.perf_counter() - t0:.1f}s")
    return pk
