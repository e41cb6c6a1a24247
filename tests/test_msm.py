"""MSM (ops/msm.py, ops/pallas/bucket.py, cuzk_jax.msm) against py_arkworks_bls12381 multiexp and the reference.

Compile time is the budget here: every jitted MSM is shared through ``ops.msm.msm_jit`` and inputs are padded to
the MSM's size buckets (64 / 1024 / 4096 points), so the whole file compiles a handful of programs.
"""

from __future__ import annotations

import dataclasses
import random

import jax.numpy as jnp
import numpy as np
import py_arkworks_bls12381 as pa
import pytest

import cuzk_jax
from cuzk_jax import encoding as enc
from cuzk_jax.errors import BadInput
from cuzk_jax.ops import curve as cv
from cuzk_jax.ops import msm as M
from cuzk_jax.ops.config import MsmConfig
from cuzk_jax.reference import curve as rc
from cuzk_jax.reference import field as rf
from cuzk_jax.reference.constants import R

ARK = {"g1": pa.G1Point, "g2": pa.G2Point}


# ---------------------------------------------------------------------------------------------------------------
# helpers: points as arkworks objects <-> device Affine arrays <-> reference tuples
# ---------------------------------------------------------------------------------------------------------------


def ark_scalar(v: int):
    return pa.Scalar.from_le_bytes(v.to_bytes(32, "little"))


def ark_points(group, ks):
    return [ARK[group]() * ark_scalar(k) for k in ks]


def ark_to_ref(group, p):
    if p == ARK[group].identity():
        return None
    b = p.to_xy_bytes_le()
    v = [int.from_bytes(b[48 * i : 48 * i + 48], "little") for i in range(len(b) // 48)]
    return (v[0], v[1]) if group == "g1" else ((v[0], v[1]), (v[2], v[3]))


def ark_msm(group, pts, scalars):
    if not pts:
        return None
    return ark_to_ref(group, ARK[group].multiexp_unchecked(pts, [ark_scalar(s) for s in scalars]))


def affine_arrays(group, refs, n_pad=None):
    """Reference points (tuples / None) -> device Affine, padded with infinity to ``n_pad``."""
    n = len(refs)
    n_pad = n_pad or n
    refs = list(refs) + [None] * (n_pad - n)
    inf = np.array([p is None for p in refs], dtype=bool)  # bool even when empty
    if group == "g1":
        xs = [0 if p is None else p[0] for p in refs]
        ys = [0 if p is None else p[1] for p in refs]
        x = enc.ints_to_limbs(xs, "fq", montgomery=True)
        y = enc.ints_to_limbs(ys, "fq", montgomery=True)
    else:
        comp = lambda p, i, j: 0 if p is None else p[i][j]  # noqa: E731
        x = np.stack([enc.ints_to_limbs([comp(p, 0, j) for p in refs], "fq", True) for j in range(2)])
        y = np.stack([enc.ints_to_limbs([comp(p, 1, j) for p in refs], "fq", True) for j in range(2)])
    x = np.where(inf, 0, x).astype(np.uint32)
    y = np.where(inf, 0, y).astype(np.uint32)
    return cv.Affine(jnp.asarray(x), jnp.asarray(y), jnp.asarray(inf))


def scalar_limbs(scalars, n_pad=None):
    n_pad = n_pad or len(scalars)
    out = np.zeros((8, n_pad), np.uint32)
    if scalars:
        out[:, : len(scalars)] = enc.ints_to_limbs(list(scalars), "fr")
    return jnp.asarray(out)


def jac_to_ref(group, jac):
    """Device Jacobian (batch ``()`` or ``(P,)``) -> reference tuple(s), converted on the host with Python ints."""
    lead = 1 if group == "g1" else 2
    coords = [np.asarray(c) for c in jac]
    batch = coords[0].shape[lead:]
    if group == "g1":
        F = rf.fq
        vals = [enc.limbs_to_ints(c.reshape(12, -1), "fq", montgomery=True) for c in coords]
    else:
        F = rf.fq2
        vals = [
            list(zip(enc.limbs_to_ints(c[0].reshape(12, -1), "fq", True), enc.limbs_to_ints(c[1].reshape(12, -1), "fq", True)))
            for c in coords
        ]
    out = []
    for X, Y, Z in zip(*vals):
        if Z in (0, (0, 0)):
            out.append(None)
            continue
        zi = F.inv(Z)
        zi2 = F.mul(zi, zi)
        out.append((F.mul(X, zi2), F.mul(Y, F.mul(zi2, zi))))
    return out if batch else out[0]


def run_msm(fn, group, refs, scalars, pad=True):
    """Pad on the host to the MSM's size bucket (one compiled program per bucket), or not (``pad=False``: the MSM
    pads inside)."""
    n = len(refs)
    n_pad = M.padded_size(n) if pad else n
    return jac_to_ref(group, fn(affine_arrays(group, refs, n_pad), scalar_limbs(scalars, n_pad)))


def random_case(group, n, rng):
    ks = [rng.randrange(1, R) for _ in range(n)]
    pts = ark_points(group, ks)
    refs = [ark_to_ref(group, p) for p in pts]
    scalars = [rng.randrange(R) for _ in range(n)]
    return pts, refs, scalars


_XLA = {g: M.msm_jit(g, MsmConfig("xla")) for g in ("g1", "g2")}
# the Pallas kernels under the interpreter, with small segments and blocks (bucket runs cross lanes and programs)
_INTERPRET = MsmConfig("pallas_interpret", block=8, seg=8, acc_seg=8)


# ---------------------------------------------------------------------------------------------------------------
# static rules and digits
# ---------------------------------------------------------------------------------------------------------------


def test_window_rule_and_buckets():
    assert [M.window_bits(1 << k) for k in (16, 18, 20, 22, 24)] == [13, 14, 16, 18, 20]
    for c in range(2, M.MAX_WINDOW + 1):
        assert c * M.num_windows(c) >= 256 and c * (M.num_windows(c) - 1) < 256
    assert [M.padded_size(n) for n in (0, 1, 17, 64, 65, 1000, 4096)] == [0, 64, 64, 64, 128, 1024, 4096]


@pytest.mark.parametrize("c", [2, 5, 13, 16, 20])
def test_signed_digits_reconstruct(c, rng):
    vals = [0, 1, R - 1, 2**254, (1 << c) - 1, 1 << (c - 1), ((1 << 255) - 1) // ((1 << c) - 1) * ((1 << c) - 1) % R]
    vals += [rng.randrange(R) for _ in range(25)]
    d = np.asarray(M.signed_digits(jnp.asarray(enc.ints_to_limbs(vals, "fr")), c)).astype(np.int64)
    half = 1 << (c - 1)
    assert d.shape == (M.num_windows(c), len(vals))
    assert (d > -half).all() and (d <= half).all()
    for j, v in enumerate(vals):
        assert sum(int(d[w, j]) << (c * w) for w in range(d.shape[0])) == v
    # negative twin: flipping the sign of a non-zero digit breaks the reconstruction
    j = next(j for j in range(len(vals)) if d[0, j] != 0)
    assert sum(int(d[w, j]) << (c * w) for w in range(d.shape[0])) - 2 * int(d[0, j]) != vals[j]


def test_sorted_pairs_counts_live_digits():
    plan = M.Plan(G=1, n=4, c=4, shared_bases=True)
    sc = jnp.asarray(enc.ints_to_limbs([0, 1, 8, 9], "fr"))[:, None, :]
    keys, vals, count = M.sorted_pairs(sc, plan)
    keys, vals = np.asarray(keys), np.asarray(vals)
    # 1 -> digit 1 (window 0); 8 -> digit 8; 9 = 16 - 7 -> digits -7, +1
    assert int(count) == 4
    assert list(keys[:4]) == [0, 6, 7, 8] and (keys[4:] == plan.NB).all()
    assert vals[0] == 1 and vals[1] < 0 and (vals[1] & 0x7FFFFFFF) == 3 and vals[2] == 2 and vals[3] == 3


# ---------------------------------------------------------------------------------------------------------------
# XLA path against arkworks
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 1000, 4096])
def test_msm_g1_vs_arkworks(n, rng):
    pts, refs, scalars = random_case("g1", n, rng)
    pad = n != 1000  # N = 1000 goes in unpadded: the MSM pads it to 1024 itself
    got = run_msm(_XLA["g1"], "g1", refs, scalars, pad=pad)
    assert got == ark_msm("g1", pts, scalars)
    if n:
        # negative twin: one scalar off by one gives a different point
        bad = list(scalars)
        bad[-1] = (bad[-1] + 1) % R
        assert run_msm(_XLA["g1"], "g1", refs, bad, pad=pad) != got


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17])
def test_msm_g2_vs_arkworks(n, rng):
    pts, refs, scalars = random_case("g2", n, rng)
    got = run_msm(_XLA["g2"], "g2", refs, scalars)
    assert got == ark_msm("g2", pts, scalars)
    if n:
        bad = list(scalars)
        bad[0] = (bad[0] + 1) % R
        assert run_msm(_XLA["g2"], "g2", refs, bad) != got


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_msm_vs_reference_multiexp(group, rng):
    curve = rc.g1 if group == "g1" else rc.g2
    refs = [curve.mul(curve.generator, rng.randrange(1, 1000)) for _ in range(3)]
    scalars = [rng.randrange(R), 1, R - 1]
    assert run_msm(_XLA[group], group, refs, scalars) == curve.multiexp(refs, scalars)


def _edge_cases(rng, group="g1"):
    g = [rng.randrange(1, R) for _ in range(6)]
    pts = ark_points(group, g)
    refs = [ark_to_ref(group, p) for p in pts]
    cases = {}
    cases["all_zero"] = (refs * 3, [0] * 18)
    cases["zeros_and_ones"] = (refs * 7, [rng.choice([0, 1, 1, 1]) for _ in range(42)])
    cases["all_ones"] = (refs * 10, [1] * 60)
    # repeated bases: P with s and -s cancels; P with s and s doubles; identical digits everywhere
    cases["repeated"] = ([refs[0]] * 6 + [refs[1]] * 4, [5, R - 5, 7, 7, R - 1, 1, 3, 3, 3, 3])
    cases["same_scalar"] = (refs * 8, [rng.randrange(R)] * 48)
    cases["max_digits"] = (refs * 2, [R - 1, R - 2, 2**254 + 2**253, (1 << 254) - 1, 2**15 * 0x5555, 0x8000] * 2)
    cases["inf_bases"] = ([None, refs[2], None, refs[3], None], [rng.randrange(R) for _ in range(5)])
    cases["only_inf"] = ([None, None], [3, 4])
    return cases


def _expected(group, refs, scalars):
    pairs = [(p, s) for p, s in zip(refs, scalars) if p is not None]
    if not pairs:
        return None
    return ark_msm(group, [_ref_to_ark(group, p) for p, _ in pairs], [s for _, s in pairs])


def _ref_to_ark(group, p):
    x, y = p
    if group == "g1":
        return pa.G1Point.from_xy_bytes_unchecked_le(x.to_bytes(48, "little") + y.to_bytes(48, "little"))
    return pa.G2Point.from_xy_bytes_unchecked_le(b"".join(v.to_bytes(48, "little") for v in (*x, *y)))


def test_msm_edge_cases_g1():
    rng = random.Random(7)
    for name, (refs, scalars) in _edge_cases(rng).items():
        got = run_msm(_XLA["g1"], "g1", refs, scalars)
        assert got == _expected("g1", refs, scalars), name
    # the cancelling pair really is zero
    refs = _edge_cases(random.Random(7))["repeated"][0][:2]
    assert run_msm(_XLA["g1"], "g1", refs, [5, R - 5]) is None


def test_msm_many_windows_small_window_override(rng):
    """A forced window of 2 bits (128 windows) exercises long Horner chains and tiny buckets."""
    pts, refs, scalars = random_case("g1", 5, rng)
    fn = M.msm_jit("g1", MsmConfig("xla"), window=2)
    assert run_msm(fn, "g1", refs, scalars) == ark_msm("g1", pts, scalars)


# ---------------------------------------------------------------------------------------------------------------
# batch axis and chunking
# ---------------------------------------------------------------------------------------------------------------


def test_batched_per_partition_bases_equals_separate(rng):
    P, n = 3, 20
    cases = [random_case("g1", n, rng) for _ in range(P)]
    n_pad = M.padded_size(n)
    arrs = [affine_arrays("g1", refs, n_pad) for _, refs, _ in cases]
    bases = cv.Affine(*[jnp.stack([getattr(a, f) for a in arrs], axis=-2) for f in ("x", "y", "inf")])
    sc = jnp.stack([scalar_limbs(s, n_pad) for _, _, s in cases], axis=1)
    got = jac_to_ref("g1", _XLA["g1"](bases, sc))
    assert got == [ark_msm("g1", pts, s) for pts, _, s in cases]
    assert got[0] != got[1]


def test_batched_shared_bases_chunked(rng):
    """Shared bases, two partitions, and a pair budget that forces one partition per pass (lax.map) and two
    point chunks per partition (fori_loop with the running sum carried): same answers as separate MSMs."""
    n = 64
    pts, refs, s0 = random_case("g1", n, rng)
    s1 = [rng.randrange(R) for _ in range(n)]
    s1[:10] = [0] * 10
    c = M.window_bits(n)
    fn = M.msm_jit("g1", MsmConfig("xla"), max_pairs=(n // 2) * M.num_windows(c))
    sc = jnp.stack([scalar_limbs(s0), scalar_limbs(s1)], axis=1)
    got = jac_to_ref("g1", fn(affine_arrays("g1", refs), sc))
    assert got == [ark_msm("g1", pts, s0), ark_msm("g1", pts, s1)]
    # the same bound given by the config (MsmConfig.max_pairs; parsed from text as the prover's config gives it)
    by_config = M.msm_jit("g1", MsmConfig.parse(f"xla:max_pairs={(n // 2) * M.num_windows(c)}"))
    assert jac_to_ref("g1", by_config(affine_arrays("g1", refs), sc)) == got


# ---------------------------------------------------------------------------------------------------------------
# Pallas kernels (interpret mode) against the XLA path
# ---------------------------------------------------------------------------------------------------------------


def test_pallas_interpret_equals_xla_g1(rng):
    """Both kernels (bases accumulation; the general step: partial merge, row sums, window sums, scaling, final
    sum) run through the Pallas interpreter on three partitions at once (per-partition bases; the same shapes as
    the batched XLA test, so the XLA program is shared), with small segments and blocks so that bucket runs cross
    lanes and programs; compared with the XLA path and with arkworks."""
    fn = M.msm_jit("g1", _INTERPRET)
    edge = _edge_cases(random.Random(11))
    groups = [
        (random_case("g1", 30, rng)[1:], random_case("g1", 40, rng)[1:], edge["same_scalar"]),
        (edge["zeros_and_ones"], edge["inf_bases"], edge["all_zero"]),
        (edge["repeated"], edge["max_digits"], edge["all_ones"]),
    ]
    n_pad = 64
    for cases in groups:
        arrs = [affine_arrays("g1", r, n_pad) for r, _ in cases]
        bases = cv.Affine(*[jnp.stack([getattr(a, f) for a in arrs], axis=-2) for f in ("x", "y", "inf")])
        sc = jnp.stack([scalar_limbs(s, n_pad) for _, s in cases], axis=1)
        got = jac_to_ref("g1", fn(bases, sc))
        assert got == jac_to_ref("g1", _XLA["g1"](bases, sc))
        assert got == [_expected("g1", r, s) for r, s in cases]


@pytest.mark.parametrize("dbl_branch", [0, 1])
def test_pallas_interpret_level1_addition_forms_give_the_same_msm(dbl_branch):
    """Both forms of the level-1 kernel's addition (``MsmConfig.dbl_branch``: 1, the G1 default, leaves out the
    doubling case and branches to a doubling; 0, the G2 default, is the unified formula) against arkworks, on the
    edge groups whose bucket runs cross lanes and programs: the partition of zeros and ones, bases at infinity,
    repeated points (a base added to itself in one bucket: the doubling branch) and scalars with maximal digits."""
    fn = M.msm_jit("g1", dataclasses.replace(_INTERPRET, dbl_branch=dbl_branch))
    edge = _edge_cases(random.Random(12))
    cases = (edge["zeros_and_ones"], edge["inf_bases"], edge["repeated"], edge["max_digits"])
    n_pad = 64
    arrs = [affine_arrays("g1", r, n_pad) for r, _ in cases]
    bases = cv.Affine(*[jnp.stack([getattr(a, f) for a in arrs], axis=-2) for f in ("x", "y", "inf")])
    sc = jnp.stack([scalar_limbs(s, n_pad) for _, s in cases], axis=1)
    assert jac_to_ref("g1", fn(bases, sc)) == [_expected("g1", r, s) for r, s in cases]


def test_pallas_interpret_chunks_merge_their_buckets(rng):
    """Points in chunks (pair budgets of 32 and of 16 points per pass: 2 and 4 chunks, one partition per pass):
    the Pallas path adds each chunk's bucket array into the running one (mode MERGE) and reduces the buckets once.
    The 16-point chunks are built so that the merge meets its cases: chunk 1 repeats chunk 0's points and scalars
    (equal buckets: a doubling), chunk 2 holds their negatives with the same scalars (opposite buckets: the
    identity), chunk 3 random points with bases at infinity and a zero scalar. Two partitions (``lax.map``), against
    arkworks and the XLA path (which carries a running sum per chunk instead)."""
    from cuzk_jax.reference.constants import P as Q

    n, k = 64, 16
    _, a, sa = random_case("g1", k, rng)
    _, d, sd = random_case("g1", k, rng)
    d[3] = d[9] = None
    sd[5] = 0
    refs0 = a + a + [(x, (Q - y) % Q) for x, y in a] + d
    sc0 = sa + sa + sa + sd
    _, refs1, sc1 = random_case("g1", n, rng)
    sc1[k:2 * k] = sc1[:k]
    refs1[k:2 * k] = refs1[:k]  # partition 1: only the doubling case
    bases = cv.Affine(*[jnp.stack([getattr(affine_arrays("g1", r), f) for r in (refs0, refs1)], axis=-2)
                        for f in ("x", "y", "inf")])
    sc = jnp.stack([scalar_limbs(sc0), scalar_limbs(sc1)], axis=1)
    want = [_expected("g1", refs0, sc0), _expected("g1", refs1, sc1)]
    W = M.num_windows(M.window_bits(k))
    for chunk in (2 * k, k):
        assert M.pass_shape(2, n, chunk * W)[1:] == (1, chunk)
        assert jac_to_ref("g1", M.msm_jit("g1", _INTERPRET, max_pairs=chunk * W)(bases, sc)) == want
    assert jac_to_ref("g1", M.msm_jit("g1", MsmConfig("xla"), max_pairs=k * W)(bases, sc)) == want
    assert want[0] == _expected("g1", a + d, sa + sd) != _expected("g1", d, sd)  # -a cancels one a


def test_base_rows_read_in_place(rng):
    """Bases held as ``BaseRows`` (the kernels' point-major layout, made once): 45 points -- not a power of two,
    so only the scalars are padded -- in four 16-point chunks that index into the one array (``base0``), through
    the interpreted Pallas kernels and the XLA path (which converts them back), equal to arkworks; the layout
    round-trips. Negative twins: bases at infinity, per-partition bases and a row count that does not match the
    scalars are refused with BadInput."""
    n, k = 45, 16
    pts, refs, scalars = random_case("g1", n, rng)
    bases = affine_arrays("g1", refs)
    rows = M.base_rows("g1", bases)
    assert rows.rows.shape == (n, 24) and M.num_bases(rows) == M.num_bases(bases) == n
    back = M.rows_affine("g1", rows)
    assert np.array_equal(back.x, bases.x) and np.array_equal(back.y, bases.y) and not np.asarray(back.inf).any()
    sc = scalar_limbs(scalars)
    want = ark_msm("g1", pts, scalars)
    mp = k * M.num_windows(M.window_bits(k))
    assert M.pass_shape(1, M.padded_size(n), mp)[1:] == (1, k)
    assert jac_to_ref("g1", M.msm_jit("g1", _INTERPRET, max_pairs=mp)(rows, sc)) == want
    assert jac_to_ref("g1", _XLA["g1"](rows, sc)) == want
    with pytest.raises(BadInput, match="infinity"):
        M.base_rows("g1", affine_arrays("g1", refs[:3] + [None]))
    with pytest.raises(BadInput, match="shared set"):
        M.base_rows("g1", cv.Affine(bases.x[:, None], bases.y[:, None], bases.inf[None]))
    with pytest.raises(BadInput, match="BaseRows must be uint32"):
        M.msm(rows, sc[:, :-1], "g1", config=_INTERPRET)


@pytest.mark.slow  # the interpreted G2 kernels (~25 s on 2 cores)
def test_pallas_interpret_level1_dbl_branch_g2():
    """The addition without its doubling case (not G2's default) on G2 (the Fq2 field in the kernel), with
    repeated bases in one bucket (the doubling branch), against arkworks."""
    fn = M.msm_jit("g2", dataclasses.replace(_INTERPRET, dbl_branch=1))
    edge = _edge_cases(random.Random(13), group="g2")
    cases = (edge["repeated"], edge["zeros_and_ones"])
    n_pad = 64
    arrs = [affine_arrays("g2", r, n_pad) for r, _ in cases]
    bases = cv.Affine(*[jnp.stack([getattr(a, f) for a in arrs], axis=-2) for f in ("x", "y", "inf")])
    sc = jnp.stack([scalar_limbs(s, n_pad) for _, s in cases], axis=1)
    assert jac_to_ref("g2", fn(bases, sc)) == [_expected("g2", r, s) for r, s in cases]


# ---------------------------------------------------------------------------------------------------------------
# precomputed window tables (ops/msm_precomputed.py)
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def precomputed_case():
    """40 shared G1 bases (one at infinity, one repeated), c = 7 (37 windows, a 1480-entry table), three partitions
    of scalars with the edge values; compiled once for the tests below."""
    from cuzk_jax.ops import msm_precomputed as MP

    rng = random.Random(21)
    refs = [ark_to_ref("g1", p) for p in ark_points("g1", [rng.randrange(1, R) for _ in range(38)])]
    refs = refs[:5] + [None] + refs[5:] + [refs[0]]
    sc = [[rng.randrange(R) for _ in refs],
          [0, 1, R - 1, R - 2, 2**254, 1 << 6, (1 << 7) - 1] + [rng.choice([0, 1]) for _ in refs[7:]],
          [0] * len(refs)]
    c = 7
    table = MP.precompute(affine_arrays("g1", refs), "g1", c=c)
    scal = jnp.stack([scalar_limbs(s) for s in sc], axis=1)
    return MP, refs, sc, c, table, scal


def test_precompute_table_entries(precomputed_case):
    MP, refs, _, c, table, _ = precomputed_case
    N, W = len(refs), M.num_windows(c)
    assert table.x.shape == (12, W * N)
    got = jac_to_ref("g1", cv.g1.affine_to_jacobian(table))
    for w, i in [(0, 0), (1, 3), (W - 1, 7), (17, N - 1), (5, 5)]:
        assert got[w * N + i] == rc.g1.mul(refs[i], 1 << (c * w))  # entry 5 is the base at infinity: None


def test_precompute_in_chunks_equals_one_program(precomputed_case):
    """40 bases built 16 at a time (three programs of one shape, the last padded with points at infinity) give
    the same table bit for bit; a bad chunk is refused."""
    MP, refs, _, c, table, _ = precomputed_case
    bases = affine_arrays("g1", refs)
    chunked = MP.precompute(bases, "g1", c=c, chunk=16)
    assert all(np.array_equal(np.asarray(u), np.asarray(v)) for u, v in zip(table, chunked))
    with pytest.raises(ValueError, match="chunk"):
        MP.precompute(bases, "g1", c=c, chunk=0)


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_precompute_pallas_equals_xla(group, rng):
    """The table from rounds of the SHIFT kernel (every lane doubled c times, interpreted) equals the XLA one bit
    for bit, a base at infinity included."""
    from cuzk_jax.ops import msm_precomputed as MP

    refs = [ark_to_ref(group, p) for p in ark_points(group, [rng.randrange(1, R) for _ in range(4)])] + [None]
    bases = affine_arrays(group, refs)
    a = MP.precompute(bases, group, c=9, config=MsmConfig("xla"))
    b = MP.precompute(bases, group, c=9, config=MsmConfig("pallas_interpret"))
    assert all(np.array_equal(np.asarray(u), np.asarray(v)) for u, v in zip(a, b))
    assert bool(a.inf[4]) and bool(a.inf[M.num_windows(9) * 5 - 1]) and not bool(a.inf[5])
    with pytest.raises(ValueError, match="unknown MsmConfig kernel 'cuda'"):
        MP.precompute(bases, group, c=9, config="cuda")


@pytest.mark.parametrize("kernel", ["xla", "pallas_interpret"])
def test_precomputed_msm_vs_arkworks(precomputed_case, kernel):
    """One bucket set for all windows, three partitions in one pass, against arkworks; with a negative twin."""
    MP, refs, sc, c, table, scal = precomputed_case
    fn = MP.msm_jit("g1", c, _INTERPRET if kernel == "pallas_interpret" else MsmConfig("xla"))
    assert jac_to_ref("g1", fn(table, scal)) == [_expected("g1", refs, s) for s in sc]
    if kernel == "xla":
        bad = scal.at[0, 0, 0].add(1)  # first scalar + 1
        assert jac_to_ref("g1", fn(table, bad))[0] != _expected("g1", refs, sc[0])
        # partitions in groups (max_pairs fits one partition at a time) give the same points
        one = MP.msm(table, scal[:, 1], "g1", c=c, config=MsmConfig("xla"), max_pairs=M.num_windows(c) * len(refs))
        assert jac_to_ref("g1", one) == _expected("g1", refs, sc[1])


def test_precomputed_msm_errors(precomputed_case):
    MP, refs, _, c, table, scal = precomputed_case
    with pytest.raises(ValueError, match="precompute"):
        MP.msm(table, scal, "g1", c=c + 1)
    with pytest.raises(ValueError, match="window c"):
        MP.msm(table, scal, "g1", c=1)
    with pytest.raises(ValueError, match="max_pairs"):
        MP.msm(table, scal, "g1", c=c, max_pairs=100)
    assert [MP.window_bits(1 << k) for k in (10, 16, 20, 24)] == [9, 13, 16, 20]


# ---------------------------------------------------------------------------------------------------------------
# host API
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("group,n", [("g1", 5), ("g2", 3)])
def test_host_msm_matches_arkworks(group, n, rng):
    pts, _, scalars = random_case(group, n, rng)
    enc_pts = [p.to_compressed_bytes() for p in pts]
    expect = ARK[group].multiexp_unchecked(pts, [ark_scalar(s) for s in scalars]).to_compressed_bytes()
    assert cuzk_jax.msm(enc_pts, scalars, group=group) == expect
    assert cuzk_jax.msm(enc_pts, [0] * n, group=group) == ARK[group].identity().to_compressed_bytes()
    # negative twin: a different scalar vector gives different bytes
    assert cuzk_jax.msm(enc_pts, [1] * n, group=group) != expect
    # an encoded point at infinity contributes nothing
    ident = ARK[group].identity().to_compressed_bytes()
    assert cuzk_jax.msm(enc_pts + [ident], scalars + [12345], group=group) == expect


def test_host_msm_empty_and_errors():
    g = pa.G1Point()
    e = g.to_compressed_bytes()
    assert cuzk_jax.msm([], [], "g1") == pa.G1Point.identity().to_compressed_bytes()
    assert cuzk_jax.msm([], [], "g2") == pa.G2Point.identity().to_compressed_bytes()
    with pytest.raises(ValueError, match="2 points but 1 scalars"):
        cuzk_jax.msm([e, e], [1])
    with pytest.raises(ValueError, match="out of range"):
        cuzk_jax.msm([e], [R])
    with pytest.raises(ValueError, match="out of range"):
        cuzk_jax.msm([e], [-1])
    with pytest.raises(ValueError, match="must be an int"):
        cuzk_jax.msm([e], [1.0])
    with pytest.raises(ValueError, match="must be an int"):
        cuzk_jax.msm([e], [True])
    with pytest.raises(ValueError, match="unknown group"):
        cuzk_jax.msm([e], [1], group="g3")
    with pytest.raises(ValueError, match="48 bytes"):
        cuzk_jax.msm([e[:47]], [1])
    with pytest.raises(ValueError):
        cuzk_jax.msm([bytes([e[0] & 0x7F]) + e[1:]], [1])  # compression flag cleared
    with pytest.raises(ValueError):
        cuzk_jax.msm([e], [1], group="g2")  # a G1 encoding is not a G2 one


def test_msm_sort_phase_and_kernel_option_errors():
    """The bench's ``sort`` phase row (steps 1-3 alone) returns every pair of the plan, live ones first and sorted;
    bad kernel options fail with a ValueError before any kernel is traced."""
    from types import SimpleNamespace

    from cuzk_jax.bench import msm as BM
    from cuzk_jax.ops.pallas import bucket as pk

    rows = BM.run(SimpleNamespace(group=["g1"], log_n=["6"], impl=["sort"], batch=1, reps=1, warmup=0))
    n = M.padded_size(64)
    assert rows[0]["pairs"] == n * M.num_windows(M.window_bits(n)) and rows[0]["median_ms"] > 0
    keys, _, count = BM._sort_jit(1, 6)(None, jnp.ones((8, 1, 64), jnp.uint32))
    keys = np.asarray(keys)
    assert (np.diff(keys[: int(count)]) >= 0).all() and int(count) > 0
    bases = cv.Affine(jnp.zeros((12, 64), jnp.uint32), jnp.zeros((12, 64), jnp.uint32), jnp.ones((64,), bool))
    with pytest.raises(ValueError, match="stages"):
        M.msm(bases, jnp.zeros((8, 64), jnp.uint32), config="pallas_interpret:stages=6")
    with pytest.raises(ValueError, match="modes"):
        pk.general_step(cv.g1, jnp.zeros((pk.NPRM,), jnp.int32), jnp.zeros((128,), jnp.int32),
                        jnp.zeros((48, 128), jnp.uint32), jnp.zeros((48, 128), jnp.uint32), interpret=True,
                        modes=("bogus",))


def _cuda_mlir(fn, *args) -> str:
    """``fn`` lowered for CUDA on this GPU-less machine (the Triton custom calls allowed): its MLIR text; skips
    the test where the Pallas Triton backend is missing."""
    import jax
    from jax import export

    try:
        from jax.experimental.pallas import triton  # noqa: F401
    except ImportError:
        pytest.skip("Pallas Triton backend not available")
    with jax.enable_x64(True):
        exp = export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=[
            export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")])(*args)
    return exp.mlir_module()


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_default_kernels_lower_to_triton_with_ptx_blocks(group):
    """The GPU default kernels (``MsmConfig.default("gpu")``) lower for CUDA on this GPU-less machine, with the
    PTX carry-chain blocks of ops/pallas/ptx_field.py in them (their interpret twin runs in the tests above)."""
    import jax

    from cuzk_jax.ops.pallas import bucket as pk

    assert MsmConfig.default("gpu").kernel == "pallas"
    curve = cv.CURVES[group]
    Lc = 12 if group == "g1" else 24
    block, seg = 64, 8
    n = 4 * block * seg
    S = jax.ShapeDtypeStruct
    opts = dict(block=block, num_warps=2)
    acc = (lambda *a: pk.accumulate_bases(curve, *a, seg=seg, **opts),
           (S((), jnp.int32), S((), jnp.bool_), S((n,), jnp.int32), S((n,), jnp.int32), S((n, 2 * Lc), jnp.uint32),
            S((4 * Lc, 2 * n), jnp.uint32)))
    shift = (lambda *a: pk.general_step(curve, *a, modes=("shift",), **opts),
             (S((pk.NPRM,), jnp.int32), S((n,), jnp.int32), S((4 * Lc, n), jnp.uint32), S((4 * Lc, n), jnp.uint32)))
    for fn, args in (acc, shift):
        text = _cuda_mlir(fn, *args)
        assert "xla.gpu.triton" in text and "madc.hi.cc.u32" in text and "mad.wide.u32" not in text
        if group == "g1":  # the Fq product block's two-chain form (G2's Fq2 product is a block of its own)
            assert "add.cc.u32 x1, x1, y1" in text


def test_pallas_pass_lowers_without_conditionals():
    """The whole G1 MSM at the GPU default lowers for CUDA with one Triton kernel per kernel (kernel 1 and kernel
    2's three modes: the three accumulation stages call one lowered function) and no ``case``: a conditional that
    passes the pass's ``(4 Lc, nbuf)`` buffers through makes XLA copy them. The twin: the same count of ``case`` ops
    is found in a program that has one (the check is not blind)."""
    import jax

    from cuzk_jax.ops.curve import Affine

    n = 1 << 12
    S = jax.ShapeDtypeStruct
    args = (Affine(S((12, n), jnp.uint32), S((12, n), jnp.uint32), S((n,), jnp.bool_)), S((8, n), jnp.uint32))
    text = _cuda_mlir(lambda b, s: M.msm(b, s, "g1", config=MsmConfig.default("gpu")), *args)
    assert text.count("xla.gpu.triton") == 4
    assert text.count("stablehlo.case") == 0
    assert text.count("call @general_step(") == 3  # the ACC mode's one function, called by three stages
    switched = _cuda_mlir(lambda x: jax.lax.switch(x[0] % 2, [lambda v: v + 1, lambda v: v * 2], x),
                          S((4,), jnp.int32))
    assert switched.count("stablehlo.case") == 1
    # points in 4 chunks: one more kernel (mode MERGE, which reads the running bucket array), still no case
    chunked = MsmConfig("pallas", max_pairs=(n // 4) * M.num_windows(M.window_bits(n // 4)))
    assert M.pass_shape(1, n, chunked.max_pairs)[1:] == (1, n // 4)
    text = _cuda_mlir(lambda b, s: M.msm(b, s, "g1", config=chunked), *args)
    assert text.count("xla.gpu.triton") == 5 and text.count("stablehlo.case") == 0
    # bases as BaseRows of a row count that is not a power of two (the resident key's layout): the same kernels,
    # with no transpose of the bases left in the program
    m = n - 3
    rows_args = (M.BaseRows(S((m, 24), jnp.uint32)), S((8, m), jnp.uint32))
    affine_text = text
    text = _cuda_mlir(lambda b, s: M.msm(b, s, "g1", config=chunked), *rows_args)
    assert text.count("xla.gpu.triton") == 5
    assert affine_text.count("stablehlo.transpose") == text.count("stablehlo.transpose") + 1  # the per-call copy


def test_kernels_lower_to_triton_with_the_split_products():
    """The NTT pass kernel, the H step's pointwise kernel, the field benchmark's chain kernel, the XYZZ -> affine
    kernel (both groups: G2's inversion is an Fq one) and the setup's marked kernel 1 lower for CUDA with the PTX
    product block (its
    two-chain form: the fold of ``Y_0`` into ``X_0`` that a textbook CIOS block does not have); the G2 kernel
    carries the two-chain Fq2 block (its odd-limb products ``u`` joined by an add chain, the reduction's fold of
    ``g_1`` into word 1)."""
    import jax

    from cuzk_jax.ops.pallas import field_mul
    from cuzk_jax.ops.pallas import ntt as pntt

    S = jax.ShapeDtypeStruct
    ntt = (lambda x, w: pntt.sub_transform(x, w, s=3, n=1 << 12, R_=1, twiddle=True, triton=True),
           (S((8, 1, 8, 512), jnp.uint32), S((1 << 11, 8), jnp.uint32)))
    chain = (lambda a, b: field_mul.ptx_chain(a, b, "fr", k=4, block=64),
             (S((8, 256), jnp.uint32), S((8, 256), jnp.uint32)))
    mul_sub = (lambda a, b, c: field_mul.mul_sub(a, b, c, block=64), (S((8, 2, 128), jnp.uint32),) * 3)
    from cuzk_jax.ops.pallas import bucket as pk

    n = 4 * 64 * 8
    g2 = (lambda *a: pk.accumulate_bases(cv.g2, *a, seg=8, block=64, num_warps=2),
          (S((), jnp.int32), S((), jnp.bool_), S((n,), jnp.int32), S((n,), jnp.int32), S((n, 48), jnp.uint32),
           S((96, 2 * n), jnp.uint32)))
    fold = ("add.cc.u32 x1, x1, y1",)
    from cuzk_jax.ops.pallas import affine as pa

    aff = [(lambda rows, c=c: pa.to_affine(c, rows, 1024, run=16).x, (S((4 * lc, 1026), jnp.uint32),))
           for c, lc in ((cv.g1, 12), (cv.g2, 24))]
    # the fixed-base setup's form of kernel 1: pairs valued -1 carry no base
    marked = (lambda *a: pk.accumulate_bases(cv.g1, *a, seg=8, block=64, num_warps=2, marked=True),
              (S((), jnp.int32), S((), jnp.bool_), S((n,), jnp.int32), S((n,), jnp.int32), S((n, 24), jnp.uint32),
               S((48, 2 * n), jnp.uint32)))
    for (fn, args), signs in ((ntt, fold), (chain, fold), (mul_sub, fold),
                              (g2, ("add.cc.u32 v1, v1, u1", "add.cc.u32 v1, v1, g1")), (aff[0], fold),
                              (aff[1], fold), (marked, fold)):
        text = _cuda_mlir(fn, *args)
        assert "xla.gpu.triton" in text and all(sign in text for sign in signs)


def test_default_pass_bound_rule():
    """The plain MSM's own pass bound (no config or caller bound): the default while one partition's pairs fit it
    (a batch of short partitions keeps its measured bucket arrays), twice that once a partition's points would be
    cut into chunks anyway (fewer, longer chunks); the plan's model of the plain MSM takes the same bound."""
    from cuzk_jax.groth16 import plan as memplan

    for log_n in (10, 20, 24):
        assert M.default_max_pairs(1 << log_n) == M.DEFAULT_MAX_PAIRS
    for log_n in (25, 26, 27):
        n = 1 << log_n
        assert n * M.num_windows(M.window_bits(n)) > M.DEFAULT_MAX_PAIRS
        assert M.default_max_pairs(n) == M.LONG_MAX_PAIRS
        assert M.pass_shape(1, n, M.LONG_MAX_PAIRS)[2] == 2 * M.pass_shape(1, n, M.DEFAULT_MAX_PAIRS)[2]
    assert M.default_max_pairs(1 << 26, window=8) == M.LONG_MAX_PAIRS
    assert memplan.plain_msm_bytes("g1", 1 << 27) == memplan.plain_msm_bytes("g1", 1 << 27, max_pairs=M.LONG_MAX_PAIRS)
    assert memplan.plain_msm_bytes("g1", 1 << 27) > memplan.plain_msm_bytes("g1", 1 << 27, max_pairs=M.DEFAULT_MAX_PAIRS)
    assert memplan.plain_msm_bytes("g1", 1 << 20, 10) == memplan.plain_msm_bytes("g1", 1 << 20, 10, M.DEFAULT_MAX_PAIRS)


def test_default_block_rule_and_long_pass_kernels_lower():
    """Passes of many pairs take 128-lane programs (4 warps) unless the config sets a block; the accumulation kernel
    lowers for CUDA at that block (its 128-lane form ran on the H200 with results equal to the 64-lane one)."""
    from cuzk_jax.ops import msm_split
    from cuzk_jax.ops.pallas import bucket as pk

    assert M.pallas_block(M.LONG_PASS_PAIRS - 1) == pk.DEFAULT_BLOCK == 64
    assert M.pallas_block(M.LONG_PASS_PAIRS) == M.LONG_PASS_BLOCK == 128
    n = 1 << 24  # a 2^24 G1 pass: 218M pairs, the long-pass block
    plan = M.Plan(G=1, n=n, c=M.window_bits(n), shared_bases=True)
    assert plan.M >= M.LONG_PASS_PAIRS and M.pallas_block(plan.M) == 128
    cfg = MsmConfig("pallas")
    # the memory model sizes its buffers with the block the pass runs (nbuf rounds to 2 block at least)
    assert msm_split._pass_state_bytes(plan, "g1", cfg) == msm_split._pass_state_bytes(
        plan, "g1", MsmConfig("pallas", block=128))
    import jax

    S = jax.ShapeDtypeStruct
    k = 4 * 128 * 8
    text = _cuda_mlir(lambda *a: pk.accumulate_bases(cv.CURVES["g1"], *a, seg=8, block=128, num_warps=4),
                      S((), jnp.int32), S((), jnp.bool_), S((k,), jnp.int32), S((k,), jnp.int32),
                      S((k, 24), jnp.uint32), S((48, 2 * k), jnp.uint32))
    assert "xla.gpu.triton" in text
