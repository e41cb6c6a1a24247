"""Native keys and proofs exported to snarkjs's JSON files (issue 22 item 6): ``snarkjs groth16 verify`` accepts a
proof of the native ``cube`` circuit, and rejects a tampered twin. Node tests skip when the npm toolchain
(``npm ci``) is missing; the JSON round trip and our own snarkjs-format verifier run regardless."""

from __future__ import annotations

import json

import pytest

from cuzk_jax.circuits import get_circuit
from cuzk_jax.errors import BadInput
from cuzk_jax.groth16 import data_structures as ds
from cuzk_jax.groth16 import generator, prover
from cuzk_jax.groth16 import verifier as gverifier
from cuzk_jax.reference import groth16 as RG
from cuzk_jax.reference.constants import R
from cuzk_jax.snarkjs import export, jsonio, toolchain, verifier


def _native_cube():
    """``generator.setup`` + ``prover.prove`` on cube (compiles the prover: ~1-2 min on a 2-core CPU)."""
    circuit = get_circuit("cube")
    r1cs = circuit.r1cs()
    pk = generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(21))
    w = circuit.witness(circuit.sample_inputs(0))
    proofs, _ = prover.prove(pk, r1cs, [w], randomness=prover.insecure_randomness_for_tests(3, 1))
    return pk.vk, proofs[0], list(w.public_inputs)


@pytest.fixture(scope="module")
def cube_proof():
    """The same keys and proof types from the Python-int oracle (:mod:`cuzk_jax.reference.groth16`, which the native
    setup and prover equal point for point: tests/test_groth16.py), in well under a second."""
    circuit = get_circuit("cube")
    r1cs = circuit.r1cs()
    toxic = generator.insecure_toxic_waste_for_tests(21)
    ext = r1cs.with_input_constraints()
    rpk, rvk = RG.setup(ext.reference_matrices(), r1cs.num_inputs, r1cs.num_vars, toxic)
    vk = ds.VerifyingKey(alpha_g1=rvk.alpha_g1, beta_g2=rvk.beta_g2, gamma_g2=rvk.gamma_g2,
                         delta_g2=rvk.delta_g2, ic=list(rvk.ic))
    w = circuit.witness(circuit.sample_inputs(0))
    proof = ds.Proof(*RG.prove(rpk, ext.reference_matrices(), w.z, 5, 7))
    assert gverifier.verify(vk, w.public_inputs, proof)
    return vk, proof, list(w.public_inputs)


@pytest.fixture(scope="module")
def exported(cube_proof, tmp_path_factory):
    vk, proof, public = cube_proof
    d = tmp_path_factory.mktemp("export")
    good = export.export(d / "good", vk, proof, public)
    # negative twins: a tampered proof (C replaced by A) and a wrong public input
    bad_proof = export.export(d / "bad_proof", vk, ds.Proof(proof.a, proof.b, proof.a), public)
    bad_public = export.export(d / "bad_public", vk, proof, [(public[0] + 1) % R])
    return good, bad_proof, bad_public


def test_exported_files_read_back_and_verify(cube_proof, exported):
    vk, proof, public = cube_proof
    good, bad_proof, bad_public = exported
    svk = jsonio.read_vk(good["vk"])
    assert svk.n_public == len(vk.ic) - 1 == len(public)
    assert svk.ic == list(vk.ic) and svk.alpha1 == vk.alpha_g1 and svk.delta2 == vk.delta_g2
    verifier.check_vk(svk)  # vk_alphabeta_12 == e(alpha1, beta2) in snarkjs's layout
    raw = json.loads(open(good["vk"]).read())
    assert raw["protocol"] == "groth16" and raw["curve"] == "bls12381" and len(raw["vk_alphabeta_12"]) == 2
    assert jsonio.read_public(good["public"]) == public
    assert verifier.verify(good["vk"], good["public"], good["proof"])
    assert not verifier.verify(bad_proof["vk"], bad_proof["public"], bad_proof["proof"])
    assert not verifier.verify(bad_public["vk"], bad_public["public"], bad_public["proof"])


def test_snarkjs_accepts_export_and_rejects_tampered(exported):
    _snarkjs_or_skip()
    good, bad_proof, bad_public = exported
    ok, out = toolchain.snarkjs_verify(good["vk"], good["public"], good["proof"])
    assert ok, out
    assert toolchain.snarkjs_verify_many([(d["vk"], d["public"], d["proof"]) for d in (bad_proof, bad_public)]) \
        == [False, False]


def test_export_refuses_bad_input(cube_proof, tmp_path):
    vk, proof, public = cube_proof
    with pytest.raises(BadInput):
        export.export(tmp_path, vk, proof, public + [1])
    with pytest.raises(BadInput):
        export.write_public(tmp_path / "p.json", [R])
    with pytest.raises(BadInput):
        export.proof((proof.a, proof.b, proof.c))


def _snarkjs_or_skip():
    try:
        toolchain.tool("snarkjs")
        toolchain.check_versions()
    except toolchain.ToolchainMissing as e:
        pytest.skip(f"snarkjs toolchain unavailable: {e}")


@pytest.mark.slow
def test_native_prover_export_verifies_in_snarkjs(tmp_path):
    """The real path end to end: setup and prove on the device, export, ``snarkjs groth16 verify``."""
    vk, proof, public = _native_cube()
    good = export.export(tmp_path / "good", vk, proof, public)
    bad = export.export(tmp_path / "bad", vk, ds.Proof(proof.c, proof.b, proof.a), public)
    assert verifier.verify(good["vk"], good["public"], good["proof"])
    _snarkjs_or_skip()
    assert toolchain.snarkjs_verify_many([(d["vk"], d["public"], d["proof"]) for d in (good, bad)]) == [True, False]


@pytest.mark.slow
def test_prove_script_snarkjs_out(tmp_path):
    """``prove.py --snarkjs_out``: every partition of a native sector as snarkjs files; snarkjs accepts them."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    _snarkjs_or_skip()
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = tmp_path / "sj"
    r = subprocess.run([sys.executable, str(root / "scripts" / "prove.py"), "--circuit=cube", "--partitions=2",
                        f"--key_dir={tmp_path / 'keys'}", "--out=", f"--snarkjs_out={out}"],
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    cases = [(out / "verification_key.json", out / "sector-0" / f"partition-{p}" / "public.json",
              out / "sector-0" / f"partition-{p}" / "proof.json") for p in range(2)]
    swapped = (cases[0][0], cases[1][1], cases[0][2])  # partition 1's public inputs with partition 0's proof
    assert toolchain.snarkjs_verify_many(cases + [swapped]) == [True, True, False]
