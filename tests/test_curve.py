"""G1 / G2 point arithmetic: reference vs py_ecc / py_arkworks_bls12381, ops/curve.py vs the reference.

Every formula is checked on batches that mix random points with the edge cases (P + P, P + (-P), infinity on
either side or both), with projective inputs carrying random Z (and junk X/Y under infinity) so the Z-handling
is exercised. Projective results are normalised on the host with Python ints, so only the dedicated test
compiles ``to_affine`` (batch inversion with infinities in the batch). Jitted programs are module-level and
shared by the tests (one compile per curve and program) to keep the compile budget small.
"""

from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import py_arkworks_bls12381 as ark
import pytest
from py_ecc import optimized_bls12_381 as ecc

from cuzk_jax import encoding
from cuzk_jax import points as pts
from cuzk_jax.ops import curve as oc
from cuzk_jax.ops import field as of
from cuzk_jax.reference import constants as C
from cuzk_jax.reference import curve as rc
from cuzk_jax.reference.field import fq, fq2

GROUPS = ["g1", "g2"]
ARK = {"g1": ark.G1Point, "g2": ark.G2Point}


# ---------------------------------------------------------------------------------------------------------------
# helpers: reference values -> device arrays (Montgomery), with random projective Z
# ---------------------------------------------------------------------------------------------------------------


def _F(g):
    return fq if g == "g1" else fq2


def _mont(vals, g):
    if g == "g1":
        return jnp.asarray(encoding.ints_to_limbs(list(vals), "fq", montgomery=True))
    vals = list(vals)
    c0 = encoding.ints_to_limbs([v[0] for v in vals], "fq", montgomery=True)
    c1 = encoding.ints_to_limbs([v[1] for v in vals], "fq", montgomery=True)
    return jnp.asarray(np.stack([c0, c1]))


def _rand_elem(g, rng):
    return rng.randrange(1, C.P) if g == "g1" else (rng.randrange(C.P), rng.randrange(1, C.P))


def to_jacobian(points, g, rng, inf_junk=False):
    """Reference points -> Jacobian arrays with random Z (infinity: Z = 0, X/Y zero or junk)."""
    F = _F(g)
    zero = 0 if g == "g1" else (0, 0)
    X, Y, Z = [], [], []
    for p in points:
        if p is None:
            j = _rand_elem(g, rng) if inf_junk else zero
            X.append(j), Y.append(j), Z.append(zero)
            continue
        z = _rand_elem(g, rng)
        zz = F.square(z)
        X.append(F.mul(p[0], zz)), Y.append(F.mul(p[1], F.mul(zz, z))), Z.append(z)
    return oc.Jacobian(_mont(X, g), _mont(Y, g), _mont(Z, g))


def to_xyzz(points, g, rng, inf_junk=False):
    F = _F(g)
    zero = 0 if g == "g1" else (0, 0)
    X, Y, ZZ, ZZZ = [], [], [], []
    for p in points:
        if p is None:
            j = _rand_elem(g, rng) if inf_junk else zero
            X.append(j), Y.append(j), ZZ.append(zero), ZZZ.append(zero)
            continue
        z = _rand_elem(g, rng)
        zz = F.square(z)
        zzz = F.mul(zz, z)
        X.append(F.mul(p[0], zz)), Y.append(F.mul(p[1], zzz)), ZZ.append(zz), ZZZ.append(zzz)
    return oc.XYZZ(_mont(X, g), _mont(Y, g), _mont(ZZ, g), _mont(ZZZ, g))


def to_ref(aff, g):
    return pts.to_reference(aff, g)


def _host_coord(arr, g):
    """Montgomery limb array (…, N) on the device -> list of canonical reference field elements."""
    a = np.asarray(arr)
    if g == "g1":
        return encoding.limbs_to_ints(a.reshape(12, -1), "fq", montgomery=True)
    c0 = encoding.limbs_to_ints(a[0].reshape(12, -1), "fq", montgomery=True)
    c1 = encoding.limbs_to_ints(a[1].reshape(12, -1), "fq", montgomery=True)
    return list(zip(c0, c1))


def proj_to_ref(pt, g):
    """Jacobian / XYZZ arrays -> reference affine points, normalised on the host with Python ints (so tests
    need not compile ``to_affine``; that is tested on its own)."""
    F = _F(g)
    zero = 0 if g == "g1" else (0, 0)
    cs = [_host_coord(c, g) for c in pt]
    out = []
    for vals in zip(*cs):
        if isinstance(pt, oc.Jacobian):
            x, y, z = vals
            if z == zero:
                out.append(None)
                continue
            zi = F.inv(z)
            zi2 = F.square(zi)
            out.append((F.mul(x, zi2), F.mul(y, F.mul(zi2, zi))))
        else:
            x, y, zz, zzz = vals
            if zz == zero:
                out.append(None)
                continue
            assert F.square(zzz) == F.mul(F.square(zz), zz), "XYZZ invariant ZZ^3 = ZZZ^2"
            out.append((F.mul(x, F.inv(zz)), F.mul(y, F.inv(zzz))))
    return out


def random_point(g, rng):
    """A random subgroup point k G computed by arkworks (fast), read back through its raw x||y bytes."""
    k = rng.randrange(1, C.R)
    raw = (ARK[g]() * ark.Scalar(k)).to_xy_bytes_be()
    v = [int.from_bytes(raw[i : i + 48], "big") for i in range(0, len(raw), 48)]
    return (v[0], v[1]) if g == "g1" else ((v[0], v[1]), (v[2], v[3]))  # arkworks orders Fq2 as c0, c1


def edge_pairs(g, rng, n_random=3):
    """(lhs, rhs) reference lists covering random, P+P, P+(-P), inf+P, P+inf, inf+inf."""
    R = rc.CURVES[g]
    P = [random_point(g, rng) for _ in range(n_random + 3)]
    lhs = P[:n_random] + [P[n_random], P[n_random + 1], None, P[n_random + 2], None]
    rhs = [random_point(g, rng) for _ in range(n_random)] + [P[n_random], R.neg(P[n_random + 1]), P[0], None, None]
    return lhs, rhs


# ---------------------------------------------------------------------------------------------------------------
# shared jitted programs
# ---------------------------------------------------------------------------------------------------------------


def _adds_xyzz(g):
    curve = oc.CURVES[g]
    return jax.jit(lambda a_aff, b_aff, a_xyzz, b_xyzz: (curve.xyzz_add_mixed(a_xyzz, b_aff), curve.xyzz_add(a_xyzz, b_xyzz)))


def _adds_jac(g):
    curve = oc.CURVES[g]
    return jax.jit(lambda b_aff, a_jac, b_jac: (curve.jacobian_add(a_jac, b_jac), curve.jacobian_add_mixed(a_jac, b_aff)))


def _unary(g):
    curve = oc.CURVES[g]

    def run(a_xyzz, a_jac, b_jac):
        return (
            curve.xyzz_double(a_xyzz),
            curve.jacobian_double(a_jac),
            curve.xyzz_neg(a_xyzz),
            curve.jacobian_neg(a_jac),
            curve.jacobian_to_xyzz(a_jac),
            curve.xyzz_to_jacobian(a_xyzz),
            curve.jacobian_eq(a_jac, b_jac),
            curve.xyzz_eq(a_xyzz, curve.jacobian_to_xyzz(b_jac)),
        )

    return jax.jit(run)


def _to_affine(g):
    curve = oc.CURVES[g]
    return jax.jit(lambda jac, xyzz: (curve.to_affine(jac), curve.to_affine(xyzz)))


def _checks(g):
    curve = oc.CURVES[g]
    return jax.jit(lambda a: (curve.is_on_curve(a), curve.in_subgroup(a)))


_PROGRAMS: dict = {}


def program(kind, g):
    key = (kind, g)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = {"adds_xyzz": _adds_xyzz, "adds_jac": _adds_jac, "unary": _unary, "checks": _checks, "to_affine": _to_affine}[kind](g)
    return _PROGRAMS[key]


# ---------------------------------------------------------------------------------------------------------------
# reference layer vs py_ecc / arkworks
# ---------------------------------------------------------------------------------------------------------------


def _ecc_point(p, g):
    if p is None:
        return ecc.Z1 if g == "g1" else ecc.Z2
    if g == "g1":
        return (ecc.FQ(p[0]), ecc.FQ(p[1]), ecc.FQ.one())
    return (ecc.FQ2(list(p[0])), ecc.FQ2(list(p[1])), ecc.FQ2.one())


def _from_ecc(p, g):
    if ecc.is_inf(p):
        return None
    x, y = ecc.normalize(p)
    if g == "g1":
        return (int(x), int(y))
    return ((int(x.coeffs[0]), int(x.coeffs[1])), (int(y.coeffs[0]), int(y.coeffs[1])))


@pytest.mark.parametrize("g", GROUPS)
def test_reference_matches_py_ecc_and_arkworks(g, rng):
    R = rc.CURVES[g]
    gen_ecc = ecc.G1 if g == "g1" else ecc.G2
    assert R.generator == _from_ecc(gen_ecc, g)
    ks = [rng.randrange(1, C.R) for _ in range(3)]
    P = [R.mul(R.generator, k) for k in ks]
    for k, p in zip(ks, P):
        assert p == _from_ecc(ecc.multiply(gen_ecc, k), g)
        assert R.encode(p) == (ARK[g]() * ark.Scalar(k)).to_compressed_bytes()
    assert R.add(P[0], P[1]) == _from_ecc(ecc.add(_ecc_point(P[0], g), _ecc_point(P[1], g)), g)
    assert R.double(P[2]) == _from_ecc(ecc.double(_ecc_point(P[2], g)), g)
    assert R.add(P[0], P[0]) == R.double(P[0])
    assert R.add(P[0], R.neg(P[0])) is None
    assert R.add(None, P[1]) == P[1] and R.add(P[1], None) == P[1]
    assert R.mul(P[0], C.R) is None and R.mul(P[0], C.R + 1) == P[0] and R.mul(P[0], -1) == R.neg(P[0])
    assert R.multiexp(P, ks) == _from_ecc(ecc.multiply(gen_ecc, sum(k * k for k in ks) % C.R), g)
    # arkworks multiexp as a further oracle
    arks = [ARK[g]() * ark.Scalar(k) for k in ks]
    scal = [ark.Scalar(k) for k in ks]
    assert R.encode(R.multiexp(P, ks)) == ARK[g].multiexp_unchecked(arks, scal).to_compressed_bytes()


@pytest.mark.parametrize("g", GROUPS)
def test_reference_subgroup_tests_agree(g, rng):
    """Scott's endomorphism test (with this module's constants) agrees with the definition r P == O."""
    R = rc.CURVES[g]
    good = [random_point(g, rng) for _ in range(2)] + [R.generator]
    bad = [R.random_curve_point(rng) for _ in range(3)]
    for p in good:
        assert R.in_subgroup(p) and R.in_subgroup_fast(p)
        assert R.endomorphism(p) == R.mul(p, R.endomorphism_eigenvalue())
    for p in bad:
        assert R.is_on_curve(p)
        assert not R.in_subgroup(p) and not R.in_subgroup_fast(p)
    assert R.in_subgroup(None) and R.in_subgroup_fast(None)
    if g == "g1":  # clearing the cofactor lands in the subgroup (G2's 636-bit cofactor is too slow here)
        assert R.in_subgroup_fast(R.clear_cofactor(bad[0]))


# ---------------------------------------------------------------------------------------------------------------
# ops layer vs reference
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("g", GROUPS)
def test_additions(g, rng):
    """xyzz_add_mixed, xyzz_add, jacobian_add, jacobian_add_mixed on random / P+P / P+(-P) / infinity cases."""
    R = rc.CURVES[g]
    lhs, rhs = edge_pairs(g, rng)
    expected = [R.add(p, q) for p, q in zip(lhs, rhs)]
    assert None in expected and expected.count(None) >= 2  # P + (-P) and inf + inf are in the batch
    a_aff = pts.from_reference(lhs, g)
    b_aff = pts.from_reference(rhs, g)
    # junk coordinates under infinity must be ignored by every formula
    out = program("adds_xyzz", g)(a_aff, b_aff, to_xyzz(lhs, g, rng, inf_junk=True), to_xyzz(rhs, g, rng))
    out += program("adds_jac", g)(b_aff, to_jacobian(lhs, g, rng, True), to_jacobian(rhs, g, rng, True))
    names = ["xyzz_add_mixed", "xyzz_add", "jacobian_add", "jacobian_add_mixed"]
    for name, res in zip(names, out):
        assert proj_to_ref(res, g) == expected, name


@pytest.mark.parametrize("g", GROUPS)
def test_mixed_addition_without_doubling(g, rng):
    """xyzz_add_mixed_no_dbl on the same cases: the sum wherever ``need`` is false, and ``need`` exactly on the
    lanes where both sides are the same finite point (P + P), whose doubling the caller substitutes."""
    R = rc.CURVES[g]
    lhs, rhs = edge_pairs(g, rng)
    curve = oc.CURVES[g]
    res, need = jax.jit(lambda a, b: curve.xyzz_add_mixed_no_dbl(a, b))(to_xyzz(lhs, g, rng, inf_junk=True),
                                                                          pts.from_reference(rhs, g))
    same = [p is not None and p == q for p, q in zip(lhs, rhs)]
    assert list(np.asarray(need)) == same and any(same)
    got = proj_to_ref(res, g)
    for p, q, s, r in zip(lhs, rhs, same, got):
        if not s:
            assert r == R.add(p, q)


@pytest.mark.parametrize("g", GROUPS)
def test_to_affine_with_infinities(g, rng):
    """Batch inversion over a batch holding infinities (with junk X/Y): infinity -> (0, 0, inf=True)."""
    R = rc.CURVES[g]
    P = [random_point(g, rng), None, random_point(g, rng), None, None, R.generator, random_point(g, rng)]
    a, b = program("to_affine", g)(to_jacobian(P, g, rng, inf_junk=True), to_xyzz(P, g, rng, inf_junk=True))
    for out in (a, b):
        assert to_ref(out, g) == P
        inf = np.asarray(out.inf)
        assert list(inf) == [p is None for p in P]
        assert not np.asarray(out.x)[..., inf].any() and not np.asarray(out.y)[..., inf].any()


@pytest.mark.parametrize("g", GROUPS)
def test_double_neg_eq_conversions(g, rng):
    R = rc.CURVES[g]
    A = [random_point(g, rng) for _ in range(3)] + [None, R.generator]
    # B: same points as A under fresh random Z (eq), except index 1 (a different point) and index 4 (infinity)
    B = list(A)
    B[1] = random_point(g, rng)
    B[4] = None
    dx, dj, nx, nj, j2x, x2j, jeq, xeq = program("unary", g)(
        to_xyzz(A, g, rng, True), to_jacobian(A, g, rng, True), to_jacobian(B, g, rng)
    )
    dbl = [R.double(p) for p in A]
    neg = [R.neg(p) for p in A]
    assert proj_to_ref(dx, g) == dbl, "xyzz_double"
    assert proj_to_ref(dj, g) == dbl, "jacobian_double"
    assert proj_to_ref(nx, g) == neg, "xyzz_neg"
    assert proj_to_ref(nj, g) == neg, "jacobian_neg"
    assert proj_to_ref(j2x, g) == A, "jacobian_to_xyzz"
    assert proj_to_ref(x2j, g) == A, "xyzz_to_jacobian"
    expect_eq = [a == b for a, b in zip(A, B)]
    assert expect_eq == [True, False, True, True, False]
    assert list(np.asarray(jeq)) == expect_eq
    assert list(np.asarray(xeq)) == expect_eq


@pytest.mark.parametrize("g", ["g1"])  # G2's checks run inside every G2 decode in test_points.py (compile budget)
def test_on_curve_and_subgroup_checks(g, rng):
    R = rc.CURVES[g]
    F = _F(g)
    good = [random_point(g, rng), R.generator, None]
    not_in_group = [R.random_curve_point(rng), R.random_curve_point(rng)]
    p = random_point(g, rng)
    off_curve = [(p[0], F.add(p[1], 1 if g == "g1" else (1, 0)))]
    assert not R.is_on_curve(off_curve[0])
    batch = good + not_in_group + off_curve
    on, sub = program("checks", g)(pts.from_reference(batch, g))
    assert list(np.asarray(on)) == [True, True, True, True, True, False]
    assert list(np.asarray(sub)) == [True, True, True, False, False, False]


_SCALAR_MUL: dict = {}


def _scalar_mul_prog(g):
    if g not in _SCALAR_MUL:
        curve = oc.CURVES[g]
        _SCALAR_MUL[g] = jax.jit(curve.scalar_mul)
    return _SCALAR_MUL[g]


@pytest.mark.parametrize("g", GROUPS)
def test_scalar_mul(g, rng):
    R = rc.CURVES[g]
    P = [random_point(g, rng) for _ in range(3)] + [R.generator] * 4 + [None, R.random_curve_point(rng)]
    ks = [rng.randrange(C.R) for _ in range(3)] + [0, 1, C.R - 1, C.R, 12345, (1 << 256) - 1]
    s = jnp.asarray(_u256(ks))
    got = proj_to_ref(_scalar_mul_prog(g)(pts.from_reference(P, g), s), g)
    assert got == [R.mul(p, k) for p, k in zip(P, ks)]
    assert got[6] is None  # r * G
    # arkworks agrees on the random multiples of subgroup points
    for p, k, r in zip(P[:3], ks[:3], got[:3]):
        q = ARK[g].from_compressed_bytes(R.encode(p)) * ark.Scalar(k)
        assert pts.encode(pts.from_reference([r], g), g)[0] == q.to_compressed_bytes()


def _u256(ks):
    """Python ints < 2^256 -> (8, N) uint32 canonical limbs (scalar_mul accepts any 256-bit value)."""
    buf = b"".join(k.to_bytes(32, "little") for k in ks)
    return np.ascontiguousarray(np.frombuffer(buf, "<u4").reshape(len(ks), 8).T).astype(np.uint32)


_SUM: dict = {}


@pytest.mark.parametrize("g", ["g1"])  # generic code; G2's xyzz_add is covered by test_additions (compile budget)
def test_sum_along_axis(g, rng):
    """Curve.sum over the last batch axis of a (3, 7) batch (steps=2: scan + tree), with infinities and P, -P."""
    R = rc.CURVES[g]
    curve = oc.CURVES[g]
    rows = []
    for r in range(3):
        row = [random_point(g, rng) for _ in range(7)]
        rows.append(row)
    rows[0][2] = None
    rows[1][3] = R.neg(rows[1][5])  # cancels
    rows[2] = [None] * 7
    flat = [p for row in rows for p in row]
    aff = pts.from_reference(flat, g)
    lead = curve.coord_ndim
    aff = oc.Affine(*[c.reshape(c.shape[:lead] + (3, 7)) if name != "inf" else c.reshape(3, 7) for name, c in zip(aff._fields, aff)])
    if g not in _SUM:
        _SUM[g] = jax.jit(lambda a: curve.sum(a, axis=1, steps=2))
    got = proj_to_ref(_SUM[g](aff), g)
    expected = []
    for row in rows:
        acc = None
        for p in row:
            acc = R.add(acc, p)
        expected.append(acc)
    assert got == expected


def test_sum_jacobian_and_axis0(rng):
    """Jacobian input, reduction along axis 0 (n = 5, one lane, fold only) and an empty axis (G1)."""
    R = rc.g1
    curve = oc.g1
    P = [random_point("g1", rng) for _ in range(4)] + [None]
    jac = to_jacobian(P, "g1", rng, inf_junk=True)
    jac = oc.Jacobian(*[c.reshape(12, 5, 1) for c in jac])
    got = proj_to_ref(jax.jit(lambda a: curve.sum(a, axis=0, steps=8))(jac), "g1")
    assert got == [R.multiexp(P[:4], [1] * 4)]
    empty = curve.sum(oc.Jacobian(*[c[:, :0] for c in jac]), axis=0)
    assert empty.z.shape == (12, 1) and not np.asarray(empty.z).any()


def test_mul_static_negative_and_order(rng):
    """mul_static with the (negative) curve parameter x and with r (G1 order test method)."""
    R = rc.g1
    curve = oc.g1
    P = [random_point("g1", rng), R.random_curve_point(rng), None]
    aff = pts.from_reference(P, "g1")
    f = jax.jit(lambda a: (curve.mul_static(a, C.X), curve.in_subgroup(a, method="order")))
    got, sub = f(aff)
    assert proj_to_ref(got, "g1") == [R.mul(p, C.X) for p in P]
    assert list(np.asarray(sub)) == [True, False, True]


# ---------------------------------------------------------------------------------------------------------------
# the generic-F contract: formulas only use the documented field interface
# ---------------------------------------------------------------------------------------------------------------

_CONTRACT = {"add", "sub", "neg", "double", "mul", "square", "mul_many", "select", "is_zero", "eq", "zeros_like",
             "ones_like", "mul_small"}


class _ContractField:
    """Delegates to an ops field but only exposes the contract (AttributeError otherwise), counting mul_many."""

    def __init__(self, base):
        self._base = base
        self.rounds = 0

    def __getattr__(self, name):
        if name not in _CONTRACT:
            raise AttributeError(f"formula used {name!r}, which is not in the field contract")
        if name == "mul_many":
            def counted(pairs):
                self.rounds += 1
                return self._base.mul_many(pairs)
            return counted
        return getattr(self._base, name)


@pytest.mark.parametrize("g", GROUPS)
def test_formulas_use_only_the_field_contract(g):
    curve = oc.CURVES[g]
    F = _ContractField(curve.field)
    shape = (4,)
    z = curve.field.zeros(shape)
    xyzz = oc.XYZZ(z, z, z, z)
    jac = oc.Jacobian(z, z, z)
    aff = oc.Affine(z, z, jnp.zeros(shape, bool))
    rounds = {}
    for name, fn, args in [
        ("xyzz_add_mixed", curve.xyzz_add_mixed, (xyzz, aff)),
        ("xyzz_add_mixed_no_dbl", curve.xyzz_add_mixed_no_dbl, (xyzz, aff)),
        ("xyzz_add", curve.xyzz_add, (xyzz, xyzz)),
        ("xyzz_double", curve.xyzz_double, (xyzz,)),
        ("jacobian_add", curve.jacobian_add, (jac, jac)),
        ("jacobian_add_mixed", curve.jacobian_add_mixed, (jac, aff)),
        ("jacobian_double", curve.jacobian_double, (jac,)),
        ("xyzz_to_jacobian", curve.xyzz_to_jacobian, (xyzz,)),
        ("xyzz_neg", curve.xyzz_neg, (xyzz,)),
    ]:
        F.rounds = 0
        jax.eval_shape(lambda *a: fn(*a, F=F), *args)
        rounds[name] = F.rounds
    # the multiplication depth documented in ops/curve.py
    assert rounds["xyzz_add_mixed"] == 4 and rounds["xyzz_add"] == 4 and rounds["xyzz_double"] == 3
    assert rounds["xyzz_add_mixed_no_dbl"] == 4
    assert rounds["jacobian_add"] == 6 and rounds["jacobian_double"] == 3


def test_fixed_base_mul_chunks_and_edges(rng, monkeypatch):
    """ops.fixed_base.mul (setup's batched s * G) across several chunks, with edge scalars, against the reference;
    and the chunk rule: 2048 on CPU, the batch's power of two in [2^14, 2^20] on an accelerator."""
    from cuzk_jax.ops import fixed_base

    R1 = rc.CURVES["g1"]
    ks = [0, 1, 2, C.R - 1, C.R - 2] + [rng.randrange(C.R) for _ in range(6)]
    got = fixed_base.mul(oc.g1, encoding.ints_to_limbs(ks, "fr"), chunk=8)  # 11 scalars: two chunks, padded
    assert fixed_base.reference_to_affine(oc.g1, []).inf.shape == (0,)
    x, y, inf = (np.asarray(a) for a in got)
    for i, k in enumerate(ks):
        want = R1.mul(R1.generator, k)
        if want is None:
            assert inf[i]
        else:
            assert not inf[i]
            xy = (encoding.limbs_to_ints(x[:, i], "fq", True)[0], encoding.limbs_to_ints(y[:, i], "fq", True)[0])
            assert xy == want
    assert fixed_base.default_chunk(10**6) == 2048  # this test runs on CPU
    monkeypatch.setattr(fixed_base.jax, "default_backend", lambda: "gpu")
    assert [fixed_base.default_chunk(n) for n in (1, 3000, 1 << 16, (1 << 16) + 1, 3_564_216)] == [
        1 << 14, 1 << 14, 1 << 16, 1 << 17, 1 << 20]
