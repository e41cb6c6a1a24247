"""The compiled circuit form on disk: an :class:`~cuzk_jax.circuits.r1cs.R1CS` as one memory-mappable file.

``save(r1cs, path, meta)`` writes it (atomically: a temporary file in the same directory, fsync, ``os.replace``);
``load(path)`` maps it back without copying the matrices (read-only ``np.frombuffer`` views of an ``mmap``) and
returns an R1CS equal to the one saved (same :meth:`~cuzk_jax.circuits.r1cs.R1CS.digest`, matrices, coefficient
table and constraint names). :meth:`cuzk_jax.circuits.Circuit.r1cs` keeps these files in a cache directory so the
structure of a circuit shape is synthesized once, not on every run.

Format (version 2; every integer little-endian, ``u32`` / ``u64`` unsigned). A fixed 160-byte header:

======  ====  =====================================================================================================
offset  size  field
======  ====  =====================================================================================================
0       8     magic ``b"CUZKR1CS"``
8       4     u32 format version (2; version-1 files are still read, see below)
12      4     u32 indptr width in bytes: 4 (int32, when nnz_a + nnz_b + nnz_c < 2^31) or 8 (int64)
16      8     u64 file size in bytes (everything, checksum included)
24      8     u64 data offset D = 160 + J rounded up to 64 (where the first array starts)
32      8     u64 num_inputs (ONE + public inputs)
40      8     u64 num_aux (private variables)
48      8     u64 num_constraints m (appended ones included)
56      8     u64 appended_constraints (rows added after synthesis, ``R1CS.with_input_constraints``; usually 0)
64      24    3 x u64 nnz of A, B, C
88      8     u64 K, coefficient-table size
96      4     u32 namespace-id width in bytes (1, 2 or 4)
100     4     u32 label-id width in bytes (1, 2 or 4)
104     8     u64 N, names-blob size in bytes
112     8     u64 J, metadata size in bytes (at most 1 MiB)
120     8     u64 checksum block size B: a multiple of 64 in [4096, 2^40], default 16 MiB (version 1: zero)
128     32    the R1CS digest (raw SHA-256 of ``R1CS.digest()``)
160     J     metadata: UTF-8 JSON object, e.g. ``{"circuit": ..., "preset": ..., "params": {...}, "code": ...}``
======  ====  =====================================================================================================

Then the arrays, each starting at the next multiple of 64 bytes (zero padding between), in this order:

=========================  ======================  ================================================================
section                    size                    contents
=========================  ======================  ================================================================
A.indptr                   (m + 1) x indptr width  CSR row pointers (int32 or int64)
A.cols                     nnz_a x 4               int32 column (wire) of each term
A.coeff_ids                nnz_a x 4               int32 index into the coefficient table (small and large
                                                   coefficients alike)
B.indptr, B.cols, ...      as for A
C.indptr, C.cols, ...      as for A
coefficients               K x 32                  Fr elements, canonical, 32-byte little-endian each
row namespace ids          m x namespace width     uint8 / uint16 (or int32) index into the namespace table
row label ids              m x label width         uint8 / uint16 (or int32) index into the label table
names                      N                       UTF-8 JSON ``{"namespaces": [...], "labels": [...],
                                                   "input_names": [...]}`` (constraint ``i`` is named
                                                   ``namespaces[ns[i]] + "/" + labels[label[i]]``)
checksum                   32 x (n + 1)            at S, a multiple of 64: n = ceil(S / B) block digests, digest i
                                                   the SHA-256 of file bytes [i B, min((i + 1) B, S)) (the header
                                                   is in block 0), then the SHA-256 of the n digests concatenated
=========================  ======================  ================================================================

The file ends with the checksum: its size is S + 32 (n + 1), a function of the header alone. Version 1 (files
written before the block checksum) differs only in two places: the word at offset 120 is zero, and the checksum is
32 bytes, the SHA-256 of bytes [0, S) (one stream: ~0.85-1.3 GB/s on one core, ~10 s for a sector-sized file).

The id widths are the narrowest that hold the table (uint8 up to 256 entries, uint16 up to 65,536), so names cost
2-4 bytes per constraint; the rest is ``12`` (int32 indptr) + 8 x nnz per constraint: :func:`bytes_per_constraint`.

Loading reads the 160-byte header and the metadata, checks the magic, the version, every count and width, and
that the layout they imply (checksum block count included) has exactly the file's size BEFORE it maps or allocates
anything (a header claiming 2^40 entries in a small file is one error, not a 2^40-byte allocation); then it maps the
file and verifies the checksum -- version 2: the digest of the block list, then every block hashed by
``min(os.cpu_count(), 16)`` threads over the mapping (``hashlib`` releases the GIL; :mod:`cuzk_jax.checksum`, shared
with the raw key files) and compared with its listed digest, the error naming the first bad block; version 1: one
SHA-256 streamed 16 MiB at a time --, decodes the coefficient table and the names, and range-checks the arrays
(indptr monotone from 0 to nnz, columns < num_vars, coefficient ids < K, name ids inside their tables). Any failure
is ONE :class:`~cuzk_jax.errors.FormatError` naming the file and what is wrong (truncated, corrupt, bad magic,
unsupported version, inconsistent header, bad block size). A loaded R1CS keeps the mapping open for as long as its
arrays live; its
digest is the header's when the checksum was verified (the file is then byte for byte what :func:`save` wrote from
an R1CS with that digest), else recomputed on first use.

Measured on this project's 2-core CPU (``bench --op=synth``; load = ``Circuit.r1cs(cache_dir=...)`` with a warm page
cache, checksum included):

=========================  ===========  =========  ========  =========  =======  ===============  ===========
porep_like preset          constraints  B/constr.  file      structure  save     load (checksum)  load (none)
=========================  ===========  =========  ========  =========  =======  ===============  ===========
tiny (Poseidon)            1,422        252.4      0.36 MB   0.02 s     0.007 s  0.001 s          0.0003 s
small (Poseidon, arity 8)  12,549       250.4      3.1 MB    0.14 s     0.06 s   0.009 s          0.001 s
medium (SHA-256)           422,401      62.8       26.5 MB   1.70 s     0.15 s   0.039 s          0.009 s
large (SHA-256)            1,122,332    62.7       70.4 MB   4.69 s     0.40 s   0.10 s           0.011 s
xlarge (SHA-256)           2,800,236    62.7       175.7 MB  15.1 s     0.95 s   0.21 s           0.037 s
=========================  ===========  =========  ========  =========  =======  ===============  ===========

SHA-256-heavy shapes have ~6 nonzeros per constraint (48 B of cols + coeff_ids, 12 B of int32 row pointers, 2 B
of name ids); Poseidon rows are dense (~28 nonzeros). A 130M-constraint SHA-256 partition is ~8.3 GB; with
version 1's single SHA-256 stream (~0.85 GB/s single-threaded here) the load took ~10 s, dominated by the checksum.

Version 2, measured here on a 1.07 GB synthetic file (``tests/test_compiled.py::measure_load``, 62 B/constraint,
65 blocks of 16 MiB, warm page cache, 2 shared cores so 2 hashing threads; two runs): block checksum alone
0.43-0.45 s (2.4-2.5 GB/s, against 0.81-0.86 s / 1.2-1.3 GB/s for one stream over the same bytes), whole ``load``
0.52-0.57 s (1.9-2.1 GB/s), ``load`` without the checksum 0.13-0.14 s (7.5-8.1 GB/s: the range checks). The
checksum scales with cores up to memory (or disk) bandwidth: with 16 threads the 8.3 GB sector file's checksum
should take ~1 s from the page cache (not measured on a 16-core host); a cold load is bounded by the disk's read
rate.

**Caches.** :meth:`Circuit.r1cs`'s cache key covers the format version, so a version-1 cache file is never looked
at: the first run after the upgrade synthesizes the structure and writes a version-2 file under the new name (the
old file stays until the cache directory is cleaned; :func:`load` still reads it when given its path).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import mmap
import os
import struct

import numpy as np

from cuzk_jax import checksum
from cuzk_jax.fileio import atomic_file
from cuzk_jax.errors import FormatError
from cuzk_jax.reference.constants import R

from .r1cs import R1CS, SparseMatrix

__all__ = ["MAGIC", "VERSION", "Header", "save", "load", "load_with_header", "read_header", "file_size",
           "bytes_per_constraint", "summary"]

MAGIC = b"CUZKR1CS"
VERSION = 2  # what save() writes; load() reads 1 and 2
VERSIONS = (1, 2)
HASH_BLOCK = 16 << 20  # bytes per checksum block (version 2): a 26 MB file hashes in 2 threads, 8.3 GB in 496 blocks
MIN_HASH_BLOCK = 4096
MAX_HASH_BLOCK = 1 << 40
ALIGN = 64
FIXED = struct.Struct("<8sIIQQQQQQ3QQIIQQQ32s")  # the 160-byte fixed header of the table above
assert FIXED.size == 160
MAX_META = 1 << 20
_CHUNK = 16 << 20  # bytes per checksum step (version 1's single stream)
_CHECK_CHUNK = 1 << 22  # elements per range-check step
_INT32_MAX = (1 << 31) - 1


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _id_width(table_len: int) -> int:
    return 1 if table_len <= 1 << 8 else 2 if table_len <= 1 << 16 else 4


_ID_DTYPE = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<i4")}
_PTR_DTYPE = {4: np.dtype("<i4"), 8: np.dtype("<i8")}
_I32 = np.dtype("<i4")


@dataclasses.dataclass(frozen=True)
class Header:
    """The decoded header of a compiled circuit file (sizes, widths, metadata, digest)."""

    version: int
    ptr_width: int
    file_size: int
    data_offset: int
    num_inputs: int
    num_aux: int
    num_constraints: int
    appended_constraints: int
    nnz: tuple
    num_coeffs: int
    ns_width: int
    label_width: int
    names_bytes: int
    meta: dict
    digest: str
    hash_block: int = 0  # checksum block size (version 2; 0 in version 1)

    def sections(self) -> list[tuple[str, int, int, np.dtype]]:
        """``[(name, offset, count, dtype)]`` of every array section, then the checksum as ``("checksum", offset,
        nbytes, uint8)`` (version 1: 32 bytes; version 2: :meth:`num_blocks` block digests + 1, 32 bytes each);
        pure arithmetic on the header (Python ints: no overflow on absurd counts)."""
        m = self.num_constraints
        out, off = [], self.data_offset
        items = []
        for mat, nnz in zip("ABC", self.nnz):
            items += [(f"{mat}.indptr", m + 1, _PTR_DTYPE[self.ptr_width]), (f"{mat}.cols", nnz, _I32),
                      (f"{mat}.coeff_ids", nnz, _I32)]
        items += [("coeffs", self.num_coeffs * 32, np.dtype("u1")), ("row_namespace", m, _ID_DTYPE[self.ns_width]),
                  ("row_label", m, _ID_DTYPE[self.label_width]), ("names", self.names_bytes, np.dtype("u1"))]
        for name, count, dtype in items:
            off = _align(off)
            out.append((name, off, count, dtype))
            off += count * dtype.itemsize
        off = _align(off)
        out.append(("checksum", off, 32 if self.version == 1 else 32 * (self.num_blocks(off) + 1), np.dtype("u1")))
        return out

    def num_blocks(self, covered: int | None = None) -> int:
        """Checksum blocks of a version-2 file: ``ceil(S / hash_block)``, S the checksum's offset (every byte before
        it is covered)."""
        if covered is None:
            covered = self.sections()[-1][1]
        return checksum.block_count(covered, self.hash_block)

    def expected_size(self) -> int:
        _, off, nbytes, _ = self.sections()[-1]
        return off + nbytes

    @property
    def num_vars(self) -> int:
        return self.num_inputs + self.num_aux


def _meta_bytes(meta: dict | None) -> bytes:
    return json.dumps(meta or {}, sort_keys=True, separators=(",", ":"), default=str).encode()


def _header_for(r1cs: R1CS, meta: dict | None, names: bytes, block: int = HASH_BLOCK) -> Header:
    nnz = tuple(int(x) for x in r1cs.nnz)
    meta_b = _meta_bytes(meta)
    if len(meta_b) > MAX_META:
        raise ValueError(f"compiled circuit metadata is {len(meta_b)} bytes; at most {MAX_META}")
    if r1cs.num_vars > _INT32_MAX:
        raise ValueError(f"R1CS has {r1cs.num_vars} variables: columns must fit int32")
    h = Header(version=VERSION, ptr_width=4 if sum(nnz) <= _INT32_MAX else 8, file_size=0,
               data_offset=_align(FIXED.size + len(meta_b)), num_inputs=r1cs.num_inputs, num_aux=r1cs.num_aux,
               num_constraints=r1cs.num_constraints, appended_constraints=r1cs.appended_constraints, nnz=nnz,
               num_coeffs=len(r1cs.coeffs), ns_width=_id_width(len(r1cs.namespaces)),
               label_width=_id_width(len(r1cs.labels)), names_bytes=len(names), meta=json.loads(meta_b),
               digest=r1cs.digest(), hash_block=block)
    return dataclasses.replace(h, file_size=h.expected_size())


def _names_blob(r1cs: R1CS) -> bytes:
    return json.dumps({"namespaces": list(r1cs.namespaces), "labels": list(r1cs.labels),
                       "input_names": list(r1cs.input_names)}, ensure_ascii=False, separators=(",", ":")).encode()


def file_size(r1cs: R1CS, meta: dict | None = None) -> int:
    """Bytes of the compiled file of ``r1cs`` (computed, nothing written)."""
    return _header_for(r1cs, meta, _names_blob(r1cs)).file_size


def bytes_per_constraint(r1cs: R1CS, meta: dict | None = None) -> float:
    """File bytes per constraint of ``r1cs`` in the compiled form (the issue's figure of merit)."""
    return file_size(r1cs, meta) / max(r1cs.num_constraints, 1)


# -- writing ---------------------------------------------------------------------------------------------------------
class _Writer:
    """Writes to a file object, keeping track of the offset (for the 64-byte alignment)."""

    def __init__(self, fh):
        self.fh, self.off = fh, 0

    def write(self, data) -> None:
        mv = memoryview(data).cast("B")
        if not mv.nbytes:
            return
        self.fh.write(mv)
        self.off += mv.nbytes

    def pad_to(self, off: int) -> None:
        if off < self.off:
            raise AssertionError(f"compiled writer: offset {self.off} past section start {off}")
        self.write(b"\0" * (off - self.off))

    def array(self, arr: np.ndarray, dtype: np.dtype) -> None:
        arr = np.asarray(arr)
        if arr.dtype == dtype and arr.flags.c_contiguous:
            self.write(arr)
            return
        for i in range(0, arr.size, _CHECK_CHUNK):  # convert a bounded chunk at a time (e.g. int64 -> int32 indptr)
            chunk = arr[i:i + _CHECK_CHUNK]
            conv = chunk.astype(dtype)
            if not np.array_equal(conv, chunk):
                raise ValueError(f"compiled writer: values do not fit {dtype}")
            self.write(conv)


def _block_ok(block: int) -> bool:
    return MIN_HASH_BLOCK <= block <= MAX_HASH_BLOCK and block % ALIGN == 0


def _block_digests(buf, covered: int, block: int) -> list[bytes]:
    """The SHA-256 of each ``block``-byte block of ``buf[:covered]``, hashed by several threads."""
    with concurrent.futures.ThreadPoolExecutor(checksum.threads()) as pool:
        return list(checksum.block_digests(buf, 0, covered, block, pool))


def save(r1cs: R1CS, path: str | os.PathLike, meta: dict | None = None, block: int = HASH_BLOCK) -> Header:
    """Write ``r1cs`` to ``path`` in the compiled format, version 2 (atomically); ``meta`` is a small JSON-able dict
    stored in the header (the circuit name, preset, parameters); ``block``: bytes per checksum block (a multiple of
    64 in [4096, 2^40]). Returns the header written."""
    path = os.fspath(path)
    if not _block_ok(block):
        raise ValueError(f"compiled.save: block must be a multiple of {ALIGN} in [{MIN_HASH_BLOCK}, "
                         f"{MAX_HASH_BLOCK}], got {block}")
    names = _names_blob(r1cs)
    hdr = _header_for(r1cs, meta, names, block)
    meta_b = _meta_bytes(meta)
    fixed = FIXED.pack(MAGIC, VERSION, hdr.ptr_width, hdr.file_size, hdr.data_offset, hdr.num_inputs, hdr.num_aux,
                       hdr.num_constraints, hdr.appended_constraints, *hdr.nnz, hdr.num_coeffs, hdr.ns_width,
                       hdr.label_width, hdr.names_bytes, len(meta_b), block, bytes.fromhex(hdr.digest))
    arrays = []
    for mat in r1cs.matrices():
        arrays += [mat.indptr, mat.cols, mat.coeff_ids]
    coeffs = np.frombuffer(b"".join(int(c).to_bytes(32, "little") for c in r1cs.coeffs), np.uint8)
    arrays += [coeffs, r1cs.row_namespace, r1cs.row_label, np.frombuffer(names, np.uint8)]
    with atomic_file(path) as fh:
        w = _Writer(fh)
        w.write(fixed)
        w.write(meta_b)
        for (name, off, count, dtype), arr in zip(hdr.sections()[:-1], arrays):
            if np.asarray(arr).size != count:
                raise AssertionError(f"compiled writer: {name} has {np.asarray(arr).size} entries, not {count}")
            w.pad_to(off)
            w.array(arr, dtype)
        covered = hdr.sections()[-1][1]
        w.pad_to(covered)
        fh.flush()
        # the file as written, mapped back (page cache) and hashed block by block in parallel
        with mmap.mmap(fh.fileno(), covered, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                digests = _block_digests(view, covered, block)
            finally:
                view.release()
        listed = b"".join(digests)
        fh.write(listed + hashlib.sha256(listed).digest())
        if covered + len(listed) + 32 != hdr.file_size:
            raise AssertionError(f"compiled writer: wrote {covered + len(listed) + 32} bytes, not {hdr.file_size}")
    return hdr


# -- reading ---------------------------------------------------------------------------------------------------------
def _parse_header(fh, path: str, size: int) -> Header:
    def bad(what: str) -> FormatError:
        return FormatError(f"compiled circuit {path}: {what}")

    raw = fh.read(FIXED.size)
    if len(raw) >= len(MAGIC) and raw[:len(MAGIC)] != MAGIC:
        raise bad(f"not a compiled circuit file (magic {raw[:len(MAGIC)]!r}, expected {MAGIC!r})")
    if len(raw) < FIXED.size:
        raise bad(f"truncated inside the header ({size} bytes, the fixed header alone is {FIXED.size})")
    (_, version, ptr_w, fsize, data_off, n_in, n_aux, m, appended, nnz_a, nnz_b, nnz_c, k, ns_w, lb_w, names_b,
     meta_len, reserved, digest) = FIXED.unpack(raw)
    if version not in VERSIONS:
        raise bad(f"format version {version}; this cuzk_jax reads versions {', '.join(map(str, VERSIONS))} "
                  f"(rebuild the file)")
    if fsize != size:
        kind = "truncated" if size < fsize else "longer than its header says"
        raise bad(f"{kind}: the header says {fsize} bytes, the file holds {size}")
    if ptr_w not in _PTR_DTYPE or ns_w not in _ID_DTYPE or lb_w not in _ID_DTYPE:
        raise bad(f"corrupt header: widths indptr={ptr_w}, namespace ids={ns_w}, label ids={lb_w}")
    block = reserved if version >= 2 else 0  # version 1: a reserved zero; version 2: the checksum block size
    if version == 1 and reserved != 0 or version >= 2 and not _block_ok(block):
        raise bad(f"corrupt header: checksum block field {reserved} (version {version})")
    if meta_len > MAX_META or data_off != _align(FIXED.size + meta_len):
        raise bad(f"corrupt header (metadata {meta_len} bytes, data offset {data_off})")
    if n_in < 1 or n_in + n_aux > _INT32_MAX or appended > m:
        raise bad(f"corrupt header: inputs={n_in}, aux={n_aux}, constraints={m}, appended={appended}")
    if ptr_w == 4 and nnz_a + nnz_b + nnz_c > _INT32_MAX:
        raise bad(f"corrupt header: int32 row pointers for {nnz_a + nnz_b + nnz_c} nonzeros")
    hdr = Header(version=version, ptr_width=ptr_w, file_size=fsize, data_offset=data_off, num_inputs=n_in,
                 num_aux=n_aux, num_constraints=m, appended_constraints=appended, nnz=(nnz_a, nnz_b, nnz_c),
                 num_coeffs=k, ns_width=ns_w, label_width=lb_w, names_bytes=names_b, meta={}, digest=digest.hex(),
                 hash_block=block)
    need = hdr.expected_size()
    if need != size:
        raise bad(f"corrupt header: its counts (constraints={m}, nnz={hdr.nnz}, coefficients={k}) need {need} "
                  f"bytes, the file holds {size}")
    meta_raw = fh.read(meta_len)
    try:
        meta = json.loads(meta_raw.decode()) if meta_len else {}
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        raise bad(f"corrupt metadata ({e})") from None
    return dataclasses.replace(hdr, meta=meta)


def read_header(path: str | os.PathLike) -> Header:
    """The validated header of a compiled circuit file (reads 160 bytes + the metadata; no checksum)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            return _parse_header(fh, path, os.fstat(fh.fileno()).st_size)
    except OSError as e:
        raise FormatError(f"compiled circuit {path}: cannot read ({e.strerror or e})") from None


def _check_range(arr: np.ndarray, lo: int, hi: int) -> bool:
    """``lo <= arr < hi`` for every element, a bounded chunk at a time (no whole-array temporaries)."""
    for i in range(0, arr.size, _CHECK_CHUNK):
        c = arr[i:i + _CHECK_CHUNK]
        if c.size and (int(c.min()) < lo or int(c.max()) >= hi):
            return False
    return True


def _monotone(indptr: np.ndarray) -> bool:
    for i in range(0, indptr.size - 1, _CHECK_CHUNK):
        c = indptr[i:i + _CHECK_CHUNK + 1]
        if np.any(c[1:] < c[:-1]):
            return False
    return True


def _verify(mm, hdr: Header) -> str | None:
    """What is wrong with the checksum of the mapped file (``None``: it matches). Version 1: one SHA-256 streamed
    over the file; version 2: the digest of the block list, then every block, hashed by several threads."""
    _, csum_off, nbytes, _ = hdr.sections()[-1]
    view = memoryview(mm)
    try:
        if hdr.version == 1:
            h = hashlib.sha256()
            for i in range(0, csum_off, _CHUNK):
                h.update(view[i:min(i + _CHUNK, csum_off)])
            return None if h.digest() == bytes(view[csum_off:csum_off + 32]) else \
                "checksum mismatch: the file is corrupt"
        listed = bytes(view[csum_off:csum_off + nbytes - 32])
        if hashlib.sha256(listed).digest() != bytes(view[csum_off + nbytes - 32:csum_off + nbytes]):
            return "checksum mismatch in the list of block digests: the file is corrupt"
        n, block = len(listed) // 32, hdr.hash_block
        with concurrent.futures.ThreadPoolExecutor(checksum.threads()) as pool:
            gen = checksum.block_digests(view, 0, csum_off, block, pool)
            try:
                for i, d in enumerate(gen):
                    if d != listed[32 * i:32 * i + 32]:
                        return (f"checksum mismatch in block {i} of {n} (bytes {i * block} to "
                                f"{min(csum_off, (i + 1) * block)}): the file is corrupt")
            finally:
                gen.close()
        return None
    finally:
        view.release()


def load_with_header(path: str | os.PathLike, verify_checksum: bool = True) -> tuple[R1CS, Header]:
    """``(R1CS, Header)`` of a compiled circuit file; see :func:`load`."""
    path = os.fspath(path)

    def bad(what: str) -> FormatError:
        return FormatError(f"compiled circuit {path}: {what}")

    try:
        fh = open(path, "rb")
    except OSError as e:
        raise bad(f"cannot read ({e.strerror or e})") from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        hdr = _parse_header(fh, path, size)  # everything checked against the size before anything is mapped
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            raise bad(f"cannot map ({e})") from None
    sections = hdr.sections()
    if verify_checksum:
        problem = _verify(mm, hdr)
        if problem:
            raise bad(problem)
    arrs = {name: np.frombuffer(mm, dtype=dtype, count=count, offset=off)
            for name, off, count, dtype in sections[:-1]}
    m, nv, k = hdr.num_constraints, hdr.num_vars, hdr.num_coeffs
    try:
        names = json.loads(arrs.pop("names").tobytes().decode())
        namespaces, labels, input_names = (tuple(names[key]) for key in ("namespaces", "labels", "input_names"))
        if not all(isinstance(s, str) for s in namespaces + labels + input_names):
            raise ValueError("names must be strings")
    except (ValueError, KeyError, TypeError) as e:
        raise bad(f"corrupt names section ({e})") from None
    raw = arrs.pop("coeffs").tobytes()
    coeffs = tuple(int.from_bytes(raw[i:i + 32], "little") for i in range(0, len(raw), 32))
    if any(c >= R for c in coeffs):
        raise bad("corrupt coefficient table: an entry is not a canonical Fr element (>= r)")
    mats = []
    for mat, nnz in zip("ABC", hdr.nnz):
        ptr, cols, cids = arrs[f"{mat}.indptr"], arrs[f"{mat}.cols"], arrs[f"{mat}.coeff_ids"]
        if int(ptr[0]) != 0 or int(ptr[-1]) != nnz or not _monotone(ptr):
            raise bad(f"corrupt {mat}.indptr (must rise from 0 to nnz={nnz})")
        if not _check_range(cols, 0, nv):
            raise bad(f"corrupt {mat}.cols: a column outside [0, {nv})")
        if not _check_range(cids, 0, k):
            raise bad(f"corrupt {mat}.coeff_ids: an id outside the coefficient table [0, {k})")
        mats.append(SparseMatrix(indptr=ptr, cols=cols, coeff_ids=cids))
    if m and not _check_range(arrs["row_namespace"], 0, len(namespaces)):
        raise bad("corrupt row namespace ids: outside the namespace table")
    if m and not _check_range(arrs["row_label"], 0, len(labels)):
        raise bad("corrupt row label ids: outside the label table")
    r1cs = R1CS(num_inputs=hdr.num_inputs, num_aux=hdr.num_aux, A=mats[0], B=mats[1], C=mats[2], coeffs=coeffs,
                namespaces=namespaces, labels=labels, row_namespace=arrs["row_namespace"],
                row_label=arrs["row_label"], input_names=input_names,
                appended_constraints=hdr.appended_constraints)
    if verify_checksum:  # the bytes are what save() wrote from an R1CS with this digest (read-only views)
        object.__setattr__(r1cs, "_digest", hdr.digest)
    return r1cs, hdr


def load(path: str | os.PathLike, verify_checksum: bool = True) -> R1CS:
    """The R1CS of a compiled circuit file, its matrices memory-mapped (read-only, not copied).

    Raises one :class:`~cuzk_jax.errors.FormatError` naming the file and the problem for a missing, truncated,
    corrupt (checksum), wrong-magic, wrong-version or inconsistent file. ``verify_checksum=False`` skips the
    SHA-256 pass over the file (the header, layout and range checks still run; the digest is then recomputed from
    the arrays when asked for).
    """
    return load_with_header(path, verify_checksum)[0]


def summary(path: str | os.PathLike) -> dict:
    """Header figures of a compiled file: counts, widths, metadata, file bytes and bytes per constraint."""
    hdr = read_header(path)
    m = hdr.num_constraints
    return {"version": hdr.version, "constraints": m, "inputs": hdr.num_inputs, "aux": hdr.num_aux,
            "appended_constraints": hdr.appended_constraints, "nnz": list(hdr.nnz), "coeffs": hdr.num_coeffs,
            "indptr_bytes": hdr.ptr_width, "namespace_id_bytes": hdr.ns_width, "label_id_bytes": hdr.label_width,
            "meta": hdr.meta, "digest": hdr.digest, "file_bytes": hdr.file_size, "hash_block": hdr.hash_block,
            "bytes_per_constraint": hdr.file_size / max(m, 1)}
