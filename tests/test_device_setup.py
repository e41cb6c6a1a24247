"""The device (development) setup: its scalar programs against Python ints, the batch-affine fixed-base
multiplication against the reference curve, and whole keys bit for bit against the host setup and the Python-int
reference setup (issue 19, item 4). Small sizes with small chunks, so every chunked path runs more than once; the
compiled programs are shared between the tests (window 4, chunk 8)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cuzk_jax import encoding
from cuzk_jax.circuits import base
from cuzk_jax.groth16 import generator, prover, verifier
from cuzk_jax.groth16.host_curve import affine_from_device
from cuzk_jax.ops import curve as C
from cuzk_jax.ops import fixed_base
from cuzk_jax.ops import setup_scalars as S
from cuzk_jax.reference import groth16 as RG
from cuzk_jax.reference.constants import R

WINDOW, CHUNK = 4, 8  # shared by every test here: one compiled fixed-base program per group


def _ints(limbs, montgomery=True):
    return encoding.limbs_to_ints(np.asarray(limbs), "fr", montgomery=montgomery)


def test_lagrange_and_powers_match_python_ints():
    n, tau = 16, 0x1234567890ABCDEF1234567890
    lo, hi, a = S.power_tables(pow(7, (R - 1) // n, R), n)
    k = (pow(tau, n, R) - 1) * pow(n, R - 2, R) % R
    got = []
    for s in range(0, n, 8):  # two chunks: the start offset is honoured
        got += _ints(S.lagrange(lo, hi, s, S.mont_limbs([tau]), S.mont_limbs([k]), chunk=8, a=a))
    assert got == generator.lagrange_at(n, tau)
    assert sum(got) % R == 1  # the Lagrange basis sums to one (a check independent of lagrange_at)
    lo, hi, a = S.power_tables(tau, 11, scale=5)
    assert _ints(S.powers(lo, hi, 3, chunk=8, a=a)) == [5 * pow(tau, i, R) % R for i in range(3, 11)]


def test_column_sums_match_python_ints():
    """Repeated columns, repeated (row, col) pairs, several chunks with a padded last one, unused columns."""
    rnd = random.Random(3)
    rows_n, num_vars, nnz = 12, 9, 37
    coeffs = [1, R - 1, 2, rnd.randrange(R), rnd.randrange(R)]
    rows = np.sort(np.array([rnd.randrange(rows_n) for _ in range(nnz)], np.int32))
    cols = np.array([rnd.randrange(num_vars - 2) for _ in range(nnz)], np.int32)  # the last 2 columns unused
    cids = np.array([rnd.randrange(len(coeffs)) for _ in range(nnz)], np.int32)
    lag_ints = [rnd.randrange(R) for _ in range(rows_n)]
    got = S.column_sums(S.mont_limbs(lag_ints), rows, cols, cids, S.scaled_coeffs(coeffs), num_vars, chunk=16)
    want = [0] * num_vars
    for r_, c_, k_ in zip(rows, cols, cids):
        want[c_] = (want[c_] + coeffs[k_] * lag_ints[r_]) % R
    assert _ints(got) == want
    assert want[-1] == 0 and any(want)
    # the CSR form (rows derived per chunk from indptr) and extra nonzeros after the matrix's (bellman's input rows:
    # rows past the matrix, coefficient id 0), the extra ones straddling a chunk boundary
    indptr = np.searchsorted(rows, np.arange(rows_n + 1)).astype(np.int64)
    ex = (np.array([rows_n, rows_n + 1, rows_n + 2], np.int32), np.array([0, 1, num_vars - 1], np.int32),
          np.zeros(3, np.int32))
    lag_ext = lag_ints + [rnd.randrange(R) for _ in range(3)]
    for chunk in (16, 38, 64):
        got = S.column_sums(S.mont_limbs(lag_ext), None, cols, cids, S.scaled_coeffs(coeffs), num_vars, chunk=chunk,
                            indptr=indptr, extra=ex)
        want_ext = list(want)
        for r_, c_ in zip(ex[0], ex[1]):
            want_ext[c_] = (want_ext[c_] + lag_ext[r_]) % R
        assert _ints(got) == want_ext, chunk
    with pytest.raises(ValueError, match="rows or indptr"):
        S.column_sums(S.mont_limbs(lag_ints), rows, cols, cids, S.scaled_coeffs(coeffs), num_vars, indptr=indptr)
    # a wrong coefficient table gives a different answer (the twin: the comparison can fail)
    bad = S.column_sums(S.mont_limbs(lag_ints), rows, cols, cids, S.scaled_coeffs([2] + coeffs[1:]), num_vars,
                        chunk=16)
    assert _ints(bad) != want


def test_batch_affine_fixed_base_edges():
    """0, 1, r - 1, values at and above r (reduced first: the same point as s mod r), all-ones digits, random."""
    rnd = random.Random(5)
    ks = [0, 1, 2, R - 1, R, R + 1, 2**256 - 1, 2**16 + 1, int("f" * 63, 16) % R] + [rnd.randrange(R)
                                                                                   for _ in range(4)]
    limbs = np.array([[(k >> (32 * i)) & 0xFFFFFFFF for k in ks] for i in range(8)], np.uint32)
    got = affine_from_device(C.g1, fixed_base.mul_affine(C.g1, limbs, window=WINDOW, chunk=CHUNK))
    g = C.g1.ref
    assert got == [g.mul(g.generator, k % R) for k in ks]
    assert got[0] is None and got[3] == g.neg(g.generator)


def test_windowed_batch_inversion():
    """The accelerator default's batched inversion (lane totals inverted by a 4-bit-window exponentiation) against
    Python ints, on Fq2 (which reduces to the Fq path through the norm), with zeros (mapped to zero) and a run
    length that does not divide the batch."""
    import jax.numpy as jnp

    from cuzk_jax.ops import field as OF
    from cuzk_jax.reference.constants import P

    rnd = random.Random(9)
    c0 = [0, 1, P - 1, 2, 0] + [rnd.randrange(P) for _ in range(6)]
    c1 = [0, 0, 5, P - 1, 3] + [rnd.randrange(P) for _ in range(6)]
    x = jnp.stack([jnp.asarray(encoding.ints_to_limbs(v, "fq", montgomery=True)) for v in (c0, c1)])
    out = np.asarray(fixed_base._batch_inv(OF.fq2, x, 4, 4))
    got = list(zip(*(encoding.limbs_to_ints(out[i], "fq", montgomery=True) for i in range(2))))
    for a0, a1, (r0, r1) in zip(c0, c1, got):
        ninv = pow((a0 * a0 + a1 * a1) % P, P - 2, P)
        assert (r0, r1) == (a0 * ninv % P, -a1 * ninv % P)
        if (a0, a1) != (0, 0):  # an inverse indeed (the twin of the formula check above)
            assert ((a0 * r0 - a1 * r1) % P, (a0 * r1 + a1 * r0) % P) == (1, 0)


@pytest.fixture(scope="module")
def cube_keys():
    circuit = base.get_circuit("cube")
    r1cs = circuit.r1cs()
    toxic = generator.insecure_toxic_waste_for_tests(11)  # test_groth16's key: its compiled prover is shared
    dev = generator.development_setup(r1cs, toxic, window=WINDOW, chunk=CHUNK, scalar_chunk=2)
    return circuit, r1cs, toxic, dev


@pytest.mark.slow  # the module's key fixture compiles the G2 programs (about a minute on a 2-core CPU)
def test_device_setup_equals_host_setup_and_reference(cube_keys):
    circuit, r1cs, toxic, dev = cube_keys
    host = generator.setup(r1cs, toxic, method="host")
    assert dev.to_bytes() == host.to_bytes()  # every point, bit for bit, in the key file format
    # the device scalars with the Jacobian fixed-base method (the host setup's compiled program): the same key
    assert generator.development_setup(r1cs, toxic, points="jacobian").to_bytes() == host.to_bytes()
    mats = r1cs.with_input_constraints().reference_matrices()
    rpk, _ = RG.setup(mats, r1cs.num_inputs, r1cs.num_vars, toxic, h_form=dev.h_form)
    assert dev.h_form == "lagrange" and affine_from_device(C.g1, dev.h_query) == rpk.h_query
    # bellman's coefficient H query (the powers program instead of the Lagrange one): the oracle's points
    coef = generator.development_setup(r1cs, toxic, window=WINDOW, chunk=CHUNK, scalar_chunk=2,
                                       h_form="coefficients")
    rc, _ = RG.setup(mats, r1cs.num_inputs, r1cs.num_vars, toxic, h_form="coefficients")
    assert affine_from_device(C.g1, coef.h_query) == rc.h_query != rpk.h_query
    assert affine_from_device(C.g1, coef.a_query) == rpk.a_query
    assert affine_from_device(C.g1, dev.l_query) == rpk.l_query
    assert affine_from_device(C.g2, dev.b_g2_query) == rpk.b_g2_query
    assert dev.vk.ic == rpk.vk.ic and dev.delta_g1 == rpk.delta_g1
    # the twin: other toxic waste gives another key
    other = generator.development_setup(r1cs, generator.insecure_toxic_waste_for_tests(12), window=WINDOW,
                                        chunk=CHUNK, scalar_chunk=2)
    assert other.to_bytes() != dev.to_bytes()
    assert affine_from_device(C.g1, other.a_query) != affine_from_device(C.g1, dev.a_query)


@pytest.mark.slow
def test_device_setup_key_proves_and_verifies(cube_keys):
    circuit, r1cs, _, dev = cube_keys
    ws = [circuit.witness(circuit.sample_inputs(p)) for p in range(2)]
    proofs, _ = prover.prove(dev, r1cs, ws, randomness=prover.insecure_randomness_for_tests(5, 2), verify=False)
    for w, proof in zip(ws, proofs):
        assert verifier.verify(dev.vk, w.public_inputs, proof)
        wrong = [(x + 1) % R for x in w.public_inputs]
        assert not verifier.verify(dev.vk, wrong, proof)


def test_development_setup_seed_and_domain_check():
    import dataclasses

    r1cs = base.get_circuit("cube").r1cs()
    toxic = generator.insecure_toxic_waste_for_tests(11)
    bad = dataclasses.replace(toxic, tau=1)
    with pytest.raises(ValueError, match="domain"):
        generator.development_setup(r1cs, bad, window=WINDOW, chunk=CHUNK)
    with pytest.raises(ValueError, match="unknown setup method"):
        generator.setup(r1cs, toxic, method="gpu")


def test_bench_setup_options_and_synthetic_r1cs():
    """bench --op=setup: its tuning specs parse (bad ones give one clear ValueError) and its synthetic R1CS has the
    promised domain (no device work here)."""
    from cuzk_jax.bench import setup as bench_setup

    assert bench_setup.parse_impl("affine") == ("affine", {})
    assert bench_setup.parse_impl("affine:w=20:chunk=23:inv=256:fw=1") == (
        "affine", {"window": 20, "chunk": 1 << 23, "inv_chunk": 256, "fermat_window": 1})
    assert bench_setup.parse_impl("jacobian") == ("jacobian", {})
    assert bench_setup.parse_impl("bucket:w=12:block=128:warps=4") == (
        "bucket", {"window": 12, "block": 128, "num_warps": 4})
    assert bench_setup.parse_impl("affine:sched=rolled") == ("affine", {"schedule": "rolled"})
    # the bucket method has no XLA field products left to schedule, and one conversion to affine (no conv=)
    for bad in ("affine:w=x", "affine:q=3", "jacobian:w=4", "projective", "affine:block=64", "affine:sched=fast",
                "jacobian:sched=rolled", "bucket:sched=rolled", "bucket:conv=xla", "bucket:conv=kernel"):
        with pytest.raises(ValueError, match="impl"):
            bench_setup.parse_impl(bad)
    r1cs = bench_setup.synthetic_r1cs(6)
    assert RG.domain_size(r1cs.with_input_constraints().num_constraints) == 64
    assert r1cs.nnz == (2 * 62, 62, 62)


def test_query_buffer_can_be_donated():
    """The buffer a multi-chunk query is written into is donated on accelerators, so its leaves must be distinct
    device buffers (``affine_identity`` shares one zero array for x and y: 'donate the same buffer twice' on the
    H200). Checked by buffer identity -- donation itself is not exercised on XLA:CPU, where the setup turns it off."""
    import jax.numpy as jnp

    buf = generator._query_buffer(C.g1, 8)
    pointers = [leaf.unsafe_buffer_pointer() for leaf in (buf.x, buf.y, buf.inf)]
    assert len(set(pointers)) == 3
    shared = C.g1.affine_identity((8,))
    assert shared.x.unsafe_buffer_pointer() == shared.y.unsafe_buffer_pointer()  # why the buffer is built apart
    piece = C.g1.generator((4,))
    out = generator._write_at("cpu")(buf, piece, 4)
    assert bool(jnp.all(out.inf[:4])) and not bool(jnp.any(out.inf[4:]))
    assert bool(jnp.all(out.x[:, 4:] == piece.x))


def test_sparse_queries_skip_zero_scalars_and_keep_the_key():
    """The setup multiplies only a query's nonzero scalars and scatters them back: a sparse part (zeros at the
    ends and inside, spanning chunks), a dense part and an all-zero part give the points of the reference curve,
    infinity exactly at the zero scalars."""
    rnd = random.Random(12)
    sparse = [0, 5, 0, 0, rnd.randrange(R), 0, 1, 0, 0, 0, rnd.randrange(R), 0, 0]
    dense = [rnd.randrange(1, R) for _ in range(5)]
    zeros = [0, 0, 0]
    parts = [encoding.ints_to_limbs(v, "fr") for v in (sparse, dense, zeros)]
    out = generator._sparse_fixed_base_queries(C.g1, parts, WINDOW, CHUNK)
    g = C.g1.ref
    for pts, ks in zip(out, (sparse, dense, zeros)):
        got = affine_from_device(C.g1, pts)
        assert got == [g.mul(g.generator, k) if k else None for k in ks]
        assert [bool(b) for b in np.asarray(pts.inf)] == [k == 0 for k in ks]


@pytest.mark.parametrize("group", ["g1", pytest.param("g2", marks=pytest.mark.slow)])
def test_bucket_fixed_base_edges(group):
    """The bucket method (the MSM's Pallas accumulation kernel, interpreted on CPU): 0, 1, r - 1, values at and
    above r, all-ones digits and random scalars against the reference curve, over two chunks; zero digits of
    nonzero scalars (2^16 + 1 has 14 of 16 windows zero at w = 4... and every digit but one zero for 1)."""
    curve = C.g1 if group == "g1" else C.g2
    rnd = random.Random(6)
    ks = [0, 1, 2, R - 1, R, R + 1, 2**256 - 1, 2**16 + 1, int("f" * 63, 16) % R, 2**252] + [
        rnd.randrange(R) for _ in range(6)]
    limbs = np.array([[(k >> (32 * i)) & 0xFFFFFFFF for k in ks] for i in range(8)], np.uint32)
    got = affine_from_device(curve, fixed_base.mul_bucket(curve, limbs, window=WINDOW, chunk=CHUNK, block=CHUNK))
    g = curve.ref
    assert got == [g.mul(g.generator, k % R) for k in ks]
    assert got[0] is None and got[4] is None and got[3] == g.neg(g.generator)


def test_bucket_pairs_layout():
    """Each lane: its K pairs keyed by the lane, one per window in window order, a zero digit valued -1 (no base)
    -- sorted by construction."""
    import jax

    scalars = encoding.ints_to_limbs([0x305, 0, 0x10], "fr")  # digits at w = 4 (low first): 5,0,3 / none / 0,1
    with jax.enable_x64(True):
        keys, vals = fixed_base._bucket_pairs(scalars, 4)
    K = fixed_base.num_windows(4)
    keys, vals = np.asarray(keys).reshape(3, K), np.asarray(vals).reshape(3, K)
    assert (keys == np.arange(3)[:, None]).all()
    assert list(vals[0, :3]) == [5, -1, 2 * 16 + 3] and set(vals[0, 3:]) == {-1}
    assert set(vals[1]) == {-1}
    assert list(vals[2, :2]) == [-1, 16 + 1] and set(vals[2, 2:]) == {-1}


def test_device_setup_bucket_method_same_key(cube_keys, monkeypatch):
    """The device setup with the bucket fixed-base method gives the batch-affine key byte for byte (its phases'
    seconds reported in ``timings``), also with both
    groups' programs and the scalar programs compiled ahead in threads (``precompile=True``, the accelerator
    default, each compile's seconds in ``timings["compile_s"]``) -- and then the setup's own calls compile nothing
    more (a scalar program compiled ahead for other shapes than its call's would be compiled again there)."""
    import jax

    _, r1cs, toxic, dev = cube_keys
    timings = {}
    bucket = generator.development_setup(r1cs, toxic, window=WINDOW, chunk=CHUNK, scalar_chunk=2, points="bucket",
                                         timings=timings)
    assert bucket.to_bytes() == dev.to_bytes()
    parts = ("scalars_lagrange", "scalars_column_sums", "scalars_query", "scalars_h", "g1_points", "g2_points")
    assert set(timings) == set(parts) | {"total"} and all(timings[k] >= 0 for k in timings)
    assert sum(timings[k] for k in parts) <= timings["total"] + 0.01  # the phases are parts of the whole
    import threading

    from jax import monitoring

    from cuzk_jax.ops import setup_scalars as S

    fixed_base._mul_bucket_program.clear_cache()
    for program in (S.lagrange, S._finish_sums, S._query_scalars_chunk, S.powers, S.from_mont,
                    S._column_sums_chunk(jax.default_backend())):
        program.clear_cache()  # so that the scalar programs are compiled again: ahead, in the threads
    seen, requests = [], []
    real = fixed_base.precompile_bucket
    monkeypatch.setattr(fixed_base, "precompile_bucket", lambda c, **kw: (seen.append(c.name), real(c, **kw))[1])
    # every compile request (persistent-cache hit or not) is an event, in the thread that asks for it; the rest of
    # the setup's programs are compiled already in this process, so the main thread must ask for none
    def listener(event, **_):
        if event == "/jax/compilation_cache/compile_requests_use_cache":
            requests.append(threading.current_thread().name)

    monitoring.register_event_listener(listener)
    ahead_timings = {}
    try:
        ahead = generator.development_setup(r1cs, toxic, window=WINDOW, chunk=CHUNK, scalar_chunk=2,
                                            points="bucket", precompile=True, timings=ahead_timings)
    finally:
        monitoring.unregister_event_listener(listener)
    assert sorted(seen) == ["g1", "g2"] and ahead.to_bytes() == dev.to_bytes()
    # the scalar programs were compiled in the threads too, with the shapes the setup then called them with
    assert requests and all(name.startswith("setup-compile") for name in requests), requests
    compiled = ahead_timings["compile_s"]
    # a Lagrange H query runs the Lagrange program again (its compile serves both): no powers program
    assert {"g1", "g2", "lagrange", "finish_sums", "query", "from_mont"} <= set(compiled)
    assert "h_powers" not in compiled
    assert any(k.startswith("column_sums_") for k in compiled) and all(v >= 0 for v in compiled.values())
    assert len(requests) >= len(compiled)


def test_default_fixed_base_per_group_and_platform():
    """The bucket method for both groups on a GPU; every other platform keeps the batch-affine method."""
    from cuzk_jax.groth16 import generator

    assert generator.default_fixed_base("g1", "gpu") == "bucket"
    assert generator.default_fixed_base("g2", "gpu") == "bucket"
    assert {generator.default_fixed_base(g, p) for g in ("g1", "g2") for p in ("cpu", "tpu")} == {"affine"}


def test_default_bucket_window_per_group_and_platform():
    """The bucket method's window: 20 for G1 on a GPU (13 windows; the session 24 A/B), 16 for G2 there (not
    measured at 20) and on other accelerators, 8 on CPU; the batch-affine default stays 16 / 8."""
    assert fixed_base.default_bucket_window("g1", "gpu") == 20
    assert fixed_base.default_bucket_window("g2", "gpu") == 16
    assert fixed_base.num_windows(20) == 13 and fixed_base.num_windows(16) == 16
    assert {fixed_base.default_bucket_window(g, "tpu") for g in ("g1", "g2")} == {16}
    assert {fixed_base.default_bucket_window(g, "cpu") for g in ("g1", "g2")} == {8}
    import jax

    assert fixed_base.default_bucket_window("g1") == fixed_base.default_bucket_window("g1", jax.default_backend())
    with pytest.raises(ValueError, match="unknown group"):
        fixed_base.default_bucket_window("g3", "gpu")
