"""The compiled circuit form on disk (circuits/compiled.py) and its reuse by ``Circuit.r1cs`` (issue 18 item 1).

Round trips on several circuits/presets (equal digest, matrices, coefficient table, constraint names), the loaded
R1CS checks witnesses exactly as the builder's (same failing index and gadget name), and every damaged file --
truncated anywhere, a flipped byte, wrong magic or version, a header claiming more data than the file holds -- is
one FormatError without a large allocation. Files go to ``tmp_path`` only.
"""

import dataclasses
import logging
import os
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cuzk_jax.circuits import Circuit, Unsatisfied, compiled, get_circuit
from cuzk_jax.circuits import base as circuits_base
from cuzk_jax.circuits.gadgets.num import alloc_input_num, alloc_num, mul
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
@pytest.fixture(scope="module")
def good_file(built, tmp_path_factory):
    path = tmp_path_factory.mktemp("compiled") / "good.r1cs"
    compiled.save(built["porep_like", "tiny"][1], path, {"circuit": "porep_like"})
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
    for cut in (0, 4, 8, 100, 159, 160, hdr_end - 1, hdr_end + 1, len(good_file) // 2, len(good_file) - 1):
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
