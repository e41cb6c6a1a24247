"""On-disk cache of proving keys, so a second run of a script does not redo the setup.

Keys live under ``$CUZK_JAX_KEY_DIR`` or ``~/.cache/cuzk_jax/keys`` as ``<circuit>-<preset>-<digest16>.pk``
with the verifying key beside it (``.vk``, the format of :mod:`cuzk_jax.groth16.data_structures`). The ``.pk`` is
written in the raw format of :mod:`cuzk_jax.groth16.keyfile` (the device's limb arrays, memory-mapped on load;
manifest version 2); a unit written earlier in the byte format of ``data_structures`` (manifest version 1) is still
read as it is, and is replaced only when it fails to load (no conversion pass).
The R1CS digest in the name and inside the file ties a key to one circuit shape; a cached file that fails to load
(corrupt, truncated, other circuit) is reported and regenerated, never used.

Several processes may share one cache (two ``prove.py`` runs on the same circuit at once):

* **One unit.** The pk and vk are written first, each atomically (a unique ``mkstemp`` file in the same folder,
  ``fsync``, ``os.replace``), then ``<name>.manifest`` (JSON: the vk's size and SHA-256, the pk's size and the
  SHA-256 of its header -- which covers the checksums of all its sections, so the manifest binds the whole file
  without a second pass over it -- the setup's time and pid), also atomically. A load checks the manifest against
  both files (and the vk file against the vk embedded in the pk); a missing manifest or any mismatch means "no
  cached key": a crash between the writes, or a vk from another setup, never yields a mismatched pair.
* **One setup.** ``<name>.lock`` is locked with ``fcntl.flock``: loading under a shared lock, setup under an
  exclusive one, re-checking the cache once the exclusive lock is held. A second run therefore waits for the
  first's setup and loads its key instead of racing it (flock is released by the kernel if a process dies).

Cached keys are loaded with every format check, the checksums and the curve equation (batched on the device) but
without the subgroup test of the big queries (``keyfile.load(subgroup_check=False)``; the module docstring of
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

from cuzk_jax.errors import BadInput
from cuzk_jax.groth16 import generator, keyfile
from cuzk_jax.fileio import atomic_write
from cuzk_jax.groth16.data_structures import KeyFormatError, ProvingKey, check_h_form

log = logging.getLogger(__name__)

MANIFEST_VERSION = 2  # 2: raw pk (keyfile); 1: the byte format of data_structures (still read)


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


def human_size(n: int) -> str:
    """``n`` bytes as ``"12.3 GB"`` / ``"456.7 MB"`` / ``"65.5 kB"`` (decimal units)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


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
        version = manifest.get("version")
        if version not in (1, MANIFEST_VERSION):
            raise KeyFormatError(f"manifest version {version!r}, expected 1 or {MANIFEST_VERSION}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise KeyFormatError(f"unreadable manifest {paths['manifest']} ({e})") from None
    vk_bytes = _read(paths["vk"])
    if vk_bytes is None:
        raise KeyFormatError(f"{paths['vk']} is missing")
    if _digest(vk_bytes) != want_vk:
        raise KeyFormatError(f"{paths['vk']} does not match the manifest (size / SHA-256): another setup's file, "
                             "or a torn write")
    if version == 1:
        pk = _read_v1(paths["pk"], want_pk, subgroup_check)
    else:
        if not os.path.exists(paths["pk"]):
            raise KeyFormatError(f"{paths['pk']} is missing")
        try:
            _, head_sha, size = keyfile.read_header(paths["pk"])
        except KeyFormatError as e:
            raise KeyFormatError(f"{paths['pk']} does not match the manifest ({e})") from None
        if {"size": size, "header_sha256": head_sha} != want_pk:
            raise KeyFormatError(f"{paths['pk']} does not match the manifest (size / header SHA-256): another "
                                 "setup's file, or a torn write")
        pk = keyfile.load(paths["pk"], subgroup_check=subgroup_check)
    if pk.circuit_digest != r1cs.digest():
        raise KeyFormatError("cached key belongs to another circuit shape")
    if pk.vk.to_bytes() != vk_bytes:
        raise KeyFormatError(f"{paths['vk']} is not the verifying key inside {paths['pk']}")
    return pk


def _read_v1(pk_path: str, want: dict, subgroup_check: bool) -> ProvingKey:
    """A pk of manifest version 1: the byte format of ``data_structures``, bound by its whole-file SHA-256."""
    pk_bytes = _read(pk_path)
    if pk_bytes is None:
        raise KeyFormatError(f"{pk_path} is missing")
    if _digest(pk_bytes) != want:
        raise KeyFormatError(f"{pk_path} does not match the manifest (size / SHA-256): another setup's file, "
                             "or a torn write")
    return ProvingKey.from_bytes(pk_bytes, subgroup_check=subgroup_check)


def write_cached(path: str, pk: ProvingKey) -> int:
    """Write pk (raw format), vk and (last) the manifest, each atomically. Callers hold the exclusive lock.
    Returns the pk file's size in bytes."""
    paths = companion_paths(path)
    vk_bytes = pk.vk.to_bytes()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths["manifest"])  # the old unit (if any) stops being valid before its files change
    keyfile.save(pk, paths["pk"])
    atomic_write(paths["vk"], vk_bytes)
    _, head_sha, size = keyfile.read_header(paths["pk"])
    manifest = {"version": MANIFEST_VERSION, "format": "raw", "pk": {"size": size, "header_sha256": head_sha},
                "vk": _digest(vk_bytes), "created": time.time(), "pid": os.getpid(),
                "circuit_digest": pk.circuit_digest}
    atomic_write(paths["manifest"], json.dumps(manifest, indent=1).encode())
    return size


def load_or_setup(circuit, r1cs=None, *, directory: str | None = None, toxic=None, progress=None,
                  subgroup_check: bool = False, method: str | None = None,
                  h_form: str | None = None) -> ProvingKey:
    """The proving key for ``circuit`` from the cache, or a fresh setup saved to the cache.

    Safe to call from several processes at once on one cache directory: they share one setup (module docstring).
    ``toxic`` (tests only) fixes the toxic waste; by default it comes from the OS CSPRNG. ``progress`` is called
    with short status strings (e.g. ``print``) for long steps. ``method`` picks the setup's implementation
    (:func:`cuzk_jax.groth16.generator.setup`: ``"host"``, ``"device"``, or None for the platform's default); both
    give the same key. ``h_form``: the H query's form of a new key (:data:`~cuzk_jax.groth16.data_structures.H_FORMS`;
    None: the setup's default, and a cached key of either form is used); a cached key of another form than the one
    asked for is a :class:`~cuzk_jax.errors.BadInput` (the cache holds one key per circuit: delete it, or use
    another directory), never silently replaced.
    """
    if h_form is not None:
        check_h_form(h_form)
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
        if pk is not None and h_form is not None and pk.h_form != h_form:
            raise BadInput(f"the cached key {path} has a {pk.h_form} H query, {h_form} was asked for: delete it or "
                           "use another key directory")
        if pk is not None:
            dt = time.perf_counter() - t0
            size = os.path.getsize(path)
            say(f"loaded proving key {path} ({human_size(size)}) in {dt:.1f}s ({size / 1e9 / max(dt, 1e-9):.2f} GB/s)")
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
        pk = generator.setup(r1cs, toxic, progress=say, method=method, h_form=h_form or generator.DEFAULT_H_FORM)
        say(f"setup done in {time.perf_counter() - t0:.1f}s; saving {path}")
        t0 = time.perf_counter()
        size = write_cached(path, pk)
        dt = time.perf_counter() - t0
        say(f"saved {human_size(size)} in {dt:.1f}s ({size / 1e9 / max(dt, 1e-9):.2f} GB/s)")
    return pk
