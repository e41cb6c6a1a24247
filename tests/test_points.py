"""Point encodings (cuzk_jax.points) vs py_arkworks_bls12381, py_ecc and the reference encoder.

Round trips and byte identity on random points plus infinity; every malformed input raises ValueError naming the
problem (and the index for batches). Decoding programs are cached per (group, compressed, check) by the module,
so each is compiled once for the whole test session.
"""

from __future__ import annotations

import random

import numpy as np
import py_arkworks_bls12381 as ark
import pytest
from py_ecc.bls import point_compression as pc
from py_ecc import optimized_bls12_381 as ecc

from cuzk_jax import points as pts
from cuzk_jax.reference import constants as C
from cuzk_jax.reference import curve as rc

GROUPS = ["g1", "g2"]
ARK = {"g1": ark.G1Point, "g2": ark.G2Point}


def _ark_uncompressed(p, g) -> bytes:
    """zcash uncompressed encoding built from arkworks' raw big-endian x||y (arkworks orders Fq2 as c0, c1)."""
    raw = p.to_xy_bytes_be()
    if not any(raw):
        return bytes([0x40]) + bytes(len(raw) - 1)
    if g == "g1":
        return raw
    x0, x1, y0, y1 = (raw[i : i + 48] for i in range(0, 192, 48))
    return x1 + x0 + y1 + y0


def _ecc_compressed(p, g) -> bytes:
    if g == "g1":
        q = (ecc.FQ(p[0]), ecc.FQ(p[1]), ecc.FQ.one()) if p is not None else ecc.Z1
        return pc.compress_G1(q).to_bytes(48, "big")
    if p is None:
        q = ecc.Z2
    else:
        q = (ecc.FQ2(list(p[0])), ecc.FQ2(list(p[1])), ecc.FQ2.one())
    z1, z2 = pc.compress_G2(q)
    return z1.to_bytes(48, "big") + z2.to_bytes(48, "big")


@pytest.fixture(scope="module")
def samples():
    """Per group: reference points (four random multiples and the negative of the first -- so both signs of y
    occur whatever the draw --, the generator, infinity, minus the generator). Own seeded RNG: the points do not
    depend on which tests ran before."""
    rng = random.Random(0xC0DE)
    out = {}
    for g in GROUPS:
        R = rc.CURVES[g]
        ks = [rng.randrange(1, C.R) for _ in range(4)]
        P = [R.mul(R.generator, k) for k in ks]
        P += [R.neg(P[0]), R.generator, None, R.neg(R.generator)]
        arks = [ARK[g]() * ark.Scalar(k) for k in ks]
        arks += [-arks[0], ARK[g](), ARK[g].identity(), -ARK[g]()]
        out[g] = (P, arks)
    return out


@pytest.mark.parametrize("g", GROUPS)
def test_encode_matches_arkworks_and_py_ecc(g, samples):
    P, arks = samples[g]
    dev = pts.from_reference(P, g)
    comp = pts.encode(dev, g)
    assert comp == [a.to_compressed_bytes() for a in arks]
    assert comp == [_ecc_compressed(p, g) for p in P]
    assert comp == [rc.CURVES[g].encode(p) for p in P]
    unc = pts.encode(dev, g, compressed=False)
    assert unc == [_ark_uncompressed(a, g) for a in arks]
    assert unc == [rc.CURVES[g].encode(p, compressed=False) for p in P]
    # both signs of y occur (P[0] and -P[0]), so the sort flag is exercised both ways
    assert {c[0] & 0x20 for c in comp[:-2]} == {0, 0x20}
    # a single point (batch shape ()) encodes to bytes
    one = pts.from_reference([P[0]], g)
    single = type(one)(one.x[..., 0], one.y[..., 0], one.inf[0])
    assert pts.encode(single, g) == comp[0]
    arr = pts.encode_array(dev, g)
    assert arr.dtype == np.uint8 and arr.shape == (len(P), pts.encoded_size(g)) and arr.tobytes() == b"".join(comp)


@pytest.mark.parametrize("g", GROUPS)
@pytest.mark.parametrize("compressed", [True, False])
def test_decode_round_trip(g, compressed, samples):
    P, arks = samples[g]
    data = [a.to_compressed_bytes() for a in arks] if compressed else [_ark_uncompressed(a, g) for a in arks]
    dev = pts.decode(data, g, compressed=compressed)
    assert pts.to_reference(dev, g) == P
    assert pts.encode(dev, g, compressed=compressed) == data
    # numpy (N, size) input and single-encoding input
    mat = np.frombuffer(b"".join(data), np.uint8).reshape(len(data), -1)
    assert pts.to_reference(pts.decode(mat, g, compressed=compressed), g) == P
    single = pts.decode(data[1], g, compressed=compressed)
    assert single.inf.shape == () and pts.to_reference(single, g) == [P[1]]
    # the group-specific wrappers
    dec = pts.decode_g1 if g == "g1" else pts.decode_g2
    assert pts.to_reference(dec(data[:2], compressed=compressed), g) == P[:2]


def test_empty_batch():
    dev = pts.decode([], "g1")
    assert dev.x.shape == (12, 0) and pts.encode(dev, "g1") == []


def _expect(msg, fn, *args, **kw):
    with pytest.raises(ValueError, match=msg):
        fn(*args, **kw)


def _non_square_x(g):
    """An x for which x^3 + b is not a square (no curve point), found by trying small values."""
    R = rc.CURVES[g]
    for v in range(1, 100):
        x = v if g == "g1" else (v, 1)
        if R.lift_x(x) is None:
            return x
    raise AssertionError("no non-square found")


@pytest.mark.parametrize("g", GROUPS)
def test_malformed_format_rejected(g, samples):
    """Format errors (checked on the host, before any device work)."""
    P, arks = samples[g]
    good = arks[0].to_compressed_bytes()
    good_u = _ark_uncompressed(arks[0], g)
    size = len(good)
    name = f"decode_{g}"
    _expect("must be", pts.decode, good[:-1], g)
    _expect(r"encoding 1 must be", pts.decode, [good, good + b"\0"], g)
    _expect(r"encoding 0 is str", pts.decode, ["x" * size], g)
    _expect("shape", pts.decode, np.zeros((2, size + 1), np.uint8), g)
    # compression flag
    _expect("compression flag is 0", pts.decode, bytes([good[0] & 0x7F]) + good[1:], g)
    _expect("compression flag is 1", pts.decode, bytes([good_u[0] | 0x80]) + good_u[1:], g, compressed=False)
    # infinity with other bits set
    inf = bytes([0xC0]) + bytes(size - 1)
    _expect("infinity flag", pts.decode, bytes([0xE0]) + bytes(size - 1), g)
    _expect(r"infinity flag.*encoding 1", pts.decode, [inf, inf[:-1] + b"\x01"], g)
    _expect("infinity flag", pts.decode, bytes([0x40]) + bytes(2 * size - 2) + b"\x01", g, compressed=False)
    # sort flag on an uncompressed encoding
    _expect("sort flag", pts.decode, bytes([good_u[0] | 0x20]) + good_u[1:], g, compressed=False)
    # non-canonical coordinates (>= p): x = p, and for G2 each component separately; y >= p uncompressed
    pb = C.P.to_bytes(48, "big")
    if g == "g1":
        bad_x = [bytes([pb[0] | 0x80]) + pb[1:]]
        bad_y = good_u[:48] + pb
    else:
        x1, x0 = good[:48], good[48:]
        bad_x = [bytes([pb[0] | 0x80]) + pb[1:] + x0, x1 + pb]
        bad_y = good_u[:96] + good_u[96:144] + pb
    for b in bad_x:
        _expect(r"canonical.*encoding 1", pts.decode, [good, b], g)
        with pytest.raises(Exception):
            ARK[g].from_compressed_bytes(b)
    _expect("canonical", pts.decode, bad_y, g, compressed=False)
    # arkworks rejects what we reject
    with pytest.raises(Exception):
        ARK[g].from_compressed_bytes(bytes([good[0] & 0x7F]) + good[1:])
    assert name  # (messages start with decode_<group>)


@pytest.mark.parametrize("g", GROUPS)
def test_points_off_curve_or_subgroup_rejected(g, samples, rng):
    R = rc.CURVES[g]
    P, arks = samples[g]
    good = arks[0].to_compressed_bytes()
    # compressed: an x with no curve point
    x = _non_square_x(g)
    enc = bytearray(R._coord_to_bytes(x))
    enc[0] |= 0x80
    _expect(r"not the abscissa of a curve point \(encoding 2\)", pts.decode, [good, good, bytes(enc)], g)
    with pytest.raises(Exception):
        ARK[g].from_compressed_bytes(bytes(enc))
    # uncompressed: (x, y + 1) is off the curve
    p = P[0]
    one = 1 if g == "g1" else (1, 0)
    off = R.encode((p[0], R.field.add(p[1], one)), compressed=False)
    _expect(r"not on the curve \(encoding 1\)", pts.decode, [R.encode(p, False), off], g, compressed=False)
    _expect(r"decode_%s: point is not on the curve$" % g, pts.decode, off, g, compressed=False)
    # on the curve but outside the subgroup (try-and-increment x, cofactor not cleared)
    q = R.random_curve_point(rng)
    assert R.is_on_curve(q) and not R.in_subgroup(q)
    for compressed in (True, False):
        data = [R.encode(P[1], compressed), R.encode(q, compressed)]
        _expect(r"not in the prime-order subgroup \(encoding 1\)", pts.decode, data, g, compressed=compressed)
    with pytest.raises(Exception):
        ARK[g].from_compressed_bytes(R.encode(q))
    # check=False skips only the subgroup test (G1: keeps the compile count down)
    if g == "g1":
        got = pts.decode([R.encode(q), good], g, check=False)
        assert pts.to_reference(got, g) == [q, P[0]]
        assert ARK[g].from_compressed_bytes_unchecked(R.encode(q)).to_compressed_bytes() == R.encode(q)


def test_from_reference_rejects_bad_points():
    _expect("not an affine pair", pts.from_reference, [(1, 2, 3)], "g1")
    _expect(r"not an int in \[0, p\)", pts.from_reference, [(C.P, 0)], "g1")
    _expect(r"not an int in \[0, p\)", pts.from_reference, [((0, C.P), (0, 0))], "g2")
    _expect("pairs", pts.from_reference, [(1, 2)], "g2")
    _expect("unknown group", pts.from_reference, [], "g3")
    _expect("expected an ops.curve.Affine", pts.encode, [(1, 2)], "g1")


@pytest.mark.parametrize("g", GROUPS)
def test_check_montgomery_names_first_bad_points(g, samples, rng):
    """points.check_montgomery (zkey sections; on this CPU through arkworks' checked decoding): the first point
    off the curve and the first outside the subgroup are named separately; infinity passes; all good -> None."""
    import random

    from cuzk_jax import encoding

    R = rc.CURVES[g]
    P, _ = samples[g]
    good = [p for p in P if p is not None][:4]
    outside = R.random_curve_point(random.Random(9))
    assert R.is_on_curve(outside) and not R.in_subgroup(outside)
    off = (good[0][0], R.field.add(good[0][1], R.field.one) if g == "g2" else (good[0][1] + 1) % C.P)
    assert not R.is_on_curve(off)

    def arrays(points):
        if g == "g1":
            x = encoding.ints_to_limbs([p[0] for p in points], "fq", montgomery=True)
            y = encoding.ints_to_limbs([p[1] for p in points], "fq", montgomery=True)
        else:
            x = np.stack([encoding.ints_to_limbs([p[0][k] for p in points], "fq", True) for k in range(2)])
            y = np.stack([encoding.ints_to_limbs([p[1][k] for p in points], "fq", True) for k in range(2)])
        return x, y

    pts_ = good + [good[0]]
    x, y = arrays(pts_)
    inf = np.zeros(len(pts_), bool)
    inf[-1] = True
    assert pts.check_montgomery(x, y, inf, g) == (None, None)
    x, y = arrays(good[:2] + [outside, off, good[2]])
    assert pts.check_montgomery(x, y, np.zeros(5, bool), g) == (3, 2)
    assert pts.check_montgomery(x, y, np.zeros(5, bool), g, subgroup=False) == (3, None)
