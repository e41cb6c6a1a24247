"""Property tests and fuzzing of every parser (issue 21, item 6).

Each parser gets random truncations, random byte flips, random extensions and random JSON values. The property:
it either returns a valid object or raises the project's error class (``FormatError`` / ``KeyFormatError`` /
``BadInput``, all ``CuzkError``) -- never ``IndexError``, ``struct.error``, ``MemoryError``, ``RecursionError``,
``TypeError``, ``OverflowError``, ``UnicodeDecodeError`` or a hang.

Inputs are small files made here: a synthetic circom ``.r1cs`` and ``.wtns``, an INSECURE dev ``.zkey`` for that
r1cs (:mod:`cuzk_jax.snarkjs.dev_setup`), the cube circuit's native proving / verifying key (seeded toxic waste),
proof bytes and snarkjs JSON. Binary mutations also run with the inner checksum recomputed (native keys) or
with the header counts rewritten (the hostile-size cases), so the checks past the checksum are reached too.

hypothesis: ``max_examples`` 30-150 per test, ``deadline=None``, no example database (the test tree stays
clean); together the file runs in well under a minute on a 2-core CPU once the XLA programs are cached.
"""

from __future__ import annotations

import hashlib
import json
import struct

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from cuzk_jax.encoding import parse_field_element  # noqa: E402
from cuzk_jax.errors import BadInput, CuzkError, FormatError  # noqa: E402
from cuzk_jax.reference import constants as C  # noqa: E402
from cuzk_jax.snarkjs import binfile, jsonio, r1cs as r1cs_mod, wtns, zkey  # noqa: E402

FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])
FUZZ_DEVICE = settings(FUZZ, max_examples=40)  # parsers that run a device program per example

ALLOWED = (CuzkError,)  # FormatError, KeyFormatError, BadInput ... (ValueError subclasses)


def _accepts_or_refuses(parse, data):
    """Run ``parse(data)``; only the project's errors may escape."""
    try:
        return parse(data)
    except ALLOWED as e:
        assert str(e), "an error without a message"
        return None


# ------------------------------------------------------------------------------------------------------------
# byte mutations
# ------------------------------------------------------------------------------------------------------------


@st.composite
def mutated(draw, base: bytes, header: int | None = None):
    """``base`` truncated, extended, with random byte flips / overwrites, or with a random u32/u64 written at a
    random offset (``header`` limits that offset: hostile counts in the headers)."""
    data = bytearray(base)
    kind = draw(st.sampled_from(["truncate", "flip", "overwrite", "extend", "count", "count"]))
    if kind == "truncate":
        del data[draw(st.integers(0, max(0, len(data) - 1))):]
    elif kind == "flip":
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
    elif kind == "overwrite":
        i = draw(st.integers(0, len(data) - 1))
        chunk = draw(st.binary(min_size=1, max_size=16))
        data[i:i + len(chunk)] = chunk
    elif kind == "extend":
        data += draw(st.binary(min_size=1, max_size=64))
    else:
        width = draw(st.sampled_from([4, 8]))
        limit = len(data) - width if header is None else min(header, len(data) - width)
        i = draw(st.integers(0, max(0, limit)))
        v = draw(st.sampled_from([0, 1, 2, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, (1 << 64) - 1, 1 << 40])
                 | st.integers(0, (1 << (8 * width)) - 1))
        data[i:i + width] = (v % (1 << (8 * width))).to_bytes(width, "little")
    return bytes(data)


# ------------------------------------------------------------------------------------------------------------
# circom / snarkjs binary files
# ------------------------------------------------------------------------------------------------------------


def _r1cs_bytes() -> bytes:
    """x*x = x2, x2*x = y, (y + 5) * 1 = out: 6 wires (1, out, y, x, x2, spare), 3 constraints, labels."""
    n_wires = 6
    cons = (({3: 1}, {3: 1}, {4: 1}), ({4: 1}, {3: 1}, {2: 1}), ({2: 1, 0: 5}, {0: 1}, {1: 1}))
    hdr = struct.pack("<I", 32) + C.R.to_bytes(32, "little") + struct.pack("<IIIIQI", n_wires, 1, 1, 1, n_wires,
                                                                            len(cons))
    body = b""
    for con in cons:
        for lc in con:
            body += struct.pack("<I", len(lc)) + b"".join(struct.pack("<I", w) + v.to_bytes(32, "little")
                                                          for w, v in lc.items())
    labels = b"".join(struct.pack("<Q", i) for i in range(n_wires))
    return binfile.build("r1cs", 1, [(1, hdr), (2, body), (3, labels)])


R1CS = _r1cs_bytes()
WTNS = wtns.wtns_bytes([1, 3 ** 3 + 5, 27, 3, 9, 0])


@pytest.fixture(scope="module")
def zkey_bytes():
    from cuzk_jax.snarkjs import dev_setup

    return dev_setup.insecure_zkey(r1cs_mod.read_r1cs(R1CS), seed=3)


def test_fixtures_parse():
    rc = r1cs_mod.read_r1cs(R1CS)
    assert rc.n_constraints == 3 and rc.unsatisfied(wtns.read_wtns(WTNS)) == []


@FUZZ
@given(data=mutated(R1CS))
def test_r1cs_fuzz(data):
    _accepts_or_refuses(r1cs_mod.read_r1cs, data)


@FUZZ
@given(data=mutated(R1CS, header=12 + 12 + 4 + 32 + 28))
def test_r1cs_hostile_header_counts(data):
    """Counts rewritten in the container and r1cs headers (nSections, section sizes, nWires, nConstraints...)."""
    _accepts_or_refuses(r1cs_mod.read_r1cs, data)


@FUZZ
@given(data=mutated(WTNS))
def test_wtns_fuzz(data):
    _accepts_or_refuses(wtns.read_wtns, data)


@FUZZ
@given(data=st.binary(max_size=200))
def test_binfile_random_bytes(data):
    for kind, read in (("r1cs", r1cs_mod.read_r1cs), ("wtns", wtns.read_wtns), ("zkey", zkey.read_zkey)):
        _accepts_or_refuses(read, kind.encode() + data)
        _accepts_or_refuses(read, data)


def test_zkey_fixture_parses(zkey_bytes):
    z = zkey.read_zkey(zkey_bytes)
    assert z.n_vars == 6 and z.n_public == 2


@pytest.mark.parametrize("section,name,group", [(5, "A points", "g1"), (7, "B2 points", "g2"), (9, "H points", "g1")])
def test_zkey_point_checks_name_the_section(zkey_bytes, section, name, group):
    """One point off the curve / outside the subgroup (the rest of the file intact): the batched device check
    refuses it, naming the section and the index (no node toolchain needed: an INSECURE dev zkey)."""
    import random

    from cuzk_jax.reference.curve import g1 as ref_g1, g2 as ref_g2
    from cuzk_jax.snarkjs import points as zpoints

    ref, enc = (ref_g1, zpoints.g1_to_zkey_bytes) if group == "g1" else (ref_g2, zpoints.g2_to_zkey_bytes)
    size = 96 if group == "g1" else 192
    p = ref.random_curve_point(random.Random(9))
    assert not ref.in_subgroup(p)
    f = binfile.parse(zkey_bytes, "zkey", 1)

    def patched(raw: bytes, index: int) -> bytes:
        pos = f.sections[section][0] + index * size
        return zkey_bytes[:pos] + raw + zkey_bytes[pos + size:]

    with pytest.raises(FormatError, match=rf"{name}: point 2 is not in the prime-order {group.upper()} subgroup"):
        zkey.read_zkey(patched(enc(p), 2))
    off = bytearray(enc(p))
    off[0] ^= 1  # low byte of x (Montgomery, little-endian): off the curve, still < q
    with pytest.raises(FormatError, match=rf"{name}: point 1 is not on the BLS12-381 {group.upper()} curve"):
        zkey.read_zkey(patched(bytes(off), 1))
    assert zkey.read_zkey(patched(enc(p), 2), check_points=False).n_vars == 6  # the opt-out


@FUZZ
@given(data=st.data())
def test_zkey_fuzz_structure(zkey_bytes, data):
    """Without the point checks (fast): every structural rule."""
    _accepts_or_refuses(lambda b: zkey.read_zkey(b, check_points=False), data.draw(mutated(zkey_bytes)))


@FUZZ_DEVICE
@given(data=st.data())
def test_zkey_fuzz_with_point_checks(zkey_bytes, data):
    """With the batched curve + subgroup checks: flips inside point sections reach the device program."""
    z = _accepts_or_refuses(zkey.read_zkey, data.draw(mutated(zkey_bytes)))
    if z is not None:
        assert z.n_vars >= 1 and len(z.ic) == z.n_public + 1


# ------------------------------------------------------------------------------------------------------------
# native key files and proof bytes
# ------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def native_key():
    from cuzk_jax.circuits import base
    from cuzk_jax.groth16 import generator

    return generator.setup(base.get_circuit("cube").r1cs(), generator.insecure_toxic_waste_for_tests(21))


def _rehash(data: bytes) -> bytes:
    """Recompute the trailing SHA-256, so the mutation reaches the checks behind the checksum."""
    body = data[:-32]
    return body + hashlib.sha256(body).digest()


@FUZZ
@given(data=st.data())
def test_verifying_key_bytes_fuzz(native_key, data):
    from cuzk_jax.groth16.data_structures import VerifyingKey

    base = native_key.vk.to_bytes()
    bad = data.draw(mutated(base))
    for b in (bad, _rehash(bad) if len(bad) >= 32 else bad):
        vk = _accepts_or_refuses(VerifyingKey.from_bytes, b)
        if vk is not None:
            assert vk.to_bytes() == b  # accepted only if it is a well-formed key (canonical encoding)


@FUZZ_DEVICE
@given(data=st.data())
def test_proving_key_bytes_fuzz(native_key, data):
    from cuzk_jax.groth16.data_structures import ProvingKey

    base = native_key.to_bytes()
    bad = data.draw(mutated(base, header=8 + 12 + 32 + 8 + 4))
    _accepts_or_refuses(ProvingKey.from_bytes, bad)  # almost always the checksum
    if len(bad) >= 32:
        check = data.draw(st.booleans())
        pk = _accepts_or_refuses(lambda b: ProvingKey.from_bytes(b, subgroup_check=check), _rehash(bad))
        if pk is not None:
            assert pk.num_vars == native_key.num_vars or pk.to_bytes() == _rehash(bad)


PROOF = None


def _proof_bytes() -> bytes:
    from cuzk_jax.groth16.data_structures import Proof

    g1, g2 = (C.G1_X, C.G1_Y), (C.G2_X, C.G2_Y)
    return Proof(g1, g2, None).to_bytes() + Proof(None, g2, g1).to_bytes()


@FUZZ
@given(data=st.data())
def test_proof_bytes_fuzz(data):
    from cuzk_jax.groth16.data_structures import proofs_from_bytes, proofs_to_bytes

    base = _proof_bytes()
    bad = data.draw(mutated(base) | st.binary(max_size=400))
    proofs = _accepts_or_refuses(proofs_from_bytes, bad)
    if proofs is not None:
        assert proofs_to_bytes(proofs) == bad


# ------------------------------------------------------------------------------------------------------------
# JSON: proof.json, public.json, verification_key.json, the sector public file
# ------------------------------------------------------------------------------------------------------------

json_scalars = (st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 400) | st.floats(allow_nan=False)
                | st.text(max_size=12) | st.sampled_from(["0", "1", "35", "3_5", " 1", "+1", "-1", "01", "1e3",
                                                          str(C.R), str(C.R - 1), str(C.P), str(C.P - 1), "٣"]))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8) | st.sampled_from(
                               ["pi_a", "pi_b", "pi_c", "protocol", "curve", "IC", "nPublic", "vk_alpha_1",
                                "public_inputs"]), inner, max_size=4), max_leaves=20)


def _valid_proof_json():
    g1, g2 = (C.G1_X, C.G1_Y), (C.G2_X, C.G2_Y)
    return jsonio.proof_to_json(jsonio.Proof(g1, g2, g1))


def _valid_vk_json():
    g1, g2 = (C.G1_X, C.G1_Y), (C.G2_X, C.G2_Y)
    return jsonio.vk_to_json(jsonio.VerificationKey(1, g1, g2, g2, g2, [g1, g1], tuple(range(12))))


@st.composite
def mutated_json(draw, base):
    """``base`` with one leaf (or subtree) somewhere replaced by a random JSON value, or a key removed."""
    doc = json.loads(json.dumps(base))
    path_node, key = doc, None
    parent = None
    for _ in range(draw(st.integers(0, 4))):
        if isinstance(path_node, dict) and path_node:
            key = draw(st.sampled_from(sorted(path_node)))
        elif isinstance(path_node, list) and path_node:
            key = draw(st.integers(0, len(path_node) - 1))
        else:
            break
        parent, path_node = path_node, path_node[key]
    if parent is None:
        return draw(json_values)
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[key]
    else:
        parent[key] = draw(json_values)
    return doc


@FUZZ
@given(doc=mutated_json(_valid_proof_json()) | json_values)
def test_proof_json_fuzz(doc):
    for source in (doc, json.dumps(doc)):
        p = _accepts_or_refuses(jsonio.read_proof, source)
        if p is not None:
            assert all(v is None or 0 <= min(_flat(v)) and max(_flat(v)) < C.P for v in (p.a, p.b, p.c))


def _flat(v):
    return [x for item in v for x in (item if isinstance(item, tuple) else (item,))]


@FUZZ
@given(doc=mutated_json(_valid_vk_json()) | json_values)
def test_vk_json_fuzz(doc):
    from cuzk_jax.snarkjs import verifier

    vk = _accepts_or_refuses(jsonio.read_vk, json.dumps(doc))
    if vk is not None:
        _accepts_or_refuses(verifier.check_vk, vk)  # the key checks are errors of the project's class too


@FUZZ
@given(doc=st.lists(json_scalars, max_size=6) | json_values)
def test_public_json_fuzz(doc):
    xs = _accepts_or_refuses(jsonio.read_public, json.dumps(doc))
    if xs is not None:
        assert isinstance(doc, list) and len(xs) == len(doc)
        assert all(type(x) is int and 0 <= x < C.R for x in xs)
        assert [str(x) for x in xs] == [str(v) for v in doc]  # exactly the decimal text (or JSON integer) given


@pytest.fixture(scope="module")
def sector_files(tmp_path_factory):
    from cuzk_jax.groth16.data_structures import Proof

    d = tmp_path_factory.mktemp("sector")
    g1, g2 = (C.G1_X, C.G1_Y), (C.G2_X, C.G2_Y)
    (d / "s.proofs").write_bytes(Proof(g1, g2, g1).to_bytes())
    return d


@FUZZ
@given(doc=mutated_json({"circuit": "cube", "preset": "default", "sector": 0, "public_inputs": [["35"]]})
       | json_values)
def test_sector_public_json_fuzz(sector_files, doc):
    from cuzk_jax.groth16 import sector

    path = sector_files / "s.public.json"
    path.write_text(json.dumps(doc))
    got = _accepts_or_refuses(lambda p: sector.read_sector(str(sector_files / "s.proofs"), str(p)), path)
    if got is not None:
        (xs,) = got[1]
        assert len(xs) == len(doc["public_inputs"][0])
        assert [str(x) for x in xs] == doc["public_inputs"][0]


@pytest.mark.parametrize("depth", [50, 100_000])
def test_deeply_nested_json(sector_files, depth):
    """Deep nesting: a clear FormatError (shallow) or "nested too deeply" (deep), never RecursionError."""
    from cuzk_jax.groth16 import sector

    text = "[" * depth + "]" * depth
    for read in (jsonio.read_proof, jsonio.read_public, jsonio.read_vk):
        with pytest.raises(FormatError):
            read(text)
    obj = '{"public_inputs": ' + text + "}"
    (sector_files / "deep.json").write_text(obj)
    with pytest.raises(FormatError):
        sector.read_sector(str(sector_files / "s.proofs"), str(sector_files / "deep.json"))


# ------------------------------------------------------------------------------------------------------------
# the shared number parser
# ------------------------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, database=None)
@given(v=st.integers(0, C.R - 1))
def test_parse_field_element_accepts_canonical(v):
    assert parse_field_element(str(v), "x") == v
    assert parse_field_element(v, "x") == v
    with pytest.raises(BadInput, match="integer"):
        parse_field_element(v, "x", allow_int=False, error=BadInput)


@settings(max_examples=200, deadline=None, database=None)
@given(v=json_scalars | st.text(max_size=30) | st.integers(C.R, 1 << 300).map(str) | st.integers().map(
    lambda n: f"{n:_}") | st.floats() | st.integers(0, 99).map(lambda n: f" {n}"))
def test_parse_field_element_refuses_the_rest(v):
    """Everything that is not a canonical decimal string or int in [0, r) is refused with the given class."""
    canonical = (type(v) is int and 0 <= v < C.R) or (
        isinstance(v, str) and v.isascii() and v.isdigit() and (v == "0" or v[0] != "0") and int(v) < C.R)
    try:
        got = parse_field_element(v, "input[7]", error=FormatError)
    except FormatError as e:
        assert not canonical and "input[7]" in str(e)
    else:
        assert canonical and got == int(v)
