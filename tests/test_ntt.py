"""NTT over Fr: the ops layer and the host API against the Python-int reference (and the reference against the
O(n^2) definition). Every test uses a partition batch of 2 at its size so the compiled programs are shared."""

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from isolation import isolated

import cuzk_jax
from cuzk_jax import encoding
from cuzk_jax.ops import ntt as N
from cuzk_jax.ops.config import NttConfig
from cuzk_jax.reference import ntt as RN

R = RN.R
BATCH = 2
EDGE = [0, 1, 2, R - 1, R - 2, (1 << 256) % R, (1 << 255) % R, 0xFFFFFFFF]


def rows(rng, n, count=BATCH, edge=True):
    out = []
    for b in range(count):
        v = [rng.randrange(R) for _ in range(n)]
        if edge and b == 0:
            for i, e in enumerate(EDGE[:n]):
                v[(i * 7919) % n] = e
        out.append(v)
    return out


def to_arr(vals):
    return jnp.asarray(np.stack([encoding.ints_to_limbs(v, "fr", montgomery=True) for v in vals], axis=1))


def from_arr(y):
    y = np.asarray(y)
    return [encoding.limbs_to_ints(y[:, b], "fr", montgomery=True) for b in range(y.shape[1])]


# ----------------------------------------------------------------------------------------------------- reference


def test_reference_fft_is_the_definition():
    rng = random.Random(1)
    for n in (1, 2, 8, 128, 256):
        v = [rng.randrange(R) for _ in range(n)]
        w = RN.root_of_unity(n)
        assert RN.ntt(v) == RN.dft(v, w)
        assert RN.ntt(v, inverse=True) == [x * pow(n, R - 2, R) % R for x in RN.dft(v, pow(w, R - 2, R))]
        assert RN.intt(RN.ntt(v)) == v
    assert RN.root_of_unity(1 << 32) == cuzk_jax.reference.constants.FR_ROOT_OF_UNITY
    # snarkjs's roots (generator 5) are other primitive roots of the same subgroups from n = 8 on
    assert RN.root_of_unity(8, 5) != RN.root_of_unity(8, 7)
    assert pow(RN.root_of_unity(8, 5), 8, R) == 1 and pow(RN.root_of_unity(8, 5), 4, R) == R - 1


def test_reference_coset_and_division():
    rng = random.Random(2)
    n = 16
    coeffs = [rng.randrange(R) for _ in range(n)]
    g = RN.COSET_GENERATOR
    dom = RN.domain(n)
    assert RN.coset_ntt(coeffs) == [RN.poly_eval(coeffs, g * d % R) for d in dom]
    assert RN.coset_intt(RN.coset_ntt(coeffs)) == coeffs
    # division by x^n - 1: q * Z + rem == p
    p = [rng.randrange(R) for _ in range(2 * n - 1)]
    q, rem = RN.poly_divmod_vanishing(p, n)
    z = [R - 1] + [0] * (n - 1) + [1]
    back = RN.poly_mul(q, z)
    back = [(x + (rem[i] if i < n else 0)) % R for i, x in enumerate(back + [0] * (len(p) - len(back)))]
    assert back[: len(p)] == p
    # barycentric evaluation agrees with the coefficients
    x = rng.randrange(R)
    assert RN.lagrange_eval(RN.ntt(coeffs), x) == RN.poly_eval(coeffs, x)


# ----------------------------------------------------------------------------------------------------- ops layer


@pytest.mark.parametrize("log_n", range(1, 11))
def test_ntt_and_intt_match_reference(log_n):
    rng = random.Random(100 + log_n)
    n = 1 << log_n
    vals = rows(rng, n)
    x = to_arr(vals)
    y = N.ntt(x)
    assert from_arr(y) == [RN.ntt(v) for v in vals]
    z = N.ntt(x, inverse=True)
    assert from_arr(z) == [RN.intt(v) for v in vals]
    # negative twin: the transform is not the identity / not its own inverse
    assert from_arr(y) != vals and from_arr(z) != from_arr(y)


@pytest.mark.parametrize("log_n", [1, 6, 8, 10])
def test_coset_ntt_is_evaluation_at_shifted_points(log_n):
    rng = random.Random(200 + log_n)
    n = 1 << log_n
    g = N.COSET_GENERATOR
    vals = rows(rng, n)
    y = from_arr(N.coset_ntt(to_arr(vals)))
    w = RN.root_of_unity(n)
    points = range(n) if n <= 64 else sorted(rng.sample(range(n), 12))
    for b, v in enumerate(vals):
        for i in points:
            assert y[b][i] == RN.poly_eval(v, g * pow(w, i, R) % R)
            assert y[b][i] != RN.poly_eval(v, pow(w, i, R))  # negative twin: not the plain domain
    assert y == [RN.coset_ntt(v, g) for v in vals]
    back = from_arr(N.coset_intt(to_arr(y)))
    assert back == vals
    assert from_arr(N.coset_intt(to_arr(vals))) == [RN.coset_intt(v, g) for v in vals]


def test_round_trip_4096_partitions():
    rng = np.random.default_rng(3)
    n = 1 << 12
    x = jnp.asarray(encoding.random_limbs(BATCH * n, "fr", rng, montgomery=True).reshape(8, BATCH, n))
    y = N.ntt(x)
    assert not bool(jnp.all(y == x))
    assert bool(jnp.all(N.intt(y) == x))
    # spot-check the forward transform at a few outputs against the definition
    vals = from_arr(x)
    out = from_arr(y)
    w = RN.root_of_unity(n)
    for i in (0, 1, 1234, n - 1):
        assert out[1][i] == RN.poly_eval(vals[1], pow(w, i, R))


def test_batch_axes_are_independent():
    """Several batch axes (partitions x sub-batches): each slice is transformed on its own."""
    rng = random.Random(4)
    n = 64
    parts = [rows(rng, n, count=1, edge=False) for _ in range(BATCH)]
    x = jnp.stack([to_arr(p) for p in parts], axis=1)  # (8, 2, 1, n)
    y = N.ntt(x)
    assert y.shape == x.shape
    for p, vals in enumerate(parts):
        assert from_arr(y[:, p]) == [RN.ntt(v) for v in vals]
    assert bool(jnp.all(N.intt(y) == x))
    swapped = N.ntt(x[:, ::-1])  # the same rows in the other order give the same results in the other order
    assert bool(jnp.all(swapped == y[:, ::-1]))


def test_plan_digits():
    assert N.plan(0, 5) == () and N.plan(1, 5) == (1,) and N.plan(20, 32) == (20,)
    assert N.plan(20, 5) == (5, 5, 5, 5) and N.plan(27, 5) == (5, 5, 5, 4, 4, 4) and N.plan(7, 3) == (3, 2, 2)
    for L in range(1, 33):
        for sub in (1, 3, 5, 8, 11):
            d = N.plan(L, sub)
            assert sum(d) == L and max(d) <= sub and max(d) - min(d) <= 1 and len(d) == -(-L // sub)


def test_digit_reversal_gives_natural_order():
    """The digit reversal (the identity for one digit, a 2-D transpose for two, the blocked reversal's two block
    copies for three or more, uneven digits included), eager and jitted: output index ``k = k_1 + M_1 (k_2 + ...)``
    reads the pass-order position ``(k_1, k_2, ..., k_P)`` (major to minor), computed here digit by digit."""
    from cuzk_jax.ops import ntt_network as NN

    rng = np.random.default_rng(5)
    seen = set()
    for L in (3, 7, 9, 12):
        for sub in (1, 2, 3, 4, 12):
            digits = N.plan(L, sub)
            seen.add(min(len(digits), 3))
            pos = np.zeros(1 << L, np.int64)  # pass-order position of natural index k
            k = np.arange(1 << L)
            for s in digits:  # k_p = (k >> (s_1 + ... + s_(p-1))) mod M_p, placed major to minor
                pos = (pos << s) | (k & ((1 << s) - 1))
                k = k >> s
            x = rng.integers(0, 2**32, size=(8, 2, 1 << L), dtype=np.uint32)
            want = x[..., pos]
            assert np.array_equal(np.asarray(NN.digit_reverse(jnp.asarray(x), digits)), want), digits
            assert np.array_equal(np.asarray(jax.jit(lambda v: NN.digit_reverse(v, digits))(jnp.asarray(x))),
                                  want), digits
    assert seen == {1, 2, 3}


@pytest.mark.parametrize("log_n,sub", [(4, 4), (4, 2), (7, 3), (6, 1)])
def test_four_step_xla_matches_reference(log_n, sub):
    """One pass, and several passes (four-step twiddles between them, digit reversal at the end: 2 digits, 3, and
    6 -- the blocked reversal from 3 on): every transform kind exact."""
    rng = random.Random(400 + log_n)
    n = 1 << log_n
    vals = rows(rng, n)
    cfg = NttConfig("xla", sub=sub)
    x = to_arr(vals)
    assert from_arr(N.ntt(x, config=cfg)) == [RN.ntt(v) for v in vals]
    assert from_arr(N.intt(x, config=cfg)) == [RN.intt(v) for v in vals]
    assert from_arr(N.coset_ntt(x, config=cfg)) == [RN.coset_ntt(v, 7) for v in vals]
    assert from_arr(N.coset_intt(x, config=cfg)) == [RN.coset_intt(v, 7) for v in vals]


@pytest.mark.parametrize("log_n,sub,block", [(5, 2, 8), (3, 8, 4), pytest.param(6, 3, 16, marks=pytest.mark.slow)])
@pytest.mark.usefixtures("no_persistent_cache")
@isolated
def test_pallas_ntt_interpret(log_n, sub, block):
    """The Pallas sub-transform kernel end to end under the interpreter, a batch of 3 (not a power of two): 2^5 as
    three passes (4 x 4 x 2 points, tiles of 2 columns, so the four-step twiddle sees column offsets, and several
    batch rows per program in the last pass, where ``C = 1``), 2^3 as one pass, 2^6 as 8 x 8; forward, inverse,
    coset."""
    rng = random.Random(301 + log_n)
    vals = rows(rng, 1 << log_n, count=3)
    cfg = NttConfig("pallas_interpret", block=block, sub=sub)
    x = to_arr(vals)
    assert from_arr(N.ntt(x, config=cfg)) == [RN.ntt(v) for v in vals]
    assert from_arr(N.intt(x, config=cfg)) == [RN.intt(v) for v in vals]
    assert bool(jnp.all(N.coset_intt(N.coset_ntt(x, config=cfg), config=cfg) == x))


@pytest.mark.usefixtures("no_persistent_cache")
@isolated
def test_pallas_pass_matches_xla_pass():
    """One pass of the kernel (interpreter, lane-array DIT stages, 4 programs of 2 columns) against the XLA pass
    (Pease stages with a bit-reversal read) on the same (8, BR, M, C) view, with the four-step twiddle."""
    from cuzk_jax.ops.config import default_schedule
    from cuzk_jax.ops.pallas import ntt as P

    n, M, C, R_ = 64, 8, 4, 2
    x = jnp.asarray(encoding.random_limbs(BATCH * n, "fr", np.random.default_rng(9), montgomery=True)
                    .reshape(8, BATCH * R_, M, C))
    T = N.twiddles(n)
    with jax.enable_x64(True):
        got = jax.jit(lambda a, w: P.sub_transform(a, w.T, s=3, n=n, R_=R_, twiddle=True, interpret=True,
                                                   block=16))(x, T)
        want = jax.jit(lambda a, w: N._xla_pass(a, w, s=3, n=n, R_=R_, twiddle=True,
                                                schedule=default_schedule()))(x, T)
    assert bool(jnp.all(got == want))
    assert not bool(jnp.all(got == x))


@pytest.mark.parametrize("kernel", ["xla", pytest.param("pallas_interpret", marks=pytest.mark.slow)])
@pytest.mark.usefixtures("no_persistent_cache")
@isolated
def test_transposed_passes_take_pass_order_to_natural(kernel):
    """The passes' transposes, last digit first (``_transposed_impl``), turn a transform's input given in PASS
    order (what ``passes(..., natural=False)`` leaves: digit-reversed) into natural-order output with no digit
    reversal, and ``layout_scale_parts`` scales it by natural index on the way in: ``NTT(first ratio^i c_i)`` of
    the natural-order ``c``, for 2^7 as 3 + 2 + 2 bits (three passes; the kernel with 2-column tiles and several
    rows per program) and 2^5 as 3 + 2. Negative twins: the scaling refused on a transform of one pass, a table
    of the wrong length refused by the kernel."""
    rng = random.Random(77)
    for log_n, block in ((7, 16), (5, 8)):
        n = 1 << log_n
        cfg = NttConfig.coerce(NttConfig(kernel, sub=3, block=block))
        digits = N.plan(log_n, 3)
        vals = rows(rng, n)
        first, ratio = rng.randrange(1, R), rng.randrange(1, R)
        T = N.kernel_table(N.twiddles(n), cfg)
        with jax.enable_x64(True):
            layout = N._passes_impl(to_arr(vals), T, log_n=log_n, config=cfg, natural=False, kernel_layout=True)
            assert from_arr(N.digit_reverse(layout, digits)) == [RN.ntt(v) for v in vals]  # pass order indeed
            pre = N.layout_scale_parts(n, first, ratio, digits)
            got = from_arr(N._transposed_impl(layout, T, pre, log_n=log_n, config=cfg))
        want = [RN.ntt([c * first * pow(ratio, i, R) % R for i, c in enumerate(RN.ntt(v))]) for v in vals]
        assert got == want, (log_n, kernel)
    with pytest.raises(ValueError, match="one pass"):
        N.layout_scale_parts(8, 1, 3, (3,))
    if kernel != "xla":
        from cuzk_jax.ops.pallas import ntt as P

        lo, ha, hb = N.layout_scale_parts(32, 1, 3, (3, 2))
        with pytest.raises(ValueError, match="row pre-scaling"):
            P.sub_transform(jnp.zeros((8, 8, 8, 1), jnp.uint32), T, s=3, n=32, R_=4, twiddle=False, interpret=True,
                            pre=(lo[:, :4], ha, hb), transposed=True)


@pytest.mark.parametrize("s,C,twiddle", [(3, 64, True), (3, 1, False)])
def test_pallas_kernel_lowers_to_triton(s, C, twiddle):
    """Lower the kernel (the PTX field of the GPU schedule) for CUDA on this GPU-less machine (Pallas -> Triton IR), so a
    lowering regression shows up in CPU CI; compiling and running it needs the GPU (scripts/bench.py --op=ntt)."""
    from jax import export

    from cuzk_jax.ops.pallas import ntt as P

    try:
        from jax.experimental.pallas import triton  # noqa: F401
    except ImportError:
        pytest.skip("Pallas Triton backend not available")
    cfg = NttConfig("pallas", schedule="unrolled")  # the kernel with its default block / warps (GPU schedule)
    n = (1 << s) * C * 4

    def f(x, w):
        return P.sub_transform(x, w, s=s, n=n, R_=4, twiddle=twiddle, triton=True, block=cfg.block,
                               num_warps=cfg.warps)

    with jax.enable_x64(True):
        exp = export.export(jax.jit(f), platforms=["cuda"], disabled_checks=[
            export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")])(
            jax.ShapeDtypeStruct((8, BATCH * 4, 1 << s, C), jnp.uint32),
            jax.ShapeDtypeStruct((n // 2, 8), jnp.uint32))
    text = exp.mlir_module()
    assert "xla.gpu.triton" in text and "madc.hi.cc.u32" in text


def test_transposed_pass_kernels_lower_to_triton():
    """The transposed pass (twiddle on load) and its row pre-scaling lower for CUDA with the PTX field (the run is
    the interpreter twin's, above; on a GPU ``bench --op=h``)."""
    from jax import export

    from cuzk_jax.ops.pallas import ntt as P

    try:
        from jax.experimental.pallas import triton  # noqa: F401
    except ImportError:
        pytest.skip("Pallas Triton backend not available")
    n = 1 << 12
    S = jax.ShapeDtypeStruct
    u32 = jnp.uint32
    cases = ((lambda x, w, lo, ha, hb: P.sub_transform(x, w, s=3, n=n, R_=n // 8, twiddle=False, triton=True,
                                                         pre=(lo, ha, hb), transposed=True),
              (S((8, 2 * n // 8, 8, 1), u32), S((n // 2, 8), u32), S((8, 8), u32), S((8, 32), u32), S((8, 16), u32))),
             (lambda x, w: P.sub_transform(x, w, s=3, n=n, R_=8, twiddle=True, triton=True, transposed=True),
              (S((8, 16, 8, n // 64), u32), S((n // 2, 8), u32))))
    for fn, args in cases:
        with jax.enable_x64(True):
            exp = export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=[
                export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")])(*args)
        text = exp.mlir_module()
        assert "xla.gpu.triton" in text and "madc.hi.cc.u32" in text


def test_snarkjs_roots():
    rng = random.Random(5)
    vals = rows(rng, 32)
    x = to_arr(vals)
    assert from_arr(N.ntt(x, generator=5)) == [RN.ntt(v, generator=5) for v in vals]
    assert from_arr(N.ntt(x, generator=5)) != from_arr(N.ntt(x))


def test_works_inside_jit_with_tables_built_under_trace():
    N.clear_cache()
    rng = random.Random(6)
    vals = rows(rng, 64)
    x = to_arr(vals)
    f = jax.jit(lambda a: N.ntt(a))
    assert from_arr(f(x)) == [RN.ntt(v) for v in vals]
    assert not N._TABLES  # built inside the program, not cached as (leaked) tracers
    assert from_arr(N.ntt(x)) == [RN.ntt(v) for v in vals]


def _largest_constant(text: str) -> int:
    """Bytes of the largest dense constant in a StableHLO module (0 if none)."""
    import re

    sizes = [len(m) // 2 for m in re.findall(r'dense<"0x([0-9A-Fa-f]+)"', text)]
    return max(sizes, default=0)


def test_tables_are_not_program_constants():
    """Traced inside a caller's jit (as the Groth16 H phase is), the transform holds no table as a constant: the
    lowered program is the same size at 2^8 and 2^16 (tables are generated on the device from a few roots)."""
    import re

    from cuzk_jax.ops import qap

    sizes, biggest = [], []
    for log_n in (8, 16):
        spec = jax.ShapeDtypeStruct((8, BATCH, 1 << log_n), jnp.uint32)
        for fn in (lambda a: N.coset_intt(a), lambda a: qap.compute_h(a, a, a)):
            text = jax.jit(fn).lower(spec).as_text()
            sizes.append(len(re.sub(r"[0-9]+", "", text)))  # shape literals differ with n; the code must not
            biggest.append(_largest_constant(text))
    assert max(biggest) <= 1024, biggest
    assert abs(sizes[0] - sizes[2]) < 0.02 * sizes[0] and abs(sizes[1] - sizes[3]) < 0.02 * sizes[1], sizes


def test_tables_built_on_device():
    """The doubling-loop generator and the hi/lo outer product: entries against Python ints."""
    n = 1 << 12
    w = RN.root_of_unity(n)
    t = np.asarray(N.twiddles(n))
    idx = [0, 1, 31, 32, 33, 777, n // 2 - 1]
    assert encoding.limbs_to_ints(t[:, idx], "fr", montgomery=True) == [pow(w, i, R) for i in idx]
    lo, hi = N.scale_parts(n, 12345, 7)
    c = lo.shape[1].bit_length() - 1
    lo, hi = (encoding.limbs_to_ints(np.asarray(a), "fr", montgomery=True) for a in (lo, hi))
    for j in (0, 1, 63, 64, 65, 4000, n - 1):
        assert hi[j >> c] * lo[j & ((1 << c) - 1)] % R == 12345 * pow(7, j, R) % R


def test_size_one_is_identity():
    x = to_arr([[5], [R - 1]])
    for kw in ({}, {"inverse": True}, {"coset": 7}, {"inverse": True, "coset": 7}):
        assert bool(jnp.all(N.ntt(x, **kw) == x))


def test_bad_inputs_rejected():
    with pytest.raises(ValueError, match="power of two"):
        N.ntt(jnp.zeros((8, 2, 12), jnp.uint32))
    with pytest.raises(ValueError, match="power of two"):
        N.ntt(jnp.zeros((8, 0), jnp.uint32))
    with pytest.raises(ValueError, match=r"\(8, \*batch, n\)"):
        N.ntt(jnp.zeros((12, 16), jnp.uint32))
    with pytest.raises(ValueError, match="uint32"):
        N.ntt(jnp.zeros((8, 16), jnp.int32))
    with pytest.raises(ValueError, match="2-adicity"):
        N.log2_size(1 << 33)
    with pytest.raises(ValueError, match="g\\^n"):
        N.ntt(jnp.zeros((8, 16), jnp.uint32), coset=1)
    with pytest.raises(ValueError, match="unknown NttConfig kernel 'fft9000'"):
        N.ntt(jnp.zeros((8, 16), jnp.uint32), config="fft9000")
    for bad, token in (("xla:lead=4", "'lead'"), ("pallas:block=x", "block='x'"), ("xla:schedule=fast", "'fast'"),
                       ("xla:sub=0", "sub='0'")):
        with pytest.raises(ValueError, match=token):
            N.ntt(jnp.zeros((8, 16), jnp.uint32), config=bad)


# ----------------------------------------------------------------------------------------------------- host API


def test_host_ntt_matches_reference():
    rng = random.Random(7)
    v = rows(rng, 2, count=1)[0]  # n = 2 needs no stage loop: cheap programs; the ops tests cover the sizes
    assert cuzk_jax.ntt(v) == RN.ntt(v)
    assert cuzk_jax.ntt(v, inverse=True) == RN.intt(v)
    assert cuzk_jax.ntt(cuzk_jax.ntt(v), inverse=True) == v
    assert cuzk_jax.ntt(v, coset=True) == RN.coset_ntt(v, 7)
    assert cuzk_jax.ntt(v, coset=True) != cuzk_jax.ntt(v)
    assert cuzk_jax.ntt(v, inverse=True, coset=True) == RN.coset_intt(v, 7)
    assert cuzk_jax.ntt([R - 1]) == [R - 1]
    v = rows(rng, 64, count=1)[0]
    w = RN.root_of_unity(64)
    out = cuzk_jax.ntt(v)
    assert out == RN.ntt(v)
    assert out[3] == sum(x * pow(w, 3 * j, R) for j, x in enumerate(v)) % R


class _Huge:
    def __len__(self):
        return (1 << 32) * 2

    def __getitem__(self, i):
        raise AssertionError("must not read values of an oversized input")


def test_host_ntt_rejects_bad_input():
    for bad in ([1, 2, 3], [], [0] * 6):
        with pytest.raises(ValueError, match="power of two"):
            cuzk_jax.ntt(bad)
    with pytest.raises(ValueError, match="2\\^32"):
        cuzk_jax.ntt(_Huge())
    with pytest.raises(ValueError, match="out of range"):
        cuzk_jax.ntt([0, R])
    with pytest.raises(ValueError, match="out of range"):
        cuzk_jax.ntt([-1, 0])
    with pytest.raises(ValueError):
        cuzk_jax.ntt([0, "1"])
    with pytest.raises(ValueError):
        cuzk_jax.ntt([0, True])
    with pytest.raises(ValueError):
        cuzk_jax.ntt(5)
    with pytest.raises(ValueError, match="g\\^n"):
        cuzk_jax.ntt([1, 2], coset=R - 1)  # (-1)^2 = 1: a shift inside the domain


def test_identical_passes_of_one_program_share_one_triton_kernel(monkeypatch):
    """Passes are cached jitted functions, so identical passes of one program lower to one Triton kernel (each
    kernel is a Triton compile of its own): a forward transform and an inverse one of the same shape in one program
    share all 5 passes of a ``2^14`` domain (5 kernels, not 10). The H step's coset program runs 10 (its second
    transform is the passes' transposes, twiddle on load, which share no kernel with the forward passes); the
    finishing program's one transform 5, and its pointwise product one more. The twin: the same passes traced
    outside the shared jitted function are 10 kernels again."""
    from jax import export

    from cuzk_jax.ops import qap
    from cuzk_jax.ops.pallas import ntt as P

    try:
        from jax.experimental.pallas import triton  # noqa: F401
    except ImportError:
        pytest.skip("Pallas Triton backend not available")
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")  # the Triton compiler parameters (not Mosaic)
    shared = P._pass_program
    shared.cache_clear()
    try:
        cfg = NttConfig.default("gpu")
        n = 1 << 14
        assert len(N.plan(14, cfg.sub_log())) == 5
        S = jax.ShapeDtypeStruct
        tables = qap.table_specs(n, config=cfg)

        def kernels(fn, *args):
            with jax.enable_x64(True):
                exp = export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=[
                    export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")])(*args)
            text = exp.mlir_module()
            assert "madc.hi.cc.u32" in text  # the PTX field blocks
            return text.count("xla.gpu.triton")

        both = lambda x, t: N._passes_impl(N._passes_impl(x, t, log_n=14, config=cfg, kernel_layout=True),  # noqa
                                           t, log_n=14, config=cfg, kernel_layout=True)
        finish = lambda a, b, c, t: qap._h_from_evaluations_impl(a, b, c, t, n=n, config=cfg,  # noqa: E731
                                                                 form="arkworks")
        x = S((8, 3, n), jnp.uint32)
        assert kernels(both, x, tables.roots) == 5
        assert kernels(lambda x, t: qap._coset_evaluations_impl(x, t, n=n, config=cfg), x, tables) == 10
        # one transform's 5 passes, and the pointwise A B - C as one Pallas pass (finish=kernel, the GPU default)
        assert cfg.finish_kind == "kernel"
        assert kernels(finish, *(S((8, 1, n), jnp.uint32),) * 3, tables) == 6
        monkeypatch.setattr(P, "_pass_program", shared.__wrapped__)  # a new jitted function per pass
        assert kernels(lambda x, t: both(x, t), x, tables.roots) == 10  # a new function: traced again
    finally:
        shared.cache_clear()
