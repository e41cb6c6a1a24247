"""The iden3 binary container shared by circom's ``.r1cs``, the ``.wtns`` witness and snarkjs's ``.zkey``.

Layout (``@iden3/binfileutils`` ``readBinFile`` / ``createBinFile``), all integers little-endian::

    magic  4 bytes ("r1cs", "wtns", "zkey")
    u32    version
    u32    nSections
    nSections x { u32 sectionId, u64 sectionSize, sectionSize bytes }

Everything here works on an in-memory ``bytes`` buffer. Any structural problem (wrong magic, unsupported
version, a section header or body running past the end of the file, a section that is missing, duplicated or of
the wrong size, bytes left over after the last section) raises :class:`FormatError` -- a ``ValueError`` whose
message names the file and the problem.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

from cuzk_jax.errors import FormatError  # noqa: F401  (re-exported: its old home)
from cuzk_jax.reference import constants as C

# Primes the files declare. We only prove over BLS12-381; the others are named so the error says what the file is.
KNOWN_SCALAR_PRIMES = {
    C.R: "bls12381",
    21888242871839275222246405745257275088548364400416034343698204186575808495617: "bn128",
}
KNOWN_BASE_PRIMES = {
    C.P: "bls12381",
    21888242871839275222246405745257275088696311157297823662689037894645226208583: "bn128",
}


@dataclass(frozen=True)
class BinFile:
    """A parsed container: ``sections[id]`` is the (offset, size) of that section's body in ``data``."""

    name: str
    kind: str
    version: int
    data: bytes
    sections: dict[int, tuple[int, int]]

    def error(self, msg: str) -> FormatError:
        return FormatError(f"{self.name}: {msg}")

    def has(self, sid: int) -> bool:
        return sid in self.sections

    def section(self, sid: int, size: int | None = None, what: str = "") -> memoryview:
        """The body of section ``sid``; ``size`` (if given) must match exactly."""
        if sid not in self.sections:
            raise self.error(f"missing section {sid}{' (' + what + ')' if what else ''}")
        off, n = self.sections[sid]
        if size is not None and n != size:
            raise self.error(
                f"section {sid}{' (' + what + ')' if what else ''} has {n} bytes, expected {size} "
                "(truncated or corrupt file)")
        return memoryview(self.data)[off:off + n]


def load_bytes(source) -> tuple[str, bytes]:
    """``source`` is a path (str / os.PathLike) or the file's bytes; returns (name for messages, bytes)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return "<bytes>", bytes(source)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            with open(path, "rb") as fh:
                return path, fh.read()
        except OSError as e:
            raise FormatError(f"{path}: cannot read file ({e.strerror or e})") from None
    raise FormatError(f"expected a file path or bytes, got {type(source).__name__}")


def parse(source, kind: str, max_version: int) -> BinFile:
    """Parse the container of ``source`` (path or bytes), checking the magic ``kind`` and the version."""
    name, data = load_bytes(source)
    if len(data) < 12:
        raise FormatError(f"{name}: {len(data)} bytes is too short for a .{kind} file (truncated?)")
    magic = data[:4]
    if magic != kind.encode():
        raise FormatError(f"{name}: not a .{kind} file (magic {magic!r}, expected {kind.encode()!r})")
    version, n_sections = struct.unpack_from("<II", data, 4)
    if not 1 <= version <= max_version:
        raise FormatError(f"{name}: .{kind} version {version} is not supported (expected 1..{max_version})")
    sections: dict[int, tuple[int, int]] = {}
    pos = 12
    for i in range(n_sections):
        if pos + 12 > len(data):
            raise FormatError(f"{name}: truncated file: header of section {i + 1}/{n_sections} runs past the end")
        sid, size = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if pos + size > len(data):
            raise FormatError(f"{name}: truncated file: section {sid} declares {size} bytes, "
                              f"only {len(data) - pos} remain")
        if sid in sections:
            raise FormatError(f"{name}: section {sid} appears twice (corrupt file)")
        sections[sid] = (pos, size)
        pos += size
    if pos != len(data):
        raise FormatError(f"{name}: {len(data) - pos} unexpected bytes after the last section (corrupt file)")
    return BinFile(name, kind, version, data, sections)


def build(kind: str, version: int, sections: list[tuple[int, bytes]]) -> bytes:
    """Serialise a container (the inverse of :func:`parse`); used by the writers and by tests."""
    out = [kind.encode(), struct.pack("<II", version, len(sections))]
    for sid, body in sections:
        out.append(struct.pack("<IQ", sid, len(body)))
        out.append(bytes(body))
    return b"".join(out)


def check_prime(f: BinFile, n8: int, prime: int, *, scalar: bool = True) -> None:
    """Refuse files for any field other than BLS12-381's scalar field r (or base field q if ``scalar=False``)."""
    want, want_n8 = (C.R, 32) if scalar else (C.P, 48)
    known = KNOWN_SCALAR_PRIMES if scalar else KNOWN_BASE_PRIMES
    if prime != want:
        curve = known.get(prime)
        what = f"the {curve} curve" if curve else f"prime {prime}"
        raise f.error(f"file is for {what}; cuzk_jax proves over BLS12-381 only "
                      "(compile with `circom --prime bls12381` and use a bls12381 powers of tau)")
    if n8 != want_n8:
        raise f.error(f"field element size {n8} bytes, expected {want_n8} for BLS12-381")


def le_ints(buf, n8: int) -> list[int]:
    """Consecutive ``n8``-byte little-endian integers of ``buf`` as Python ints."""
    b = bytes(buf)
    return [int.from_bytes(b[i:i + n8], "little") for i in range(0, len(b), n8)]


def limbs_from_le(buf, n8: int) -> np.ndarray:
    """Consecutive ``n8``-byte little-endian integers -> limb-major ``(n8 // 4, N)`` uint32 (a copy)."""
    arr = np.frombuffer(bytes(buf), dtype="<u4").reshape(-1, n8 // 4)
    return np.ascontiguousarray(arr.T).astype(np.uint32)


def limbs_to_le(limbs: np.ndarray) -> bytes:
    """Inverse of :func:`limbs_from_le`."""
    L = limbs.shape[0]
    return np.ascontiguousarray(np.asarray(limbs, np.uint32).reshape(L, -1).T).astype("<u4").tobytes()


def all_below(limbs: np.ndarray, bound: int) -> np.ndarray:
    """Vectorised ``value < bound`` for limb-major uint32 arrays of any trailing shape."""
    from cuzk_jax.encoding import limbs_less_than

    L = limbs.shape[0]
    flat = limbs.reshape(L, -1)
    return limbs_less_than(flat, bound).reshape(limbs.shape[1:])
