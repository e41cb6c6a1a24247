"""Groth16 end to end: device setup/prove vs the Python-int reference, arkworks verification, negative twins,
key and proof formats."""

import types

import numpy as np
import pytest

from cuzk_jax.circuits import base
from cuzk_jax.circuits.cs import Unsatisfied
from cuzk_jax.errors import BadInput, ProofRejected
from cuzk_jax.groth16 import generator, pipeline, prover, verifier
from cuzk_jax.groth16.data_structures import (KeyFormatError, Proof, ProvingKey, VerifyingKey, proofs_from_bytes,
                                              proofs_to_bytes)
from cuzk_jax.groth16.host_curve import affine_from_device
from cuzk_jax.ops import curve as C, qap
from cuzk_jax.reference import groth16 as RG
from cuzk_jax.reference.constants import R

P = 2  # partitions per batch in these tests (one compiled shape per circuit)


@pytest.fixture(scope="session")
def cube():
    circuit = base.get_circuit("cube")
    r1cs = circuit.r1cs()
    toxic = generator.insecure_toxic_waste_for_tests(11)
    pk = generator.setup(r1cs, toxic)
    ext = r1cs.with_input_constraints()
    rpk, rvk = RG.setup(ext.reference_matrices(), r1cs.num_inputs, r1cs.num_vars, toxic, h_form=pk.h_form)
    witnesses = [circuit.witness(circuit.sample_inputs(p)) for p in range(P)]
    return dict(circuit=circuit, r1cs=r1cs, pk=pk, rpk=rpk, ext=ext, witnesses=witnesses, toxic=toxic)


@pytest.fixture(scope="session")
def cube_proofs(cube):
    rs = prover.insecure_randomness_for_tests(5, P)
    proofs, timings = prover.prove(cube["pk"], cube["r1cs"], cube["witnesses"], randomness=rs)
    return proofs, rs, timings


def test_setup_matches_reference(cube):
    pk, rpk = cube["pk"], cube["rpk"]
    assert pk.vk.ic == rpk.vk.ic and pk.vk.alpha_g1 == rpk.vk.alpha_g1
    assert (pk.vk.beta_g2, pk.vk.gamma_g2, pk.vk.delta_g2) == (rpk.vk.beta_g2, rpk.vk.gamma_g2, rpk.vk.delta_g2)
    assert (pk.beta_g1, pk.delta_g1) == (rpk.beta_g1, rpk.delta_g1)
    for name in ("a_query", "b_g1_query", "h_query", "l_query"):
        assert affine_from_device(C.g1, getattr(pk, name)) == getattr(rpk, name), name
    assert affine_from_device(C.g2, pk.b_g2_query) == rpk.b_g2_query
    assert pk.domain_size == rpk.domain_size


def test_h_query_forms_give_the_same_proofs(cube, cube_proofs):
    """The setup's default H query is the Lagrange form (one NTT fewer per proof); bellman's coefficient form gives
    the same proof bits for the same randomness (both sums are h(tau) Z(tau) / delta). Each key's H query equals
    the oracle's of its form; a key whose H points do not match its form makes proofs the prover refuses."""
    assert cube["pk"].h_form == generator.DEFAULT_H_FORM == "lagrange"
    assert len(affine_from_device(C.g1, cube["pk"].h_query)) == cube["pk"].domain_size
    coef = generator.setup(cube["r1cs"], cube["toxic"], h_form="coefficients")
    rpk, _ = RG.setup(cube["ext"].reference_matrices(), cube["r1cs"].num_inputs, cube["r1cs"].num_vars,
                      cube["toxic"], h_form="coefficients")
    assert affine_from_device(C.g1, coef.h_query) == rpk.h_query and len(rpk.h_query) == coef.domain_size - 1
    proofs, rs, _ = cube_proofs
    got, _ = prover.prove(coef, cube["r1cs"], cube["witnesses"], randomness=rs)
    assert [p.to_bytes() for p in got] == [p.to_bytes() for p in proofs]
    # the reference prover in coefficient form gives the same bits as well
    for w, proof, (r, s) in zip(cube["witnesses"], proofs, rs):
        assert (proof.a, proof.b, proof.c) == RG.prove(rpk, cube["ext"].reference_matrices(), w.z, r, s)
    # negative twin: Lagrange points labelled as coefficients (its first n - 1 points) -> wrong C, refused
    pk = cube["pk"]
    wrong = ProvingKey(vk=pk.vk, beta_g1=pk.beta_g1, delta_g1=pk.delta_g1, a_query=pk.a_query,
                       b_g1_query=pk.b_g1_query, b_g2_query=pk.b_g2_query,
                       h_query=C.Affine(*(a[..., :pk.domain_size - 1] for a in pk.h_query)), l_query=pk.l_query,
                       num_inputs=pk.num_inputs, num_aux=pk.num_aux, domain_size=pk.domain_size,
                       circuit_digest=pk.circuit_digest, h_form="coefficients")
    with pytest.raises(ProofRejected):
        prover.prove(wrong, cube["r1cs"], cube["witnesses"], randomness=rs)
    with pytest.raises(ValueError, match="H query form"):
        generator.setup(cube["r1cs"], cube["toxic"], h_form="evaluations")


def test_batched_proofs_equal_reference_and_verify(cube, cube_proofs):
    proofs, rs, timings = cube_proofs
    for w, proof, (r, s) in zip(cube["witnesses"], proofs, rs):
        assert (proof.a, proof.b, proof.c) == RG.prove(cube["rpk"], cube["ext"].reference_matrices(), w.z, r, s)
        assert verifier.verify(cube["pk"].vk, w.public_inputs, proof)
    publics = [w.public_inputs for w in cube["witnesses"]]
    assert verifier.verify_batch(cube["pk"].vk, publics, proofs)
    assert set(timings.phases) == set(prover.PHASES) and timings.total > 0


def test_negative_twins(cube, cube_proofs):
    proofs, _, _ = cube_proofs
    vk = cube["pk"].vk
    w0, w1 = cube["witnesses"]
    assert w0.public_inputs != w1.public_inputs
    # wrong public input
    assert not verifier.verify(vk, [(w0.public_inputs[0] + 1) % R], proofs[0])
    # proof swapped between partitions
    assert not verifier.verify(vk, w0.public_inputs, proofs[1])
    assert not verifier.verify_batch(vk, [w0.public_inputs, w1.public_inputs], [proofs[1], proofs[0]])
    assert verifier.verify_each(vk, [w0.public_inputs, w1.public_inputs], [proofs[0], proofs[0]]) == [True, False]
    # tampered bytes: either not a valid encoding any more, or a valid point that fails the pairing check
    data = proofs[0].to_bytes()
    for pos in (5, 60, 170):
        bad = bytearray(data)
        bad[pos] ^= 0x01
        try:
            tampered = Proof.from_bytes(bytes(bad))
        except ValueError:
            continue
        assert not verifier.verify(vk, w0.public_inputs, tampered)
    # swapping A and C (both G1) also fails
    assert not verifier.verify(vk, w0.public_inputs, Proof(proofs[0].c, proofs[0].b, proofs[0].a))


def test_unsatisfied_witness_is_refused(cube):
    w = cube["witnesses"][1]
    bad = type(w)(inputs=list(w.inputs), aux=list(w.aux), num_constraints=w.num_constraints)
    bad.aux[1] = (bad.aux[1] + 1) % R  # x^2 wrong
    with pytest.raises(Unsatisfied, match=r"partition 1: constraint #\d+ '.*x\^2") as info:
        prover.prove(cube["pk"], cube["r1cs"], [cube["witnesses"][0], bad])
    assert info.value.partition == 1


def test_two_proofs_of_one_witness_differ_and_verify(cube):
    w = cube["witnesses"][0]
    proofs, _ = prover.prove(cube["pk"], cube["r1cs"], [w, w])  # OS randomness
    assert proofs[0].to_bytes() != proofs[1].to_bytes()
    assert all(verifier.verify(cube["pk"].vk, w.public_inputs, p) for p in proofs)


def test_key_from_another_circuit_rejected(cube):
    other = base.get_circuit("porep_like", "tiny").r1cs()
    with pytest.raises(ValueError, match="different circuit"):
        prover.prove(cube["pk"], other, cube["witnesses"])


def test_host_msm_default_on_cpu_equals_device_msm(cube, cube_proofs):
    """On a CPU the prover's default MSMs are arkworks' multiexp on the host (msm=host): the same proofs, bit for
    bit, as the XLA MSM programs (and so as the reference prover); not used when sharded or with tables."""
    from cuzk_jax.ops.config import MsmConfig

    proofs, rs, _ = cube_proofs
    assert prover.resident(cube["pk"], cube["r1cs"]).config.msm == pipeline.HOST_MSM
    assert pipeline.ProverConfig().resolved(sharded=True).msm == MsmConfig.default()
    xla, _ = prover.prove(cube["pk"], cube["r1cs"], cube["witnesses"], randomness=rs, config="msm=xla")
    assert xla == proofs
    with pytest.raises(ValueError, match="msm=host runs on the host"):
        pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=host,tables=on")
    with pytest.raises(ValueError, match="MsmConfig or 'host'"):
        pipeline.ProverConfig(msm="cuda")


def test_resident_key_leaves_out_points_at_infinity(cube):
    """Bases at infinity (columns a query does not use) are not resident and the MSMs skip their scalars: the
    kept columns are exactly the finite bases (cube's B queries have such columns); the proofs of the other tests
    (host and XLA MSMs, window tables) run over these compacted keys and equal the reference prover's."""
    pk = cube["pk"]
    rk = pipeline.make_resident(pk, cube["r1cs"], "msm=xla,tables=off")
    names = {"msm_a": "a_query", "msm_b1": "b_g1_query", "msm_b2": "b_g2_query", "msm_l": "l_query",
             "msm_h": "h_query"}
    assert set(rk.columns) == {"msm_b1", "msm_b2"}
    for name, query in names.items():
        inf = np.asarray(getattr(pk, query).inf)
        kept = rk.columns.get(name)
        want = np.flatnonzero(~inf) if inf.any() else None
        assert (kept is None and want is None) or np.asarray(kept).tolist() == want.tolist(), name
        assert int(rk.queries[name].inf.shape[-1]) == int((~inf).sum()) and not np.asarray(rk.queries[name].inf).any()
    # the resident key is smaller than the host key, apart from the H step's tables it holds beside the bases
    assert rk.nbytes - rk.h_tables.nbytes < pk.nbytes()
    assert rk.h_tables.nbytes == qap.table_bytes(rk.domain_size, rk.h_step)


@pytest.mark.slow
def test_pallas_kernels_read_resident_rows_and_prove_the_same_bits(cube, cube_proofs):
    """With the Pallas MSM kernels (under the interpreter here) the resident key holds its queries as
    ``ops.msm.BaseRows`` (point-major, converted once) and every MSM -- plain and split -- reads them in place: the
    proofs are the reference prover's bits. The XLA kernels keep the Affine layout; a mesh too."""
    from cuzk_jax.ops import msm as ops_msm

    proofs, rs, _ = cube_proofs
    cfg = "msm=pallas_interpret,split=on,tables=off"
    rk = pipeline.make_resident(cube["pk"], cube["r1cs"], cfg)
    assert all(isinstance(q, ops_msm.BaseRows) for q in rk.queries.values())
    assert ops_msm.num_bases(rk.queries["msm_b2"]) == int((~np.asarray(cube["pk"].b_g2_query.inf)).sum())
    got, _ = prover.prove(cube["pk"], cube["r1cs"], cube["witnesses"], randomness=rs, config=cfg)
    assert got == proofs
    xla = pipeline.as_config("msm=xla")
    assert not pipeline.rows_layout(xla) and not pipeline.rows_layout(pipeline.as_config(cfg), mesh=object())
    tampered = [Proof(p.c, p.b, p.a) for p in got]  # negative twin: the verifier refuses a tampered proof
    assert not any(verifier.verify(cube["pk"].vk, w.public_inputs, p) for w, p in zip(cube["witnesses"], tampered))


def test_make_resident_consume_frees_the_setup_queries(cube, cube_proofs):
    """``consume=True`` moves the queries out of the key and frees each full-size device query once its compact
    copy exists (the device setup's case at sector scale); the proofs are the same bits as without it. Negative
    twin: a consumed key cannot be made resident again (one clear error, not a crash)."""
    import copy
    import gc
    import weakref

    import jax.numpy as jnp

    pk = copy.copy(cube["pk"])
    fields = ("a_query", "b_g1_query", "b_g2_query", "l_query", "h_query")
    for f in fields:  # device arrays of this key's own, as a device setup leaves them (the fixture's stay intact)
        q = getattr(pk, f)
        setattr(pk, f, type(q)(*(jnp.array(a, copy=True) for a in (q.x, q.y, q.inf))))
    full_b1 = weakref.ref(pk.b_g1_query.x)  # B1 has points at infinity: it is compacted, so its original can go
    rk = pipeline.make_resident(pk, cube["r1cs"], "msm=xla,tables=off", consume=True)
    gc.collect()
    assert full_b1() is None
    assert all(getattr(pk, f) is None for f in fields)
    proofs, rs, _ = cube_proofs
    got, _ = prover.prove(rk, cube["r1cs"], cube["witnesses"], randomness=rs)
    assert got == proofs
    with pytest.raises(ValueError, match="no bases"):
        pipeline.make_resident(pk, cube["r1cs"], "msm=xla,tables=off")


def test_prover_config_text_and_hash():
    """One grammar for the prover config: key=value pairs; frozen and hashable; bad tokens are named."""
    from cuzk_jax.ops.config import MsmConfig, NttConfig

    cfg = pipeline.ProverConfig.parse("msm=xla,ntt=xla,tables=on,window=9")
    assert cfg == pipeline.ProverConfig(MsmConfig("xla"), NttConfig("xla"), "on", 9)
    assert pipeline.ProverConfig.parse(str(cfg)) == cfg and hash(cfg) == hash(pipeline.ProverConfig.parse(str(cfg)))
    assert pipeline.ProverConfig.parse("") == pipeline.ProverConfig() == pipeline.as_config(None)
    assert pipeline.ProverConfig.parse("tables=off") != pipeline.ProverConfig()
    ahead = pipeline.ProverConfig.parse("prefetch=on,split=off")
    assert ahead.prefetch == "on" and pipeline.ProverConfig.parse(str(ahead)) == ahead
    fused = pipeline.ProverConfig.parse("h=fused")
    assert fused.h == "fused" and pipeline.ProverConfig.parse(str(fused)) == fused != pipeline.ProverConfig()
    for bad, what in (("msm=cuda", "cuda"), ("tables=maybe", "tables"), ("window=1", "window"), ("window=x", "window"),
                      ("speed=9", "speed"), ("msm", "key=value"), ("tables=on,tables=off", "key=value"),
                      ("prefetch=yes", "prefetch"), ("h=both", "h must be")):
        with pytest.raises(ValueError, match=what):
            pipeline.ProverConfig.parse(bad)
    # the constraint evaluation has one method (the prefix sum): evaluate= is no longer a key
    with pytest.raises(BadInput, match="unknown key 'evaluate'"):
        pipeline.ProverConfig.parse("evaluate=cumsum")


def test_default_table_choice(cube, monkeypatch):
    """tables=auto builds window tables only for the GPU kernels and only when they fit the headroom (the key
    manager's, or a share of the device memory); the resident key counts them in its bytes."""
    from cuzk_jax.ops import msm as ops_msm
    from cuzk_jax.ops import msm_precomputed as MP
    from cuzk_jax.ops.config import MsmConfig

    pk = cube["pk"]
    queries = {"msm_a": pk.a_query, "msm_b1": pk.b_g1_query, "msm_b2": pk.b_g2_query, "msm_l": pk.l_query,
               "msm_h": pk.h_query}
    want = 0
    for name, bases in queries.items():
        n = int(bases.inf.shape[-1])
        want += ops_msm.num_windows(MP.window_bits(n)) * n * (97 if pipeline.MSMS[name] == "g1" else 193)
    assert pipeline.table_bytes_estimate(queries) == want > 0
    gpu = pipeline.ProverConfig(msm=MsmConfig("pallas")).resolved()
    cpu = pipeline.ProverConfig(msm=MsmConfig("xla")).resolved()
    assert pipeline._want_tables(gpu, queries, headroom=want)
    assert not pipeline._want_tables(gpu, queries, headroom=want - 1)
    assert not pipeline._want_tables(cpu, queries, headroom=10 * want)
    monkeypatch.setattr(pipeline, "device_bytes", lambda: 4 * want)
    assert pipeline._want_tables(gpu, queries, headroom=None)
    monkeypatch.setattr(pipeline, "device_bytes", lambda: 4 * want - 4)
    assert not pipeline._want_tables(gpu, queries, headroom=None)
    assert pipeline._want_tables(pipeline.ProverConfig(tables="on").resolved(), queries, headroom=0)
    assert not pipeline._want_tables(pipeline.ProverConfig(msm=MsmConfig("pallas"), tables="off").resolved(),
                                     queries, headroom=10 * want)


def test_precomputed_window_msms_give_the_same_proofs(cube, cube_proofs):
    """tables=on (XLA MSM, window 8): the five MSMs over window tables held by the resident key; same (r, s) ->
    the same proofs as the plain MSMs (which equal the reference prover); the key's bytes count the tables.
    Negative twin: a corrupted table spoils the proof."""
    import dataclasses

    proofs, rs, _ = cube_proofs
    pk = cube["pk"]
    rk = pipeline.make_resident(pk, cube["r1cs"], "msm=xla,tables=on,window=8")
    assert set(rk.tables) == set(pipeline.MSMS) and all(t.c == 8 for t in rk.tables.values())
    assert rk.table_bytes > 0 and rk.nbytes == rk.table_bytes + pipeline.make_resident(
        pk, cube["r1cs"], "msm=xla,tables=off").nbytes
    got, _ = prover.prove(rk, cube["r1cs"], cube["witnesses"], randomness=rs)
    assert got == proofs
    import jax

    t = rk.tables["msm_a"]  # the table's points shifted by one: valid points, wrong multiples
    shifted = t._replace(points=jax.tree_util.tree_map(lambda a: np.roll(np.asarray(a), 1, axis=-1), t.points))
    swapped = dataclasses.replace(rk, tables={**rk.tables, "msm_a": shifted})
    # no invalid proof leaves the prover: every proof is verified before it is returned
    with pytest.raises(ProofRejected, match="partitions 0, 1 does not verify"):
        prover.prove(swapped, cube["r1cs"], cube["witnesses"], randomness=rs)
    bad, timings = prover.prove(swapped, cube["r1cs"], cube["witnesses"], randomness=rs, verify=False)
    assert "verify" not in timings.phases
    assert bad[0].a != proofs[0].a
    assert not verifier.verify(pk.vk, cube["witnesses"][0].public_inputs, bad[0])
    with pytest.raises(ValueError, match="window"):
        prover.prove(pk, cube["r1cs"], cube["witnesses"], randomness=rs, config="tables=on,window=99")
    with pytest.raises(ValueError, match="carries its own config"):
        prover.prove(rk, cube["r1cs"], cube["witnesses"], config="tables=off")


def test_proof_bytes_roundtrip(cube_proofs):
    proofs, _, _ = cube_proofs
    data = proofs_to_bytes(proofs)
    assert len(data) == 192 * len(proofs)
    assert proofs_from_bytes(data) == proofs
    with pytest.raises(ValueError, match="192"):
        Proof.from_bytes(data[:191])
    with pytest.raises(ValueError, match="multiple of 192"):
        proofs_from_bytes(data + b"\x00")


def test_key_files_roundtrip_and_corruption(cube, tmp_path):
    pk = cube["pk"]
    data = pk.to_bytes()
    assert data[:8] == b"CUZKPK02"  # a Lagrange H query: the format with the form's code
    pk2 = ProvingKey.from_bytes(data)
    assert pk2.to_bytes() == data and pk2.h_form == "lagrange"
    # a coefficient-form key keeps the first format (files written before the Lagrange form still load)
    coef = generator.setup(cube["r1cs"], cube["toxic"], h_form="coefficients")
    old = coef.to_bytes()
    assert old[:8] == b"CUZKPK01" and ProvingKey.from_bytes(old).h_form == "coefficients"
    # an unknown form code (checksum made right) is refused by name
    import hashlib
    body = bytearray(data[:-32])
    body[20:24] = (7).to_bytes(4, "little")
    with pytest.raises(KeyFormatError, match="H query form code 7"):
        ProvingKey.from_bytes(bytes(body) + hashlib.sha256(bytes(body)).digest())
    assert pk2.vk == pk.vk and pk2.circuit_digest == pk.circuit_digest
    vkb = pk.vk.to_bytes()
    assert VerifyingKey.from_bytes(vkb) == pk.vk
    path = tmp_path / "k.pk"
    pk.save(str(path))
    assert ProvingKey.load(str(path)).to_bytes() == data
    with pytest.raises(KeyFormatError, match="checksum"):
        bad = bytearray(data)
        bad[len(data) // 2] ^= 0xFF
        ProvingKey.from_bytes(bytes(bad))
    with pytest.raises(KeyFormatError, match="truncated|checksum"):
        ProvingKey.from_bytes(data[:-100])
    with pytest.raises(KeyFormatError, match="magic"):
        ProvingKey.from_bytes(b"XXXX" + data[4:])
    with pytest.raises(KeyFormatError):
        VerifyingKey.from_bytes(vkb[:50])


def test_key_file_with_invalid_point_rejected(cube):
    """A key whose checksum is right but whose point is off the curve: the point check must catch it."""
    import hashlib

    vkb = bytearray(cube["pk"].vk.to_bytes()[:-32])
    vkb[12 + 95] ^= 0x01  # last byte of alpha_g1's y coordinate: off the curve
    vkb = bytes(vkb) + hashlib.sha256(bytes(vkb)).digest()
    with pytest.raises(KeyFormatError, match="alpha_g1"):
        VerifyingKey.from_bytes(vkb)


def _with_a_query_point(data: bytes, point_bytes: bytes) -> bytes:
    """A proving-key file with its first a_query point replaced and the checksum recomputed."""
    import hashlib
    import struct

    head = 8 + (12 if data[:8] == b"CUZKPK01" else 16) + 32  # CUZKPK02 carries the H form's u32
    vk_len = struct.unpack_from("<Q", data, head)[0]
    off = head + 8 + vk_len + 2 * 96 + 8
    body = data[:off] + point_bytes + data[off + 96:-32]
    return body + hashlib.sha256(body).digest()


def test_key_query_outside_subgroup(cube):
    """A query point on the curve but outside the subgroup: the full load names it, the key cache's load
    (subgroup_check=False) accepts it; a point off the curve fails both."""
    import random

    from cuzk_jax.reference.curve import g1 as ref_g1

    data = cube["pk"].to_bytes()
    p = ref_g1.random_curve_point(random.Random(5))
    assert not ref_g1.in_subgroup(p)
    bad = _with_a_query_point(data, ref_g1.encode(p, compressed=False))
    with pytest.raises(KeyFormatError, match="a_query.*subgroup"):
        ProvingKey.from_bytes(bad)
    assert ProvingKey.from_bytes(bad, subgroup_check=False).num_aux == cube["pk"].num_aux
    off = bytearray(ref_g1.encode(p, compressed=False))
    off[-1] ^= 1
    bad = _with_a_query_point(data, bytes(off))
    for check in (True, False):
        with pytest.raises(KeyFormatError, match="a_query.*curve"):
            ProvingKey.from_bytes(bad, subgroup_check=check)


@pytest.fixture(scope="session")
def porep_tiny():
    circuit = base.get_circuit("porep_like", "tiny")
    r1cs = circuit.r1cs()
    pk = generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(12))
    return circuit, r1cs, pk


def test_porep_like_tiny_prove_verify(porep_tiny):
    from cuzk_jax.groth16 import sector

    circuit, r1cs, pk = porep_tiny
    res = sector.prove_sector(circuit, pk, P, sector=3, verify=True)
    assert res.verified is True
    assert len(res.proof_bytes()) == 192 * P
    bad_inputs = [list(x) for x in res.public_inputs]
    bad_inputs[0][-1] = (bad_inputs[0][-1] + 1) % R
    assert not verifier.verify_batch(pk.vk, bad_inputs, res.proofs)
    assert verifier.verify_each(pk.vk, bad_inputs, res.proofs) == [False, True]


def test_finish_in_arkworks_equals_python_int_formulas(cube):
    """pipeline.finish (arkworks) against the same formulas in the Python-int arithmetic of host_curve, with MSM
    results at infinity among the inputs (an all-zero witness part gives one) and r, s at the edges."""
    import random

    from cuzk_jax.groth16 import host_curve
    from cuzk_jax.reference.curve import g1 as rg1, g2 as rg2

    pk, vk = cube["pk"], cube["pk"].vk
    rng = random.Random(3)
    lc = host_curve.linear_combination
    for case in range(3):
        pts1 = [rg1.mul(rg1.generator, rng.randrange(1, R)) for _ in range(4)]
        mb2 = rg2.mul(rg2.generator, rng.randrange(1, R))
        if case == 1:
            pts1[0], pts1[3], mb2 = None, None, None
        ma, mb1, ml, mh = pts1
        r, s = [(rng.randrange(R), rng.randrange(R)), (0, 1), (R - 1, R - 1)][case]
        a = lc(rg1, [(vk.alpha_g1, 1), (ma, 1), (pk.delta_g1, r)])
        b2 = lc(rg2, [(vk.beta_g2, 1), (mb2, 1), (vk.delta_g2, s)])
        b1 = lc(rg1, [(pk.beta_g1, 1), (mb1, 1), (pk.delta_g1, s)])
        c = lc(rg1, [(ml, 1), (mh, 1), (a, s), (b1, r), (rg1.neg(pk.delta_g1), r * s % R)])
        out = pipeline.BatchOutput(ok=np.ones(1, bool), first=-np.ones(1, int), points={},
                                   host={name: [pt] for name, pt in zip(pipeline.MSMS, (ma, mb1, mb2, ml, mh))})
        fin = types.SimpleNamespace(finish=pipeline.finish_points(pk))
        assert pipeline.finish(fin, out, 0, r, s) == (a, b2, c), case
    for curve, p in ((rg1, None), (rg2, None), (rg1, rg1.generator), (rg2, rg2.generator)):
        assert host_curve.from_arkworks(curve, host_curve.to_arkworks(curve, p)) == p


def test_from_device_batch_with_infinity_and_random_z():
    """host_curve.from_device (one batched inversion) against the reference points, G1 and G2, with a point at
    infinity (Z = 0) in the batch and the unbatched form."""
    import random

    from cuzk_jax import encoding
    from cuzk_jax.groth16 import host_curve
    from cuzk_jax.reference.curve import g1 as rg1, g2 as rg2
    from cuzk_jax.reference.field import fq

    rng = random.Random(7)
    for dev, ref in ((C.g1, rg1), (C.g2, rg2)):
        F = host_curve._field(ref)
        pts = [ref.mul(ref.generator, rng.randrange(1, R)) for _ in range(5)]
        pts[2] = None
        cols = []
        for p in pts:
            if p is None:
                cols.append((host_curve._one(F), host_curve._one(F), host_curve._zero(F)))
                continue
            z = rng.randrange(1, fq.modulus) if ref is rg1 else (rng.randrange(fq.modulus), rng.randrange(1, fq.modulus))
            z2 = F.square(z)
            cols.append((F.mul(p[0], z2), F.mul(p[1], F.mul(z2, z)), z))

        def limbs(vals):
            if ref is rg1:
                return encoding.ints_to_limbs(vals, fq, montgomery=True)
            return np.stack([encoding.ints_to_limbs([v[k] for v in vals], fq, montgomery=True) for k in range(2)])

        jac = C.Jacobian(*(limbs([c[k] for c in cols]) for k in range(3)))
        assert host_curve.from_device(dev, jac) == pts
        assert host_curve.from_device(dev, C.Jacobian(*(a[..., 1] for a in jac))) == [pts[1]]


# ---------------------------------------------------------------------------------------------------------------
# issue 21: degenerate verifying keys, public inputs read strictly, proof bytes errors
# ---------------------------------------------------------------------------------------------------------------


def _degenerate_vk(vk: VerifyingKey, field: str) -> VerifyingKey:
    """``vk`` with one point (``alpha_g1``, ..., ``ic<i>``) replaced by the point at infinity."""
    import dataclasses

    if field.startswith("ic"):
        i = int(field[2:])
        return dataclasses.replace(vk, ic=[None if k == i else p for k, p in enumerate(vk.ic)])
    return dataclasses.replace(vk, **{field: None})


@pytest.mark.parametrize("field", ["alpha_g1", "beta_g2", "gamma_g2", "delta_g2", "ic0", "ic1"])
def test_verifying_key_with_identity_point_refused(cube, field):
    """The point at infinity as alpha, beta, gamma, delta or an IC point makes the pairing equation degenerate
    (identity gamma drops the public inputs): the file is refused, naming the point (accepted before). The files
    carry a correct checksum, so only the point check can catch it, alone and inside a proving key."""
    import dataclasses

    bad = _degenerate_vk(cube["pk"].vk, field)
    name = rf"ic\[{field[2:]}\]" if field.startswith("ic") else field
    with pytest.raises(KeyFormatError, match=f"{name} is the point at infinity"):
        VerifyingKey.from_bytes(bad.to_bytes())
    with pytest.raises(KeyFormatError, match=f"{name} is the point at infinity"):
        ProvingKey.from_bytes(dataclasses.replace(cube["pk"], vk=bad).to_bytes())


def test_verifier_public_inputs_strict(cube, cube_proofs):
    proofs, _, _ = cube_proofs
    vk = cube["pk"].vk
    y = cube["circuit"].public_inputs(cube["circuit"].sample_inputs(0))[0]
    assert verifier.verify(vk, [y], proofs[0])
    from cuzk_jax.errors import BadInput

    for bad in ([float(y)], [True], [y + R], [-1], ["3_5"], [" 1"], [None]):
        with pytest.raises(BadInput, match="public input 0"):
            verifier.verify(vk, bad, proofs[0])


def test_proof_bytes_errors_are_format_errors(cube_proofs):
    from cuzk_jax.errors import FormatError

    data = bytearray(proofs_to_bytes(cube_proofs[0]))
    data[192 + 10] ^= 0x5A
    with pytest.raises(FormatError, match="proof 1"):
        proofs_from_bytes(bytes(data))


@pytest.mark.parametrize("value,match", [
    (35.9, "decimal string"), (True, "boolean"), ("3_5", "decimal string"), (" 35", "decimal string"),
    ("+35", "decimal string"), ("-1", "decimal string"), ("035", "decimal string"), (35, "integer"),
    (str(R), "out of range"), (None, "decimal string"),
])
def test_read_sector_public_inputs_strict(cube_proofs, tmp_path, value, match):
    """Sector public JSON: only canonical decimal strings in [0, r); anything else is one FormatError naming the
    file, the vector and the index (before: 35.9 -> 35, true -> 1, "3_5" -> 35, values >= r kept)."""
    import json

    from cuzk_jax.errors import FormatError
    from cuzk_jax.groth16 import sector

    proofs = cube_proofs[0]
    (tmp_path / "s.proofs").write_bytes(proofs_to_bytes(proofs))
    good = [["35"]] * len(proofs)
    (tmp_path / "s.json").write_text(json.dumps({"public_inputs": good}))
    assert sector.read_sector(str(tmp_path / "s.proofs"), str(tmp_path / "s.json"))[1] == [[35]] * len(proofs)
    (tmp_path / "s.json").write_text(json.dumps({"public_inputs": good[:-1] + [[value]]}))
    with pytest.raises(FormatError, match=rf"public_inputs\[{len(proofs) - 1}\]\[0\]: .*{match}"):
        sector.read_sector(str(tmp_path / "s.proofs"), str(tmp_path / "s.json"))
