"""The Groth16 H polynomial (ops.qap) against the Python-int reference and against the defining identity
``h(x) Z(x) == A(x) B(x) - C(x)``, checked at a random point with barycentric evaluation (no NTT code involved).
Every test uses 2 partitions (one satisfied witness, one not) so compiled programs are shared with test_ntt."""

import random

import jax.numpy as jnp
import numpy as np
import pytest
from isolation import isolated

from cuzk_jax import encoding
from cuzk_jax.errors import BadInput
from cuzk_jax.ops import qap
from cuzk_jax.reference import ntt as RN

R = RN.R


def to_arr(vals):
    return jnp.asarray(np.stack([encoding.ints_to_limbs(v, "fr", montgomery=True) for v in vals], axis=1))


def from_arr(y):
    y = np.asarray(y)
    return [encoding.limbs_to_ints(y[:, b], "fr", montgomery=True) for b in range(y.shape[1])]


def partitions(rng, n):
    """Two partitions: (a, b, a*b) -- a satisfied witness -- and one with a single broken constraint."""
    a = [[rng.randrange(R) for _ in range(n)] for _ in range(2)]
    b = [[rng.randrange(R) for _ in range(n)] for _ in range(2)]
    a[0][0], b[0][-1] = 0, R - 1  # edge values
    c = [[x * y % R for x, y in zip(a[p], b[p])] for p in range(2)]
    i = rng.randrange(n)
    c[1][i] = (c[1][i] + 1) % R  # unsatisfied: one constraint off by one
    return a, b, c


@pytest.mark.parametrize("log_n", [1, 6, 8])
def test_compute_h_matches_reference(log_n):
    rng = random.Random(10 + log_n)
    n = 1 << log_n
    a, b, c = partitions(rng, n)
    h = from_arr(qap.compute_h(to_arr(a), to_arr(b), to_arr(c)))
    for p in range(2):
        assert h[p] == RN.compute_h(a[p], b[p], c[p])
    q, rem = RN.compute_h_by_division(a[0], b[0], c[0])
    assert h[0] == q and not any(rem)  # satisfied: the exact quotient ...
    assert h[0][-1] == 0  # ... of degree <= n - 2
    q1, rem1 = RN.compute_h_by_division(a[1], b[1], c[1])
    assert any(rem1) and h[1] != q1  # negative twin: not divisible, not the quotient


def test_h_times_z_is_ab_minus_c_at_a_random_point():
    rng = random.Random(20)
    n = 1 << 8
    a, b, c = partitions(rng, n)
    h = from_arr(qap.compute_h(to_arr(a), to_arr(b), to_arr(c)))
    x = rng.randrange(R)
    for p, expect in ((0, True), (1, False)):  # the unsatisfied partition is the negative twin
        lhs = RN.poly_eval(h[p], x) * RN.vanishing_eval(n, x) % R
        rhs = (RN.lagrange_eval(a[p], x) * RN.lagrange_eval(b[p], x) - RN.lagrange_eval(c[p], x)) % R
        assert (lhs == rhs) is expect


def test_compute_h_any_coset_shift_gives_the_same_quotient():
    rng = random.Random(30)
    n = 1 << 6
    a, b, c = partitions(rng, n)
    h7 = from_arr(qap.compute_h(to_arr(a), to_arr(b), to_arr(c)))
    h5 = from_arr(qap.compute_h(to_arr(a), to_arr(b), to_arr(c), g=5))
    assert h5[0] == h7[0]  # exact division: independent of the coset
    assert h5[1] != h7[1]  # inexact: quotient + remainder / (g^n - 1) depends on g
    assert h5[1] == RN.compute_h(a[1], b[1], c[1], g=5)


@pytest.mark.parametrize("form, gen", [("snarkjs", 5), ("lagrange", 7)])
def test_odd_coset_variants(form, gen):
    """snarkjs's H step (generator-5 domain) and ours for a Lagrange H query (generator 7, the domain our keys'
    QAP lives on): the reference's values, P at the odd points by independent interpolation, and the H query's
    sum equal to (A B - C)(tau) exactly when the partition satisfies."""
    rng = random.Random(40)
    n = 1 << 6
    a, b, c = partitions(rng, n)
    fn, ref = ((qap.compute_h_snarkjs, RN.compute_h_snarkjs) if form == "snarkjs" else
               (qap.compute_h_lagrange, RN.compute_h_lagrange))
    got = from_arr(fn(to_arr(a), to_arr(b), to_arr(c)))
    for p in range(2):
        assert got[p] == ref(a[p], b[p], c[p])
    # independent check: P at the odd points w_2n^(2i+1), interpolating on the form's domain
    w2 = RN.root_of_unity(2 * n, gen)
    for i in (0, 7, n - 1):
        x = pow(w2, 2 * i + 1, R)
        ev = [RN.lagrange_eval(v[0], x, generator=gen) for v in (a, b, c)]
        assert got[0][i] == (ev[0] * ev[1] - ev[2]) % R
    # what the zkey's H points compute: sum_i P_i L^(2n)_(2i+1)(tau) == h(tau) Z(tau) = A B - C at tau
    tau = rng.randrange(R)
    zz = RN.vanishing_eval(2 * n, tau)
    inv2n = pow(2 * n, R - 2, R)
    for p, expect in ((0, True), (1, False)):
        acc = 0
        for i in range(n):
            wj = pow(w2, 2 * i + 1, R)
            acc += got[p][i] * wj * zz * inv2n * pow(tau - wj, R - 2, R)  # L_j(tau) = w^j (tau^2n - 1) / (2n (tau - w^j))
        ev = [RN.lagrange_eval(v[p], tau, generator=gen) for v in (a, b, c)]
        target = (ev[0] * ev[1] - ev[2]) % R
        assert (acc % R == target) is expect
    if form == "lagrange":  # the other domain's values are not these (the generator matters)
        assert got[0] != RN.compute_h_snarkjs(a[0], b[0], c[0])


@pytest.mark.parametrize("log_n, m", [(1, 2), (6, 50), (8, 256)])
def test_split_h_matches_reference(log_n, m):
    """compute_h_split (one program per input vector: the large-domain prover path) on ``m <= n`` values padded
    inside: the reference quotient for the satisfied and the broken partition, both forms."""
    rng = random.Random(70 + log_n)
    n = 1 << log_n
    a, b, c = partitions(rng, m)
    pad = [0] * (n - m)
    full = [[v + pad for v in x] for x in (a, b, c)]
    h = from_arr(qap.compute_h_split(to_arr(a), to_arr(b), to_arr(c), n))
    s = from_arr(qap.compute_h_split(to_arr(a), to_arr(b), to_arr(c), n, form="snarkjs"))
    lg = from_arr(qap.compute_h_split(to_arr(a), to_arr(b), to_arr(c), n, form="lagrange"))
    for p in range(2):
        assert h[p] == RN.compute_h(*(x[p] for x in full))
        assert s[p] == RN.compute_h_snarkjs(*(x[p] for x in full))
        assert lg[p] == RN.compute_h_lagrange(*(x[p] for x in full))
    with pytest.raises(ValueError, match="do not fit"):
        qap.coset_evaluations(to_arr(a), m // 2 if m > 2 else 1)


@pytest.mark.parametrize("config", ["xla", "xla:sub=2"])
def test_split_h_gives_the_msm_scalars(config):
    """``scalars=True`` (the prover's split H step): the H MSM's scalars straight from the last program -- canonical
    limbs, arkworks' form cut to its first ``n - 1`` coefficients, snarkjs's all ``n`` evaluations -- equal to the
    reference, for one pass and for several (the output scaling after the digit reversal). The twin: read as
    Montgomery limbs they are not the reference."""
    rng = random.Random(77)
    n, m = 1 << 6, 50
    a, b, c = partitions(rng, m)
    full = [[v + [0] * (n - m) for v in x] for x in (a, b, c)]
    canon = lambda y: [encoding.limbs_to_ints(np.asarray(y)[:, p], "fr", montgomery=False) for p in range(2)]  # noqa: E731
    args = (to_arr(a), to_arr(b), to_arr(c), n)
    h = qap.compute_h_split(*args, config=config, scalars=True)
    s = qap.compute_h_split(*args, config=config, form="snarkjs", scalars=True)
    assert h.shape == (8, 2, n - 1) and s.shape == (8, 2, n)
    for p in range(2):
        assert canon(h)[p] == RN.compute_h(*(x[p] for x in full))[: n - 1]
        assert canon(s)[p] == RN.compute_h_snarkjs(*(x[p] for x in full))
    assert from_arr(h)[0] != RN.compute_h(*(x[0] for x in full))[: n - 1]


@pytest.mark.parametrize("sub", [4, 2])
def test_split_and_fused_h_with_several_passes(sub):
    """The split and the fused H programs with several XLA passes -- 2 digits of 4 bits and 4 of 2 bits: the coset
    programs' transposed second transform (pass-order coefficients in, natural evaluations out, the coset scaling
    by layout position on its first pass's load), the last transform's digit reversal (the 2-D transpose, the
    blocked one): the reference quotient."""
    from cuzk_jax.ops.config import NttConfig

    rng = random.Random(77)
    n, m = 1 << 8, 200
    a, b, c = partitions(rng, m)
    cfg = NttConfig("xla", sub=sub)
    h = from_arr(qap.compute_h_split(to_arr(a), to_arr(b), to_arr(c), n, config=cfg))
    pad = [0] * (n - m)
    want = [RN.compute_h(*(x[p] + pad for x in (a, b, c))) for p in range(2)]
    assert h == want
    full = [to_arr([v + pad for v in x]) for x in (a, b, c)]
    assert from_arr(qap.compute_h(*full, config=cfg)) == want


def test_h_in_small_windows_matches_reference(monkeypatch):
    """Every windowed elementwise step of the H programs (twiddle and scale tables, coset and output scaling, the
    pointwise ``A B - C``: ops.field.map_last_axis) run as loops of 16-element windows over the 2 x 2^7 batch, as
    they do at sector scale: fused and split programs, both forms, still the reference quotient. (A size no other
    test traces, so the programs are traced afresh under the small window.)"""
    from cuzk_jax.ops import field as F

    monkeypatch.setattr(F, "WINDOW", 16)
    rng = random.Random(90)
    n, m = 1 << 7, 100
    a, b, c = partitions(rng, m)
    full = [[v + [0] * (n - m) for v in x] for x in (a, b, c)]
    h = from_arr(qap.compute_h_split(to_arr(a), to_arr(b), to_arr(c), n))
    s = from_arr(qap.compute_h_split(to_arr(a), to_arr(b), to_arr(c), n, form="snarkjs"))
    fused = from_arr(qap.compute_h(*(to_arr(x) for x in full)))
    for p in range(2):
        assert h[p] == fused[p] == RN.compute_h(*(x[p] for x in full))
        assert s[p] == RN.compute_h_snarkjs(*(x[p] for x in full))


@pytest.mark.slow
@pytest.mark.usefixtures("no_persistent_cache")
@isolated
def test_compute_h_pallas_interpret():
    """The H step through the Pallas sub-transform kernel (interpreter): 2^4 as two passes of 4 points, the coset
    scaling fused into the forward transform's first pass; arkworks and snarkjs forms against the reference."""
    from cuzk_jax.ops.config import NttConfig

    rng = random.Random(50)
    n = 1 << 4
    a, b, c = partitions(rng, n)
    cfg = NttConfig("pallas_interpret", sub=2, block=8)
    h = from_arr(qap.compute_h(to_arr(a), to_arr(b), to_arr(c), config=cfg))
    assert h == [RN.compute_h(a[p], b[p], c[p]) for p in range(2)]
    got = from_arr(qap.compute_h_snarkjs(to_arr(a), to_arr(b), to_arr(c), config=cfg))
    assert got == [RN.compute_h_snarkjs(a[p], b[p], c[p]) for p in range(2)]
    # the split programs on tables the caller holds (kernel layout), 13 of 16 values padded inside
    m = 13
    short = [[v[:m] + [0] * (n - m) for v in x] for x in (a, b, c)]
    tables = qap.h_tables(n, config=cfg)
    split = from_arr(qap.compute_h_split(*(to_arr([v[:m] for v in x]) for x in (a, b, c)), n, config=cfg,
                                         tables=tables))
    assert split == [RN.compute_h(*(x[p] for x in short)) for p in range(2)]


@pytest.mark.slow  # the interpreted pass kernels (~25 s on 2 cores)
@pytest.mark.usefixtures("no_persistent_cache")
@isolated
def test_h_finish_kernel_interpret():
    """``NttConfig.finish="kernel"``: the H step's pointwise ``A B - C`` as one Pallas pass (interpreted here; PTX
    blocks on a GPU) gives the reference quotient through the split programs (the prover's path at scale)."""
    from cuzk_jax.ops.config import NttConfig

    rng = random.Random(51)
    n = 1 << 4
    a, b, c = partitions(rng, n)
    cfg = NttConfig("pallas_interpret", sub=2, block=8, finish="kernel")
    split = from_arr(qap.compute_h_split(to_arr(a), to_arr(b), to_arr(c), n, config=cfg))
    assert split == [RN.compute_h(a[p], b[p], c[p]) for p in range(2)]
    with pytest.raises(ValueError, match="finish=kernel needs"):
        NttConfig("xla", finish="kernel")


def test_h_tables_held_by_the_caller_or_built_in_the_trace():
    """The H step on :func:`qap.h_tables` the caller holds (as the prover does beside its key), and traced inside
    a caller's jit with no tables (built in that program): both the reference quotient, both forms; the tables'
    bytes are what :func:`qap.table_bytes` says (the memory plan's term)."""
    import jax

    rng = random.Random(95)
    n = 1 << 6
    a, b, c = partitions(rng, n)
    args = [to_arr(x) for x in (a, b, c)]
    for form, fn, ref in (("arkworks", qap.compute_h, RN.compute_h),
                          ("snarkjs", qap.compute_h_snarkjs, RN.compute_h_snarkjs),
                          ("lagrange", qap.compute_h_lagrange, RN.compute_h_lagrange)):
        tables = qap.h_tables(n, form=form)
        assert tables.nbytes == qap.table_bytes(n, form)
        held = from_arr(fn(*args, tables=tables))
        traced = from_arr(jax.jit(lambda x, y, z: fn(x, y, z))(*args))  # noqa: B023
        expect = [ref(a[p], b[p], c[p]) for p in range(2)]
        assert held == traced == expect
    # tables for another domain are one clear error, before any work
    with pytest.raises(BadInput, match="h_tables"):
        qap.compute_h(*args, tables=qap.h_tables(2 * n))
    with pytest.raises(BadInput, match="h_tables"):
        qap.coset_evaluations(args[0], n, tables=(tables.roots,))


def test_bad_inputs_rejected():
    z = jnp.zeros((8, 2, 16), jnp.uint32)
    with pytest.raises(ValueError, match="same shape"):
        qap.compute_h(z, z, jnp.zeros((8, 2, 32), jnp.uint32))
    with pytest.raises(ValueError, match="power of two"):
        qap.compute_h(*(jnp.zeros((8, 2, 12), jnp.uint32),) * 3)
    with pytest.raises(ValueError, match="at least 2"):
        qap.compute_h(*(jnp.zeros((8, 2, 1), jnp.uint32),) * 3)
    with pytest.raises(ValueError, match="g\\^n"):
        qap.compute_h(z, z, z, g=1)
    with pytest.raises(ValueError, match="uint32"):
        qap.compute_h(z, z, z.astype(jnp.int32))
