"""The raw proving-key format (cuzk_jax.groth16.keyfile): round trip bit for bit, and every kind of damage -- a
truncated file, trailing bytes, a flipped byte in a section or in the header, a header whose layout disagrees with
its sizes, points off the curve or not reduced behind valid checksums -- gives one KeyFormatError; a failed save
leaves no file behind. The key cache reads its older units (manifest version 1) as they are."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import struct

import numpy as np
import pytest

from cuzk_jax import keycache
from cuzk_jax.circuits import base
from cuzk_jax.errors import KeyFormatError
from cuzk_jax.groth16 import generator, keyfile


@pytest.fixture(scope="module")
def cube():
    circuit = base.get_circuit("cube")
    r1cs = circuit.r1cs()
    return circuit, r1cs, generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(11), method="host")


@pytest.fixture
def saved(tmp_path, cube):
    path = str(tmp_path / "k.pk")
    size = keyfile.save(cube[2], path, block=256)  # small blocks: sections span several
    return path, size


def _fix_digests(path):
    """Recompute every section digest into the header (as a forger who knows the format would)."""
    with open(path, "rb") as fh:
        data = memoryview(fh.read())

    def edit(h):
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            ds = keyfile._section_digests(data, [(s["offset"], s["nbytes"]) for s in h["sections"]],
                                          h["hash_block"], pool)
        for s, d in zip(h["sections"], ds):
            s["sha256"] = d

    _header_unchecked_edit(path, edit)


def _header_unchecked_edit(path, edit):
    with open(path, "rb") as fh:
        magic, version, n = struct.unpack("<8sII", fh.read(16))
        header = json.loads(fh.read(n))
    edit(header)
    head = json.dumps(header, separators=(",", ":")).encode()
    prefix = struct.pack("<8sII", magic, version, len(head)) + head
    with open(path, "r+b") as fh:
        fh.write(prefix + hashlib.sha256(prefix).digest())


def _section(path, name):
    header, _, _ = keyfile.read_header(path)
    return next(s for s in header["sections"] if s["name"] == name)


def test_round_trip_bit_for_bit(saved, cube):
    path, size = saved
    pk = cube[2]
    assert os.path.getsize(path) == size
    header, _, _ = keyfile.read_header(path)
    assert [s["name"] for s in header["sections"]][:3] == ["a_query.x", "a_query.y", "a_query.inf"]
    assert all(s["offset"] % keyfile.ALIGN == 0 for s in header["sections"])
    assert _section(path, "b_g2_query.x")["shape"] == [2, 12, pk.num_vars]
    got = keyfile.load(path)
    assert got.to_bytes() == pk.to_bytes()
    # the x limbs on disk are the device's Montgomery limbs, as they are
    s = _section(path, "a_query.x")
    with open(path, "rb") as fh:
        fh.seek(s["offset"])
        raw = np.frombuffer(fh.read(s["nbytes"]), "<u4").reshape(s["shape"])
    assert np.array_equal(raw, np.asarray(pk.a_query.x))
    assert keyfile.file_size(pk.num_inputs, pk.num_aux, pk.domain_size) <= size
    assert keyfile.is_raw_key(path)


def test_h_query_forms_round_trip(tmp_path, cube):
    """The header's ``h_form`` travels with the key: the setup's Lagrange H query (``domain_size`` points) and
    bellman's coefficients (``domain_size - 1``); a coefficient key written before the field (no ``h_form`` in
    its header) loads as coefficients."""
    pk = cube[2]
    assert pk.h_form == "lagrange"
    lpath = str(tmp_path / "l.pk")
    keyfile.save(pk, lpath)
    header, _, _ = keyfile.read_header(lpath)
    assert header["h_form"] == "lagrange" and _section(lpath, "h_query.x")["shape"] == [12, pk.domain_size]
    assert keyfile.load(lpath).h_form == "lagrange"
    coef = generator.setup(cube[1], generator.insecure_toxic_waste_for_tests(11), method="host",
                           h_form="coefficients")
    path = str(tmp_path / "c.pk")
    size = keyfile.save(coef, path)
    assert keyfile.file_size(coef.num_inputs, coef.num_aux, coef.domain_size, "coefficients") <= size
    assert keyfile.load(path).to_bytes() == coef.to_bytes()
    _header_unchecked_edit(path, lambda h: h.pop("h_form"))
    old = keyfile.load(path)
    assert old.h_form == "coefficients" and old.to_bytes() == coef.to_bytes()


def test_truncated_or_extended_file_refused(saved):
    path, size = saved
    with open(path, "r+b") as fh:
        fh.truncate(size - 1)
    with pytest.raises(KeyFormatError, match="truncated or trailing"):
        keyfile.load(path)
    with open(path, "r+b") as fh:
        fh.truncate(size + 4096)
    with pytest.raises(KeyFormatError, match="truncated or trailing"):
        keyfile.load(path)
    with open(path, "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(KeyFormatError, match="truncated"):
        keyfile.load(path)
    with open(path, "r+b") as fh:
        fh.truncate(0)
    with pytest.raises(KeyFormatError, match="truncated"):
        keyfile.load(path)


def test_flipped_bytes_refused(saved):
    path, _ = saved
    s = _section(path, "h_query.y")
    with open(path, "r+b") as fh:
        fh.seek(s["offset"] + s["nbytes"] - 1)
        b = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([b[0] ^ 1]))
    with pytest.raises(KeyFormatError, match="checksum mismatch in section h_query.y"):
        keyfile.load(path)
    assert keyfile.load(path, verify=False, check=False).num_aux > 0  # only the checks stood in the way
    with open(path, "r+b") as fh:
        fh.seek(40)
        b = fh.read(1)
        fh.seek(40)
        fh.write(bytes([b[0] ^ 4]))
    with pytest.raises(KeyFormatError, match="header checksum"):
        keyfile.load(path)
    with open(path, "r+b") as fh:
        fh.write(b"NOTAKEY!")
    with pytest.raises(KeyFormatError, match="bad magic"):
        keyfile.load(path)
    with pytest.raises(KeyFormatError, match="cannot open"):
        keyfile.load(path + ".absent")


@pytest.mark.parametrize("edit, match", [
    (lambda h: h["sections"][0].update(shape=[12, 99]), "dtype/shape"),
    (lambda h: h["sections"][4].update(offset=h["sections"][3]["offset"]), "offset"),
    (lambda h: h["sections"][1].update(offset=h["sections"][1]["offset"] + 8), "offset"),
    (lambda h: h.update(num_aux=h["num_aux"] + 1), "dtype/shape"),
    (lambda h: h.update(domain_size=12), "power of two"),
    (lambda h: h.update(vk="zz"), "hex"),
    (lambda h: h["sections"].pop(), "sections"),
    (lambda h: h.update(version=2), "version"),
    (lambda h: h.update(h_form="evaluations"), "h_form"),
    (lambda h: h.update(h_form="coefficients"), "h_query.x: dtype/shape"),  # n - 1 points expected, n written
    (lambda h: h.pop("h_form"), "h_query.x: dtype/shape"),  # absent = coefficients (files before the field)
])
def test_layout_checked_before_mapping(saved, edit, match):
    path, _ = saved
    _header_unchecked_edit(path, edit)
    with pytest.raises(KeyFormatError, match=match):
        keyfile.read_header(path)
    with pytest.raises(KeyFormatError, match=match):
        keyfile.load(path)


@pytest.mark.parametrize("what", ["off_curve", "not_reduced", "dirty_infinity"])
def test_bad_points_behind_valid_checksums(saved, what):
    path, _ = saved
    if what == "dirty_infinity":
        # a_query has points at infinity? set one inf bit of the L query on a finite point instead
        s = _section(path, "l_query.inf")
        with open(path, "r+b") as fh:
            fh.seek(s["offset"])
            fh.write(bytes([0x80]))  # point 0 flagged infinity, its coordinates are not zero
    else:
        s = _section(path, "l_query.y")
        with open(path, "r+b") as fh:
            fh.seek(s["offset"] + (11 * s["shape"][-1]) * 4)  # the top limb of point 0's y
            fh.write(struct.pack("<I", 0xFFFFFFFF if what == "not_reduced" else 0x1234))
    _fix_digests(path)
    with pytest.raises(KeyFormatError, match="section l_query"):
        keyfile.load(path)


def test_failed_save_leaves_nothing(tmp_path, cube):
    import dataclasses

    import jax

    pk = cube[2]
    path = str(tmp_path / "k.pk")
    bad = dataclasses.replace(pk, h_query=jax.tree_util.tree_map(lambda a: a[..., :1], pk.h_query))
    with pytest.raises(KeyFormatError, match="h_query"):
        keyfile.save(bad, path)
    assert os.listdir(tmp_path) == []
    keyfile.save(pk, path)
    before = open(path, "rb").read()
    with pytest.raises(KeyFormatError):
        keyfile.save(bad, path)
    assert open(path, "rb").read() == before and sorted(os.listdir(tmp_path)) == ["k.pk"]


def test_keycache_reads_a_version_1_unit(tmp_path, cube):
    """A unit written before the raw format (manifest version 1, the data_structures byte format) still loads."""
    circuit, r1cs, pk = cube
    path = keycache.key_path(circuit, r1cs, str(tmp_path))
    paths = keycache.companion_paths(path)
    pk_bytes, vk_bytes = pk.to_bytes(), pk.vk.to_bytes()
    for name, data in (("pk", pk_bytes), ("vk", vk_bytes)):
        with open(paths[name], "wb") as fh:
            fh.write(data)
    digest = lambda d: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()}  # noqa: E731
    with open(paths["manifest"], "w") as fh:
        json.dump({"version": 1, "pk": digest(pk_bytes), "vk": digest(vk_bytes)}, fh)
    assert keycache.read_cached(path, r1cs).to_bytes() == pk_bytes
    # and a raw unit: written by write_cached, read back; a raw pk from another unit is refused by the manifest
    keycache.write_cached(path, pk)
    assert keyfile.is_raw_key(paths["pk"])
    assert keycache.read_cached(path, r1cs).to_bytes() == pk_bytes
    keyfile.save(pk, paths["pk"], block=4096)  # same key, other block size: another header
    with pytest.raises(KeyFormatError, match="does not match the manifest"):
        keycache.read_cached(path, r1cs)
