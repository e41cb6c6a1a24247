"""The compiled circuit form on disk (circuits/compiled.py) and its reuse by ``Circuit.r1cs`` (issue 18 item 1).

Round trips on several circuits/presets (equal digest, matrices, coefficient table, constraint names), the loaded
R1CS checks witnesses exactly as the builder's (same failing index and gadget name), and every damaged file --
truncated anywhere, a flipped byte, wrong magic or version, a header claiming more data than the file holds -- is
one FormatError without a large allocation. Files go to ``tmp_path`` only.
"""

import dataclasses
import hashlib
import io
import logging
import mmap
import os
import struct
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cuzk_jax.circuits import Circuit, Unsatisfied, compiled, get_circuit
from cuzk_jax.circuits import base as circuits_base
from cuzk_jax.circuits.gadgets.num import alloc_input_num, alloc_num, mul
from cuzk_jax.circuits.r1cs import R1CS, SparseMatrix
from cuzk_jax.errors import FormatError
from cuzk_jax.reference.constants import R

SHAPES = [("cube", "default"), ("merkle_inclusion", "poseidon2_d8"), ("porep_like", "tiny")]


class ManyNames(Circuit):
    """300 namespaces (uint16 namespace ids), a unicode label and a large coefficient: the corners of the format."""

    name = "test_many_names"
    PRESETS = {"default": {"n": 300}}

    def synthesize(self, cs, inputs=None):
        x = alloc_num(cs, None if inputs is None else 5, "x")
        y = alloc_input_num(cs, None if inputs is None else pow(5, 2 ** self.params["n"], R), "y")
        for i in range(self.params["n"]):
            with cs.namespace(f"sq_{i}"):
                x = mul(cs, x, x, "x² ✓")
        cs.enforce(x * (R - 3), 1, y * (R - 3), "big coefficient")


@pytest.fixture(scope="module")
def built():
    """{(circuit, preset): (circuit, R1CS)} synthesized once per module."""
    out = {}
    for name, preset in SHAPES:
        c = get_circuit(name, preset)
        out[name, preset] = (c, c.r1cs(cache=False))
    mn = ManyNames()
    out["many", "names"] = (mn, mn.r1cs(cache=False))
    return out


def _assert_equal(a, b):
    assert a.digest() == b.digest()
    assert dataclasses.replace(b).digest() == a.digest()  # recomputed from the loaded arrays, not the header
    assert (a.num_inputs, a.num_aux, a.num_constraints, a.appended_constraints) == \
        (b.num_inputs, b.num_aux, b.num_constraints, b.appended_constraints)
    for ma, mb in zip(a.matrices(), b.matrices()):
        for x, y in ((ma.indptr, mb.indptr), (ma.cols, mb.cols), (ma.coeff_ids, mb.coeff_ids)):
            assert np.array_equal(x, y)
    assert a.coeffs == b.coeffs and a.input_names == b.input_names
    assert a.namespaces == b.namespaces and a.labels == b.labels
    assert np.array_equal(a.row_namespace, b.row_namespace) and np.array_equal(a.row_label, b.row_label)
    assert [a.constraint_name(i) for i in range(a.num_constraints)] == \
        [b.constraint_name(i) for i in range(b.num_constraints)]


@pytest.mark.parametrize("key", SHAPES + [("many", "names")])
def test_round_trip(built, tmp_path, key):
    _, r1cs = built[key]
    path = tmp_path / "c.r1cs"
    hdr = compiled.save(r1cs, path, {"circuit": key[0]})
    assert sorted(os.listdir(tmp_path)) == ["c.r1cs"]  # the temporary file was renamed, nothing left behind
    assert os.path.getsize(path) == hdr.file_size == compiled.file_size(r1cs, {"circuit": key[0]})
    loaded, h2 = compiled.load_with_header(path)
    _assert_equal(r1cs, loaded)
    assert h2.meta == {"circuit": key[0]} and h2.digest == r1cs.digest()
    # memory-mapped, not copied: read-only views that do not own their data
    for arr in (loaded.A.indptr, loaded.B.cols, loaded.C.coeff_ids, loaded.row_label):
        assert not arr.flags.writeable and not arr.flags.owndata
    _assert_equal(r1cs, compiled.load(path, verify_checksum=False))
    # the appended input constraints (Groth16's view) survive too
    ext = r1cs.with_input_constraints()
    compiled.save(ext, path)
    _assert_equal(ext, compiled.load(path))
    assert compiled.load(path).with_input_constraints().digest() == ext.with_input_constraints().digest()
    s = compiled.summary(path)
    assert s["file_bytes"] == os.path.getsize(path) and s["constraints"] == ext.num_constraints
    assert s["bytes_per_constraint"] == pytest.approx(compiled.bytes_per_constraint(ext))
    if key == ("many", "names"):
        assert loaded.row_namespace.dtype == np.uint16 and "x² ✓" in loaded.constraint_name(5)


def test_int64_row_pointers(built, tmp_path, monkeypatch):
    """Past 2^31 nonzeros the row pointers are int64 (forced here by lowering the limit)."""
    _, r1cs = built["cube", "default"]
    monkeypatch.setattr(compiled, "_INT32_MAX", 8)  # cube: 5 variables, 11 nonzeros
    compiled.save(r1cs, tmp_path / "c.r1cs")
    loaded = compiled.load(tmp_path / "c.r1cs")
    assert loaded.A.indptr.dtype == np.int64
    _assert_equal(r1cs, loaded)


@pytest.mark.parametrize("key", SHAPES)
def test_loaded_r1cs_checks_witnesses_like_the_builder(built, tmp_path, key):
    circuit, r1cs = built[key]
    compiled.save(r1cs, tmp_path / "c.r1cs")
    loaded = compiled.load(tmp_path / "c.r1cs")
    w = circuit.witness(circuit.sample_inputs(0))
    assert loaded.is_satisfied(w)
    for column in (r1cs.num_inputs, r1cs.num_vars - 1):
        bad = w.with_value(column, w.z[column] + 1)
        with pytest.raises(Unsatisfied) as want:
            r1cs.check(bad)
        with pytest.raises(Unsatisfied) as got:
            loaded.check(bad)
        assert (got.value.index, got.value.name) == (want.value.index, want.value.name)


# -- damaged files ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=[compiled.HASH_BLOCK, 4096], ids=["one-block", "4k-blocks"])
def good_file(built, tmp_path_factory, request):
    """porep_like/tiny saved with the default checksum block (one block) and with 4 KiB blocks (~90 blocks)."""
    path = tmp_path_factory.mktemp("compiled") / "good.r1cs"
    compiled.save(built["porep_like", "tiny"][1], path, {"circuit": "porep_like"}, block=request.param)
    return path.read_bytes()


def _write(tmp_path, data: bytes):
    p = tmp_path / "bad.r1cs"
    p.write_bytes(data)
    return p


def _load_error(path) -> str:
    with pytest.raises(FormatError) as e:
        compiled.load(path)
    assert str(path) in str(e.value)
    return str(e.value)


def test_truncated(good_file, tmp_path):
    hdr_end = compiled.read_header(_write(tmp_path, good_file)).data_offset
    covered = compiled.read_header(_write(tmp_path, good_file)).sections()[-1][1]  # where the checksum starts
    for cut in (0, 4, 8, 100, 159, 160, hdr_end - 1, hdr_end + 1, len(good_file) // 2, covered, covered + 32,
                len(good_file) - 33, len(good_file) - 1):
        msg = _load_error(_write(tmp_path, good_file[:cut]))
        assert "truncated" in msg, (cut, msg)
    assert "longer" in _load_error(_write(tmp_path, good_file + b"\0" * 64))


def test_flipped_byte_wrong_magic_wrong_version(good_file, tmp_path):
    body = bytearray(good_file)
    body[len(body) // 2] ^= 0x01
    assert "checksum" in _load_error(_write(tmp_path, bytes(body)))
    assert "magic" in _load_error(_write(tmp_path, b"NOTR1CS!" + good_file[8:]))
    v2 = good_file[:8] + struct.pack("<I", compiled.VERSION + 1) + good_file[12:]
    assert f"version {compiled.VERSION + 1}" in _load_error(_write(tmp_path, v2))
    assert "cannot read" in _load_error(tmp_path / "missing.r1cs")


def _patched(data: bytes, **fields) -> bytes:
    """The file with header fields replaced (names as in the fixed-header struct, in order)."""
    names = ["magic", "version", "ptr_width", "file_size", "data_offset", "num_inputs", "num_aux", "m", "appended",
             "nnz_a", "nnz_b", "nnz_c", "k", "ns_w", "lb_w", "names_bytes", "meta_len", "reserved", "digest"]
    vals = dict(zip(names, compiled.FIXED.unpack(data[:compiled.FIXED.size])))
    vals.update(fields)
    return compiled.FIXED.pack(*(vals[n] for n in names)) + data[compiled.FIXED.size:]


def test_header_claiming_more_than_the_file_holds(good_file, tmp_path):
    """2^40 entries claimed by a small file: one FormatError, and no allocation near that size."""
    huge = 1 << 40
    cases = [_patched(good_file, nnz_a=huge),                      # counts disagree with the (true) file size
             _patched(good_file, m=huge, file_size=huge * 64),     # a consistent-looking header, a small file
             _patched(good_file, k=huge),
             _patched(good_file, meta_len=huge),
             _patched(good_file, ptr_width=3)]
    for data in cases:
        path = _write(tmp_path, data)
        tracemalloc.start()
        try:
            _load_error(path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20, peak


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_truncation_or_flip_is_one_format_error(good_file, tmp_path, data):
    n = len(good_file)
    if data.draw(st.booleans(), "truncate"):
        damaged = good_file[:data.draw(st.integers(0, n - 1), "cut")]
    else:
        at = data.draw(st.integers(0, n - 1), "at")
        bit = data.draw(st.integers(0, 7), "bit")
        damaged = good_file[:at] + bytes([good_file[at] ^ (1 << bit)]) + good_file[at + 1:]
    _load_error(_write(tmp_path, damaged))


# -- format version 2: the block checksum; version-1 files -------------------------------------------------------
def test_block_checksum_layout(built, tmp_path):
    """The checksum section is the SHA-256 of every block before it, then the SHA-256 of that list."""
    _, r1cs = built["porep_like", "tiny"]
    hdr = compiled.save(r1cs, tmp_path / "c.r1cs", block=8192)
    data = (tmp_path / "c.r1cs").read_bytes()
    _, covered, nbytes, _ = hdr.sections()[-1]
    n = hdr.num_blocks()
    assert hdr.version == 2 and hdr.hash_block == 8192 and n == -(-covered // 8192) > 10
    assert len(data) == covered + nbytes == covered + 32 * (n + 1) == hdr.file_size
    listed = b"".join(hashlib.sha256(data[i:min(i + 8192, covered)]).digest() for i in range(0, covered, 8192))
    assert data[covered:] == listed + hashlib.sha256(listed).digest()
    assert compiled.read_header(tmp_path / "c.r1cs") == hdr
    assert compiled.summary(tmp_path / "c.r1cs")["hash_block"] == 8192
    for bad in (0, 100, 4095, 4096 + 1, 1 << 41):
        with pytest.raises(ValueError):
            compiled.save(r1cs, tmp_path / "x.r1cs", block=bad)


def test_corrupt_block_is_found_and_named(built, tmp_path):
    """A byte flipped in the middle of a later block: the error names that block; the digest list is checked too."""
    _, r1cs = built["porep_like", "tiny"]
    path = tmp_path / "c.r1cs"
    hdr = compiled.save(r1cs, path, block=4096)
    good = path.read_bytes()
    n = hdr.num_blocks()
    _, covered, _, _ = hdr.sections()[-1]
    for i in (n - 3, n // 2, 1):
        data = bytearray(good)
        data[i * 4096 + 2048] ^= 0x10
        msg = _load_error(_write(tmp_path, bytes(data)))
        assert f"checksum mismatch in block {i} of {n}" in msg, msg
        # the header, layout and range checks still pass for a flipped column / id: only the checksum sees it
    for at in (covered, covered + 32 * (n // 2) + 7, len(good) - 1):  # a stored block digest, the list's digest
        data = bytearray(good)
        data[at] ^= 0x01
        assert "list of block digests" in _load_error(_write(tmp_path, bytes(data)))
    # the block-size field (the former reserved word): range-checked, fixes the layout, and covered by block 0
    assert "corrupt header" in _load_error(_write(tmp_path, _patched(good, reserved=4096 * 3)))
    one_block = compiled.save(r1cs, tmp_path / "one.r1cs").file_size  # default block: the whole file is block 0
    assert "block 0 of 1" in _load_error(_write(tmp_path, _patched((tmp_path / "one.r1cs").read_bytes(),
                                                                   reserved=compiled.HASH_BLOCK * 2)))
    assert one_block < compiled.HASH_BLOCK
    assert "block field" in _load_error(_write(tmp_path, _patched(good, reserved=100)))
    assert "block field" in _load_error(_write(tmp_path, _patched(good, reserved=0)))


def _as_v1(data: bytes) -> bytes:
    """A version-2 file rewritten as version 1 would have written it (reserved zero, one trailing SHA-256)."""
    hdr = compiled._parse_header(io.BytesIO(data), "v2", len(data))
    covered = hdr.sections()[-1][1]
    body = _patched(data[:covered], version=1, reserved=0, file_size=covered + 32)
    return body + hashlib.sha256(body).digest()


def test_version_1_files_still_load(built, tmp_path):
    for key in (("porep_like", "tiny"), ("many", "names")):
        _, r1cs = built[key]
        compiled.save(r1cs, tmp_path / "c.r1cs", {"circuit": key[0]})
        v1 = _write(tmp_path, _as_v1((tmp_path / "c.r1cs").read_bytes()))
        loaded, hdr = compiled.load_with_header(v1)
        assert hdr.version == 1 and hdr.hash_block == 0 and hdr.file_size == os.path.getsize(v1)
        assert hdr.meta == {"circuit": key[0]}
        _assert_equal(r1cs, loaded)
        _assert_equal(r1cs, compiled.load(v1, verify_checksum=False))
    data = v1.read_bytes()
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x01
    assert "checksum mismatch" in _load_error(_write(tmp_path, bytes(flipped)))
    assert "truncated" in _load_error(_write(tmp_path, data[:-1]))
    assert "block field" in _load_error(_write(tmp_path, _patched(data, reserved=4096)))  # v1: reserved stays 0


def test_version_1_cache_file_is_left_and_rebuilt(built, tmp_path, monkeypatch):
    """The cache key covers the format version: a version-1 cache file has another name, so the cache builds (once)
    a version-2 file next to it and never reads the old one (it stays, loadable, until removed)."""
    _, want = built["porep_like", "tiny"]
    c = get_circuit("porep_like", "tiny")
    new_path = c.compiled_path(tmp_path)
    monkeypatch.setattr(compiled, "VERSION", 1)
    old_path, old_meta = c.compiled_path(tmp_path), c.compiled_meta()
    monkeypatch.setattr(compiled, "VERSION", 2)
    assert old_path != new_path and old_meta["format"] == 1
    compiled.save(want, old_path, old_meta)
    old = _as_v1(open(old_path, "rb").read())
    open(old_path, "wb").write(old)
    got = get_circuit("porep_like", "tiny").r1cs(cache_dir=tmp_path)
    assert got.digest() == want.digest()
    assert compiled.read_header(new_path).version == 2 and compiled.read_header(new_path).meta == c.compiled_meta()
    assert open(old_path, "rb").read() == old and compiled.load(old_path).digest() == want.digest()


# -- load speed ------------------------------------------------------------------------------------------------------
def synthetic_r1cs(num_constraints: int, terms: int = 2, num_vars: int = 1 << 20) -> R1CS:
    """A random R1CS of ``terms`` nonzeros per row in each matrix (~62 bytes per constraint at 2 terms, as the
    SHA-256 presets): for sizing compiled files, not for proving."""
    rng = np.random.default_rng(0)
    nnz = num_constraints * terms
    mat = SparseMatrix(indptr=np.arange(0, nnz + 1, terms, dtype=np.int32),
                       cols=rng.integers(0, num_vars, nnz, dtype=np.int32),
                       coeff_ids=rng.integers(0, 2, nnz, dtype=np.int32))
    zeros = np.zeros(num_constraints, np.uint8)
    return R1CS(num_inputs=1, num_aux=num_vars - 1, A=mat, B=mat, C=mat, coeffs=(1, R - 1), namespaces=("n",),
                labels=("l",), row_namespace=zeros, row_label=zeros)


def measure_load(directory, target_bytes: int, block: int = compiled.HASH_BLOCK, reps: int = 3) -> dict:
    """Save a synthetic R1CS of about ``target_bytes`` to ``directory`` and time, with a warm page cache (best of
    ``reps``): ``compiled.load`` with and without the checksum, the block-parallel checksum alone, and one
    SHA-256 streamed over the same bytes (version 1's checksum) for comparison. Returns seconds and GB/s."""
    r1cs = synthetic_r1cs(max(1, target_bytes // 62))
    path = os.path.join(os.fspath(directory), "synthetic.r1cs")
    t0 = time.perf_counter()
    hdr = compiled.save(r1cs, path, block=block)
    save_s = time.perf_counter() - t0
    del r1cs

    def best(fn):
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    def v1_stream():
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            h, view = hashlib.sha256(), memoryview(mm)
            for i in range(0, len(mm), 16 << 20):
                h.update(view[i:i + (16 << 20)])
            view.release()

    def blocks_only():
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            assert compiled._verify(mm, hdr) is None

    size = hdr.file_size
    res = {"bytes": size, "blocks": hdr.num_blocks(), "threads": compiled.checksum.threads(), "save_s": save_s,
           "load_s": best(lambda: compiled.load(path)), "load_nocheck_s": best(lambda: compiled.load(path, False)),
           "checksum_s": best(blocks_only), "v1_single_stream_s": best(v1_stream)}
    for k in ("load_s", "load_nocheck_s", "checksum_s", "v1_single_stream_s"):
        res[k[:-2] + "_gbps"] = size / res[k] / 1e9
    os.unlink(path)
    return res


def test_measure_load_small(tmp_path):
    res = measure_load(tmp_path, 16 << 20, block=1 << 20, reps=1)
    assert res["blocks"] >= 16 and res["load_s"] > 0
    print(res)


@pytest.mark.slow
def test_measure_load_1gb(tmp_path):
    """~1 GB synthetic compiled file (``pytest -s -m slow -k measure_load_1gb`` prints the figures)."""
    res = measure_load(tmp_path, 1 << 30)
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()})


# -- Circuit.r1cs and the cache directory ----------------------------------------------------------------------------
@pytest.fixture
def no_home(tmp_path, monkeypatch):
    """No CUZK_JAX_CIRCUIT_DIR and HOME pointing into tmp_path: nothing can reach the user's cache."""
    monkeypatch.delenv(circuits_base.CIRCUIT_DIR_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _no_synthesis(monkeypatch, cls):
    def fail(self, cs, inputs=None):
        raise AssertionError("synthesized although a compiled file was present")
    monkeypatch.setattr(cls, "synthesize", fail)


def test_circuit_cache_dir_env_and_reuse(built, tmp_path, monkeypatch, no_home):
    _, want = built["porep_like", "tiny"]
    get_circuit("porep_like", "tiny").r1cs()  # default: no file cache without the env or cache_dir
    get_circuit("porep_like", "tiny").r1cs(cache=False)
    assert not no_home.exists()
    cdir = tmp_path / "circuits"
    monkeypatch.setenv(circuits_base.CIRCUIT_DIR_ENV, str(cdir))
    c = get_circuit("porep_like", "tiny")
    first = c.r1cs()
    path = c.compiled_path()
    assert os.path.dirname(path) == str(cdir) and os.path.basename(path).startswith("porep_like-tiny-")
    assert os.path.exists(path) and first.digest() == want.digest()
    assert compiled.read_header(path).meta == c.compiled_meta()
    # a second instance (another run) maps the file instead of synthesizing
    c2 = get_circuit("porep_like", "tiny")
    orig = type(c2).synthesize
    _no_synthesis(monkeypatch, type(c2))
    _assert_equal(want, c2.r1cs())
    monkeypatch.setattr(type(c2), "synthesize", orig)
    # other parameters -> another file; an explicit cache_dir wins over the environment
    other = get_circuit("porep_like", "tiny", layers=2)
    assert other.compiled_path(tmp_path) != get_circuit("porep_like", "tiny").compiled_path(tmp_path)
    c3 = get_circuit("cube")
    c3.r1cs(cache_dir=tmp_path / "explicit")
    assert os.listdir(tmp_path / "explicit") == [os.path.basename(c3.compiled_path(tmp_path / "explicit"))]
    assert not no_home.exists()


def test_cache_true_uses_the_default_directory(no_home):
    c = get_circuit("cube")
    c.r1cs(cache=True)
    assert os.path.dirname(c.compiled_path()) == str(no_home / ".cache" / "cuzk_jax" / "circuits")
    assert os.path.exists(c.compiled_path())


def test_corrupt_or_foreign_cache_file_is_rebuilt(built, tmp_path, caplog):
    _, want = built["porep_like", "tiny"]
    c = get_circuit("porep_like", "tiny")
    path = c.compiled_path(tmp_path)
    compiled.save(want, path, c.compiled_meta())
    data = bytearray(open(path, "rb").read())
    data[-100] ^= 0xFF
    open(path, "wb").write(bytes(data))
    with caplog.at_level(logging.WARNING, logger=circuits_base.__name__):
        got = get_circuit("porep_like", "tiny").r1cs(cache_dir=tmp_path)
    assert got.digest() == want.digest() and "checksum" in caplog.text
    assert compiled.load(path).digest() == want.digest()  # rewritten
    # a file under this name holding another circuit (header metadata differs) is rebuilt as well
    compiled.save(built["cube", "default"][1], path, {"circuit": "cube"})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=circuits_base.__name__):
        assert get_circuit("porep_like", "tiny").r1cs(cache_dir=tmp_path).digest() == want.digest()
    assert "built for" in caplog.text and compiled.read_header(path).meta == c.compiled_meta()


def test_failed_save_keeps_the_old_file(built, tmp_path, monkeypatch):
    _, r1cs = built["cube", "default"]
    path = tmp_path / "c.r1cs"
    compiled.save(r1cs, path)
    before = path.read_bytes()

    def boom(self, arr, dtype):
        raise OSError("disk full")
    monkeypatch.setattr(compiled._Writer, "array", boom)
    with pytest.raises(OSError):
        compiled.save(built["porep_like", "tiny"][1], path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["c.r1cs"]
