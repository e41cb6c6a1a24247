"""circom / snarkjs interop (issue 8): readers, JSON files, prover and verifier against the real toolchain.

The oracles are code we did not write: snarkjs's own JSON exports of the binary files (``r1cs/wtns/zkey export
json``), ``snarkjs groth16 verify`` on our proofs, snarkjs's proofs through our verifier, and py_arkworks for all
group arithmetic. Every end-to-end test has negative twins (tampered proof, wrong public signal, unsatisfied
witness, H in the wrong polynomial form) that both verifiers must reject.

The circuit (tests/circom/poseidon_chain.circom, 426 constraints, domain 2^9) is compiled and set up once per
cache (``$CUZK_JAX_SNARKJS_CACHE``, default ~/.cache/cuzk_jax/snarkjs, keyed by the circuit's content hash);
the first run costs ~1 min of ceremony, later runs reuse it. Node tests skip with the reason if node or the npm
packages (``npm ci`` at the repository root) are missing; the format-error tests on synthetic files always run.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from cuzk_jax.reference import constants as C
from cuzk_jax.snarkjs import binfile, jsonio, points, prover, r1cs, toolchain, verifier, wtns, zkey
from cuzk_jax.snarkjs.binfile import FormatError

HERE = Path(__file__).resolve().parent
CIRCUIT = HERE / "circom" / "poseidon_chain.circom"
INPUT = json.loads((HERE / "circom" / "poseidon_chain.input.json").read_text())
SEED = 1234  # insecure_test_seed for reproducible proofs
BN128_R = 21888242871839275222246405745257275088548364400416034343698204186575808495617


# ------------------------------------------------------------------------------------------------------------
# Fixtures (session-wide: the ceremony and the proofs are made once)
# ------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tools():
    try:
        toolchain.tool("snarkjs")
        toolchain.tool("circom2")
        toolchain.check_versions()
    except toolchain.ToolchainMissing as e:
        pytest.skip(f"circom/snarkjs toolchain unavailable: {e}")


@pytest.fixture(scope="session")
def art(tools):
    return toolchain.build_circuit(CIRCUIT.read_text(), INPUT, "poseidon_chain", log=None)


@pytest.fixture(scope="session")
def zk(art):
    return zkey.read_zkey(art.zkey)


@pytest.fixture(scope="session")
def wit(art):
    return wtns.read_wtns(art.wtns)


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("snarkjs")


@pytest.fixture(scope="session")
def host_proof(zk, wit, work):
    """Our proof (host backend, seeded), written as proof.json / public.json."""
    res = prover.prove(zk, wit, backend="host", insecure_test_seed=SEED)
    d = work / "host"
    d.mkdir()
    jsonio.write_proof(d / "proof.json", res.proof)
    jsonio.write_public(d / "public.json", res.public)
    return res, d / "proof.json", d / "public.json"


@pytest.fixture(scope="session")
def snarkjs_proof(art, work):
    d = work / "snarkjs"
    d.mkdir()
    toolchain.snarkjs_prove(art.zkey, art.wtns, d / "proof.json", d / "public.json")
    return d / "proof.json", d / "public.json"


def _export_json(art, what: str, src: Path, work: Path) -> object:
    out = work / f"export-{what}.json"
    if not out.exists():
        toolchain.snarkjs(what, "export", "json", src, out)
    return json.loads(out.read_text())


def _g1j(p):
    return None if p[2] == "0" else (int(p[0]), int(p[1]))


def _g2j(p):
    return None if p[2] == ["0", "0"] else ((int(p[0][0]), int(p[0][1])), (int(p[1][0]), int(p[1][1])))


# ------------------------------------------------------------------------------------------------------------
# Readers against snarkjs's own JSON exports
# ------------------------------------------------------------------------------------------------------------


def test_r1cs_matches_snarkjs_export(art, work):
    ref = _export_json(art, "r1cs", art.r1cs, work)
    rc = r1cs.read_r1cs(art.r1cs)
    assert (rc.n_wires, rc.n_pub_out, rc.n_pub_in, rc.n_prv_in, rc.n_labels, rc.n_constraints) == (
        ref["nVars"], ref["nOutputs"], ref["nPubInputs"], ref["nPrvInputs"], ref["nLabels"], ref["nConstraints"])
    ours = [[{str(k): str(v) for k, v in lc.items()} for lc in con] for con in rc.constraint_lists()]
    assert ours == ref["constraints"]
    assert rc.wire_to_label is not None and rc.wire_to_label[0] == 0
    # the file has linear rows (empty A and B), which the zkey path must handle (C is not stored there)
    assert any(not a and not b for a, b, _ in rc.constraint_lists())


def test_wtns_matches_snarkjs_export_and_satisfies(art, work, wit):
    ref = _export_json(art, "wtns", art.wtns, work)
    assert [str(v) for v in wit] == ref
    assert wit[0] == 1
    rc = r1cs.read_r1cs(art.r1cs)
    assert rc.unsatisfied(wit) == []
    bad = list(wit)
    bad[-1] = (bad[-1] + 1) % C.R
    assert rc.unsatisfied(bad) != []


def test_zkey_matches_snarkjs_export(art, work, zk):
    ref = _export_json(art, "zkey", art.zkey, work)
    assert (zk.n_vars, zk.n_public, zk.domain_size, zk.power) == (
        ref["nVars"], ref["nPublic"], ref["domainSize"], ref["power"])
    for name in ("alpha1", "beta1", "delta1"):
        assert getattr(zk, name) == _g1j(ref[f"vk_{name[:-1]}_1"])
    for name in ("beta2", "gamma2", "delta2"):
        assert getattr(zk, name) == _g2j(ref[f"vk_{name[:-1]}_2"])
    assert zk.ic_ints() == [_g1j(p) for p in ref["IC"]]
    assert points.g1_ints(zk.a) == [_g1j(p) for p in ref["A"]]
    assert points.g1_ints(zk.b1) == [_g1j(p) for p in ref["B1"]]
    assert points.g2_ints(zk.b2) == [_g2j(p) for p in ref["B2"]]
    assert points.g1_ints(zk.c) == [_g1j(p) for p in ref["C"] if p is not None]  # export pads C with nulls
    assert points.g1_ints(zk.h) == [_g1j(p) for p in ref["hExps"]]
    co = zk.coeffs
    ours = list(zip(co.matrix.tolist(), co.constraint.tolist(), co.signal.tolist(), co.coef_ints()))
    assert ours == [(c["matrix"], c["constraint"], c["signal"], int(c["value"])) for c in ref["ccoefs"]]
    # the stored value is coef * 2^512 mod r (Montgomery-times-Montgomery), not the coefficient itself
    raw = binfile.le_ints(binfile.limbs_to_le(co.value[:, :1]), 32)[0]
    assert raw == ours[0][3] * pow(2, 512, C.R) % C.R
    # zkey point form == ops limb form: Montgomery with R = 2^384
    x0 = binfile.le_ints(binfile.limbs_to_le(zk.a.x[:, ~zk.a.inf][:, :1]), 48)[0]
    assert x0 == points.g1_ints(zk.a)[int((~zk.a.inf).argmax())][0] * pow(2, 384, C.P) % C.P


def test_verification_key_equals_snarkjs_export(art, zk, work):
    vk = verifier.verification_key_from_zkey(zk)
    ref = json.loads(art.vk.read_text())
    assert jsonio.vk_to_json(vk) == ref  # including vk_alphabeta_12 = e(alpha1, beta2)
    jsonio.write_vk(work / "vk_roundtrip.json", vk)
    assert jsonio.read_vk(work / "vk_roundtrip.json") == vk
    assert jsonio.read_vk(art.vk) == vk


# ------------------------------------------------------------------------------------------------------------
# End to end: snarkjs verifies our proofs, we verify snarkjs's, both reject tampering
# ------------------------------------------------------------------------------------------------------------


def test_snarkjs_verifies_our_proof(art, host_proof, wit):
    res, proof_path, public_path = host_proof
    assert res.public == wit[1:4]
    ok, out = toolchain.snarkjs_verify(art.vk, public_path, proof_path)
    assert ok, out
    assert verifier.verify(art.vk, public_path, proof_path)


def test_we_verify_snarkjs_proof(art, snarkjs_proof, host_proof):
    proof_path, public_path = snarkjs_proof
    assert verifier.verify(art.vk, public_path, proof_path)
    # same public signals as ours, byte for byte
    assert public_path.read_text() == host_proof[2].read_text()
    # snarkjs's proof survives our reader/writer unchanged
    assert jsonio.proof_to_json(jsonio.read_proof(proof_path)) == json.loads(proof_path.read_text())


def test_proof_is_deterministic_under_test_seed_and_random_otherwise(zk, wit, host_proof):
    again = prover.prove(zk, wit, backend="host", insecure_test_seed=SEED)
    assert again.proof == host_proof[0].proof
    other = prover.prove(zk, wit, backend="host")  # r, s from secrets
    assert other.proof.a != host_proof[0].proof.a
    assert verifier.verify(verifier.verification_key_from_zkey(zk), other.public, other.proof)


def _tamper_cases(proof: jsonio.Proof):
    """(name, tampered proof): an on-curve shift of A, an off-curve C, and swapped A/C."""
    import py_arkworks_bls12381 as ark

    shifted = points.g1_from_ark(points.g1_to_ark(proof.a) + ark.G1Point())
    x, y = proof.c
    return [("A + G", jsonio.Proof(shifted, proof.b, proof.c)),
            ("C off curve", jsonio.Proof(proof.a, proof.b, ((x + 1) % C.P, y))),
            ("A <-> C", jsonio.Proof(proof.c, proof.b, proof.a))]


@pytest.mark.parametrize("source", ["ours", "snarkjs"])
def test_tampered_proofs_rejected_by_both(art, host_proof, snarkjs_proof, work, source):
    proof_path, public_path = (host_proof[1], host_proof[2]) if source == "ours" else snarkjs_proof
    proof = jsonio.read_proof(proof_path)
    vk = jsonio.read_vk(art.vk)
    public = jsonio.read_public(public_path)
    cases = _tamper_cases(proof)
    batch = []
    for i, (name, bad) in enumerate(cases):
        assert not verifier.verify(vk, public, bad), name
        p = work / f"tampered-{source}-{i}.json"
        jsonio.write_proof(p, bad)
        batch.append((art.vk, public_path, p))
    # wrong public signal
    wrong = list(public)
    wrong[-1] = (wrong[-1] + 1) % C.R
    assert not verifier.verify(vk, wrong, proof)
    p = work / f"public-wrong-{source}.json"
    jsonio.write_public(p, wrong)
    batch.append((art.vk, p, proof_path))
    batch.append((art.vk, public_path, proof_path))  # the untampered original: the control
    results = toolchain.snarkjs_verify_many(batch)
    assert results == [False] * (len(cases) + 1) + [True], results
    # a public signal >= r is rejected (snarkjs: "Public inputs are not valid")
    assert verifier.check(vk, public[:-1] + [public[-1] + C.R], proof) is not None


def test_unsatisfied_witness_gives_rejected_proof(art, zk, wit, work):
    """An unsatisfied witness: the prover refuses to return the proof (ProofRejected, host and device paths);
    forced out with verify=False, the proof is rejected by our verifier and by snarkjs."""
    from cuzk_jax.errors import ProofRejected
    from cuzk_jax.snarkjs import device

    bad = list(wit)
    bad[10] = (bad[10] + 1) % C.R  # an internal wire: the public signals are unchanged
    for be in ("host", device.DeviceBackend()):
        with pytest.raises(ProofRejected, match="does not verify"):
            prover.prove(zk, bad, backend=be, insecure_test_seed=SEED)
    res = prover.prove(zk, bad, backend="host", insecure_test_seed=SEED, verify=False)
    jsonio.write_proof(work / "unsat-proof.json", res.proof)
    jsonio.write_public(work / "unsat-public.json", res.public)
    assert not verifier.verify(art.vk, work / "unsat-public.json", work / "unsat-proof.json")
    ok, out = toolchain.snarkjs_verify(art.vk, work / "unsat-public.json", work / "unsat-proof.json")
    assert not ok, out


class _WrongCosetBackend(prover.HostBackend):
    """H scalars in the bellman form (coset by 7, divided by Z): valid math, wrong for snarkjs's H points."""

    def h_scalars(self, a, b, power):
        from cuzk_jax.reference import ntt

        c = [x * y % C.R for x, y in zip(a, b)]
        h = ntt.compute_h(a, b, c)
        return ntt.ntt(h)


def test_h_form_matters(art, zk, wit, work):
    res = prover.prove(zk, wit, backend=_WrongCosetBackend(), insecure_test_seed=SEED, verify=False)
    assert not verifier.verify(art.vk, res.public, res.proof)


def test_prover_rejects_mismatched_witness(zk, wit):
    with pytest.raises(ValueError, match="nVars"):
        prover.prove(zk, wit[:-1])
    with pytest.raises(ValueError, match="constant wire"):
        prover.prove(zk, [2] + wit[1:])
    with pytest.raises(ValueError, match="Fr element"):
        prover.prove(zk, wit[:-1] + [C.R])


def test_cli_scripts(art, work):
    """prove --zkey/--wtns writes snarkjs's files; verify --proof accepts them (the script and ``python -m``)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    root = Path(__file__).resolve().parents[1]
    gp, gpub = work / "gen-proof.json", work / "gen-public.json"
    subprocess.run([sys.executable, str(root / "scripts" / "prove.py"), f"--zkey={art.zkey}", f"--wtns={art.wtns}",
                    f"--proof={gp}", f"--public={gpub}", "--backend=host"], check=True, env=env, capture_output=True)
    verify = [sys.executable, "-m", "cuzk_jax", "verify", f"--vk={art.vk}", f"--public={gpub}"]
    ok = subprocess.run(verify + [f"--proof={gp}"], env=env, capture_output=True, text=True)
    assert ok.returncode == 0 and "OK!" in ok.stdout, ok.stdout + ok.stderr
    bad = jsonio.read_proof(gp)
    jsonio.write_proof(work / "cli-bad.json", jsonio.Proof(bad.c, bad.b, bad.a))
    no = subprocess.run(verify + [f"--proof={work / 'cli-bad.json'}"], env=env, capture_output=True, text=True)
    assert no.returncode == 1 and "Invalid proof" in no.stdout
    (work / "truncated.json").write_text("{")
    bad_file = subprocess.run(verify + [f"--proof={work / 'truncated.json'}"], env=env, capture_output=True, text=True)
    assert bad_file.returncode == 2 and "error:" in bad_file.stderr, bad_file.stdout + bad_file.stderr


def test_fullprove_from_wasm_and_input(art, work):
    """fullprove (snarkjs groth16 fullprove's contract): witness from the circuit's wasm and input JSON, then our
    prover; snarkjs accepts the proof. An input the circuit rejects is one clear error, nothing written."""
    from cuzk_jax.errors import BadInput

    res = prover.fullprove(art.wasm, art.input, art.zkey, work / "fp-proof.json", work / "fp-public.json",
                           backend="host", insecure_test_seed=SEED)
    assert toolchain.snarkjs_verify_many([(art.vk, work / "fp-public.json", work / "fp-proof.json")]) == [True]
    assert res.public == jsonio.read_public(work / "fp-public.json")
    (work / "fp-bad-input.json").write_text('{"no_such_signal": 1}')
    with pytest.raises(BadInput, match="witness could not be computed"):
        prover.fullprove(art.wasm, work / "fp-bad-input.json", art.zkey, work / "fp-bad-proof.json", backend="host")
    assert not (work / "fp-bad-proof.json").exists()


# ------------------------------------------------------------------------------------------------------------
# Refusing other curves, other protocols, truncated and corrupt files
# ------------------------------------------------------------------------------------------------------------


def _r1cs_bytes(prime=C.R, n8=32, cons=((({1: 1}), ({2: 1}), ({3: 1})),), n_wires=4, labels=True) -> bytes:
    hdr = struct.pack("<I", n8) + prime.to_bytes(n8, "little") + struct.pack("<IIIIQI", n_wires, 1, 1, 1, n_wires,
                                                                              len(cons))
    body = b""
    for con in cons:
        for lc in con:
            body += struct.pack("<I", len(lc)) + b"".join(struct.pack("<I", w) + v.to_bytes(n8, "little")
                                                          for w, v in lc.items())
    secs = [(1, hdr), (2, body)] + ([(3, b"".join(struct.pack("<Q", i) for i in range(n_wires)))] if labels else [])
    return binfile.build("r1cs", 1, secs)


def test_synthetic_r1cs_and_wtns_roundtrip():
    rc = r1cs.read_r1cs(_r1cs_bytes(cons=(({1: 5, 0: 7}, {2: C.R - 1}, {3: 1}), ({}, {}, {1: 2, 3: C.R - 2}))))
    assert rc.n_constraints == 2 and rc.n_public == 2
    assert rc.constraint_lists() == [({1: 5, 0: 7}, {2: C.R - 1}, {3: 1}), ({}, {}, {1: 2, 3: C.R - 2})]
    w = [1, 3, C.R - 1, 17]
    assert wtns.read_wtns(wtns.wtns_bytes(w)) == w


@pytest.mark.parametrize("mutate,match", [
    (lambda b: b[:-5], "truncated"),
    (lambda b: b + b"\0", "unexpected bytes"),
    (lambda b: b"wtns" + b[4:], "not a .r1cs"),
    (lambda b: b[:4] + struct.pack("<I", 2) + b[8:], "version 2"),
    (lambda b: b[:10], "too short"),
])
def test_r1cs_container_errors(mutate, match):
    with pytest.raises(FormatError, match=match):
        r1cs.read_r1cs(mutate(_r1cs_bytes()))


def test_r1cs_semantic_errors():
    with pytest.raises(FormatError, match="bn128"):
        r1cs.read_r1cs(_r1cs_bytes(prime=BN128_R))
    with pytest.raises(FormatError, match=r"prime \d+"):
        r1cs.read_r1cs(_r1cs_bytes(prime=101))
    with pytest.raises(FormatError, match="wire 9"):
        r1cs.read_r1cs(_r1cs_bytes(cons=(({9: 1}, {}, {}),)))
    with pytest.raises(FormatError, match="coefficient >= r"):
        r1cs.read_r1cs(_r1cs_bytes(cons=(({1: C.R}, {}, {}),)))
    with pytest.raises(FormatError, match="custom gates"):
        r1cs.read_r1cs(binfile.build("r1cs", 1, [(4, b"\0" * 4)]))
    with pytest.raises(FormatError, match="missing section 2"):
        r1cs.read_r1cs(binfile.build("r1cs", 1, [(1, binfile.parse(_r1cs_bytes(), "r1cs", 1).section(1))]))
    with pytest.raises(FormatError, match="cannot read"):
        r1cs.read_r1cs("/nonexistent/file.r1cs")


def test_wtns_errors():
    good = wtns.wtns_bytes([1, 2, 3])
    with pytest.raises(FormatError, match="truncated"):
        wtns.read_wtns(good[:-1])
    hdr = struct.pack("<I", 32) + BN128_R.to_bytes(32, "little") + struct.pack("<I", 1)
    with pytest.raises(FormatError, match="bn128"):
        wtns.read_wtns(binfile.build("wtns", 2, [(1, hdr), (2, (1).to_bytes(32, "little"))]))
    hdr = struct.pack("<I", 32) + C.R.to_bytes(32, "little") + struct.pack("<I", 2)
    with pytest.raises(FormatError, match="expected 64"):
        wtns.read_wtns(binfile.build("wtns", 2, [(1, hdr), (2, (1).to_bytes(32, "little"))]))
    with pytest.raises(FormatError, match=">= r"):
        wtns.read_wtns(binfile.build("wtns", 2, [(1, hdr), (2, (1).to_bytes(32, "little")
                                                      + C.R.to_bytes(32, "little"))]))
    with pytest.raises(FormatError, match="constant wire"):
        wtns.read_wtns(wtns.wtns_bytes([5, 1]))
    with pytest.raises(ValueError, match="witness value 1"):
        wtns.wtns_bytes([1, -1])


def _patch_section(data: bytes, sid: int, offset: int, new: bytes) -> bytes:
    f = binfile.parse(data, "zkey", 1)
    pos = f.sections[sid][0] + offset
    return data[:pos] + new + data[pos + len(new):]


def test_zkey_errors(art):
    data = art.zkey.read_bytes()
    assert zkey.read_zkey(data).n_vars > 0
    with pytest.raises(FormatError, match="truncated"):
        zkey.read_zkey(data[:-100])
    with pytest.raises(FormatError, match="not a .zkey"):
        zkey.read_zkey(art.r1cs)
    with pytest.raises(FormatError, match="plonk"):
        zkey.read_zkey(_patch_section(data, 1, 0, struct.pack("<I", 2)))
    with pytest.raises(FormatError, match="bn128"):  # the scalar prime r in the Groth16 header
        zkey.read_zkey(_patch_section(data, 2, 4 + 48 + 4, BN128_R.to_bytes(32, "little")))
    # a flipped byte in an A point: off the curve (or >= q), named
    f = binfile.parse(data, "zkey", 1)
    a = zkey.read_zkey(data).a
    i = int((~a.inf).argmax())
    off = i * 96 + 5
    flipped = bytes([data[f.sections[5][0] + off] ^ 0x40])
    with pytest.raises(FormatError, match=f"A points: point {i}"):
        zkey.read_zkey(_patch_section(data, 5, off, flipped))
    # coefficient value >= r, signal out of range
    with pytest.raises(FormatError, match="value >= r"):
        zkey.read_zkey(_patch_section(data, 4, 4 + 12, C.R.to_bytes(32, "little")))
    with pytest.raises(FormatError, match="signal index"):
        zkey.read_zkey(_patch_section(data, 4, 4 + 8, struct.pack("<I", 10**6)))


def test_bn128_circuit_refused(tools, work):
    """A real circuit compiled with circom's default prime (bn128) is refused with a clear message."""
    out = work / "bn128"
    out.mkdir()
    src = 'pragma circom 2.0.0;\ntemplate M() { signal input a; signal input b; signal output c; c <== a * b; }\n' \
          'component main = M();\n'
    (out / "m.circom").write_text(src)
    toolchain.run([toolchain.tool("circom2"), str(out / "m.circom"), "--r1cs", "--wasm", "-o", str(out)],
                  cwd=toolchain.root())
    with pytest.raises(FormatError, match="bn128.*--prime bls12381"):
        r1cs.read_r1cs(out / "m.r1cs")
    (out / "in.json").write_text('{"a": "3", "b": "4"}')
    toolchain.snarkjs("wtns", "calculate", out / "m_js" / "m.wasm", out / "in.json", out / "m.wtns")
    with pytest.raises(FormatError, match="bn128"):
        wtns.read_wtns(out / "m.wtns")


def test_json_errors_and_infinity_roundtrip(tmp_path):
    g1 = (C.G1_X, C.G1_Y)
    g2 = (C.G2_X, C.G2_Y)
    p = jsonio.Proof(None, g2, g1)
    js = jsonio.proof_to_json(p)
    assert js["pi_a"] == ["0", "1", "0"]
    assert jsonio.read_proof(js) == p
    jsonio.write_proof(tmp_path / "p.json", jsonio.Proof(g1, None, g1))
    assert jsonio.read_proof(tmp_path / "p.json").b is None
    # Jacobian input (z != 1) is normalised: (X Z^2, Y Z^3, Z) -> (X, Y)
    z = 5
    jac = [str(C.G1_X * z * z % C.P), str(C.G1_Y * z ** 3 % C.P), str(z)]
    assert jsonio.read_proof(dict(js, pi_a=jac)).a == g1
    with pytest.raises(ValueError, match="missing key 'pi_c'"):
        jsonio.read_proof({k: v for k, v in js.items() if k != "pi_c"})
    with pytest.raises(ValueError, match=r"pi_a\[0\]: expected a decimal string"):
        jsonio.read_proof(dict(js, pi_a=["0x12", "1", "1"]))
    with pytest.raises(ValueError, match=r"pi_c\[1\]: value .* out of range"):
        jsonio.read_proof(dict(js, pi_c=["1", str(C.P), "1"]))
    with pytest.raises(ValueError, match="curve.*bls12381"):
        jsonio.read_proof(dict(js, curve="bn128"))
    with pytest.raises(ValueError, match="not valid JSON"):
        jsonio.read_proof("{not json")
    with pytest.raises(ValueError, match="expected a JSON list"):
        jsonio.read_public({"a": 1})


def test_verifier_usage_errors(zk, host_proof):
    vk = verifier.verification_key_from_zkey(zk)
    res = host_proof[0]
    with pytest.raises(ValueError, match="expects 3"):
        verifier.verify(vk, res.public[:-1], res.proof)
    x, y = vk.ic[1]
    bad_vk = jsonio.VerificationKey(vk.n_public, vk.alpha1, vk.beta2, vk.gamma2, vk.delta2,
                                    [vk.ic[0], (x, (y + 1) % C.P)] + vk.ic[2:], vk.alphabeta)
    with pytest.raises(ValueError, match=r"IC\[1\] is not on the curve"):
        verifier.verify(bad_vk, res.public, res.proof)
    assert verifier.verify(vk, res.public, res.proof)


# ------------------------------------------------------------------------------------------------------------
# Device backend (XLA ops) against the host oracle
# ------------------------------------------------------------------------------------------------------------


def test_device_qap_and_h_equal_host(zk, wit):
    """The pipeline's snarkjs form on the zkey: a = A w, b = B w (ops.r1cs on the coefficient section) and the
    odd-coset P (ops.qap, generator 5) equal the host oracle exactly."""
    import numpy as np

    from cuzk_jax import encoding
    from cuzk_jax.groth16 import pipeline
    from cuzk_jax.snarkjs import device

    hb = prover.HostBackend()
    a, b = hb.qap_evals(zk, wit)
    rk = device.DeviceBackend().resident(zk)
    z = pipeline.stage(rk, encoding.ints_to_limbs(wit, "fr", montgomery=True)[:, None, :])
    da, db, dc, ok, first = pipeline.evaluate(rk, z)
    assert encoding.limbs_to_ints(np.asarray(da)[:, 0], "fr", montgomery=True) == a
    assert encoding.limbs_to_ints(np.asarray(db)[:, 0], "fr", montgomery=True) == b
    assert bool(ok[0]) and int(first[0]) == -1
    p = pipeline.h_scalars(rk, da, db, dc)
    assert encoding.limbs_to_ints(np.asarray(p)[:, 0], "fr") == hb.h_scalars(a, b, zk.power)


def test_device_prover_end_to_end(art, zk, wit, work, host_proof):
    """The full device path (QAP, H and MSMs on XLA): same proof as the host oracle, and snarkjs accepts it."""
    from cuzk_jax.snarkjs import device

    be = device.DeviceBackend()
    res = prover.prove(zk, wit, backend=be, insecure_test_seed=SEED)
    assert res.proof == host_proof[0].proof
    # the pipelined mode (witness MSMs queued ahead of QAP/H, one wait) computes the same proof
    assert prover.prove(zk, wit, backend=be, insecure_test_seed=SEED, sync_phases=False).proof == res.proof
    jsonio.write_proof(work / "device-proof.json", res.proof)
    jsonio.write_public(work / "device-public.json", res.public)
    bad = jsonio.Proof(res.proof.c, res.proof.b, res.proof.a)
    jsonio.write_proof(work / "device-bad.json", bad)
    assert toolchain.snarkjs_verify_many([(art.vk, work / "device-public.json", work / "device-proof.json"),
                                          (art.vk, work / "device-public.json", work / "device-bad.json")]) == \
        [True, False]


# ------------------------------------------------------------------------------------------------------------
# INSECURE development set-up (benchmarks at sizes where a ceremony is impractical)
# ------------------------------------------------------------------------------------------------------------


def test_dev_setup_zkey_works_with_snarkjs(art, zk, wit, work):
    from cuzk_jax.snarkjs import dev_setup

    data = dev_setup.insecure_zkey(r1cs.read_r1cs(art.r1cs), seed=7)
    dev = zkey.read_zkey(data)
    # what depends on the r1cs alone is identical to snarkjs's own setup: counts, the coefficient section (byte
    # for byte) and which query points are zero
    real_f, dev_f = binfile.parse(art.zkey, "zkey", 1), binfile.parse(data, "zkey", 1)
    assert bytes(real_f.section(4)) == bytes(dev_f.section(4))
    assert (dev.n_vars, dev.n_public, dev.domain_size) == (zk.n_vars, zk.n_public, zk.domain_size)
    for name in ("a", "b1", "b2", "c"):
        assert (getattr(dev, name).inf == getattr(zk, name).inf).all(), name
    (work / "dev.zkey").write_bytes(data)
    toolchain.snarkjs("zkey", "export", "verificationkey", work / "dev.zkey", work / "dev-vk.json")
    assert jsonio.vk_to_json(verifier.verification_key_from_zkey(dev)) == json.loads((work / "dev-vk.json").read_text())
    toolchain.snarkjs_prove(work / "dev.zkey", art.wtns, work / "dev-sj-proof.json", work / "dev-sj-public.json")
    res = prover.prove(dev, wit, insecure_test_seed=SEED)
    jsonio.write_proof(work / "dev-proof.json", res.proof)
    jsonio.write_public(work / "dev-public.json", res.public)
    # snarkjs proves with it and verifies; it verifies ours; a proof for the ceremony key does not verify here
    vk = work / "dev-vk.json"
    assert toolchain.snarkjs_verify_many([(vk, work / "dev-sj-public.json", work / "dev-sj-proof.json"),
                                          (vk, work / "dev-public.json", work / "dev-proof.json"),
                                          (art.vk, work / "dev-public.json", work / "dev-proof.json")]) == \
        [True, True, False]
    assert verifier.verify(vk, work / "dev-sj-public.json", work / "dev-sj-proof.json")

    # the benchmark's GPU hand-off: an exported r1cs + witness + vk regenerates the byte-identical key
    from cuzk_jax.bench import snarkjs as bench

    exp = work / "export" / "chain-dev"
    exp.mkdir(parents=True)
    for src, name in ((art.r1cs, "circuit.r1cs"), (art.wtns, "witness.wtns"), (vk, "verification_key.json")):
        (exp / name).write_bytes(Path(src).read_bytes())
    (exp / "meta.json").write_text(json.dumps({"setup": "insecure", "power": 9}))  # as export(with_zkey=False)
    dev_setup.write_insecure_zkey(art.r1cs, work / "seed0.zkey", seed=0)
    with pytest.raises(ValueError, match="does not match the exported verification key"):
        bench.load_artifacts(exp, log=None)  # vk is for seed 7
    (exp / "verification_key.json").write_text(json.dumps(jsonio.vk_to_json(
        verifier.verification_key_from_zkey(zkey.read_zkey(work / "seed0.zkey")))))
    zkey_p, _, _, _ = bench.load_artifacts(exp, log=None)
    assert zkey_p.read_bytes() == (work / "seed0.zkey").read_bytes()


# ------------------------------------------------------------------------------------------------------------
# issue 21: hostile sizes, points outside the subgroup, verification keys, strict public signals
# ------------------------------------------------------------------------------------------------------------


def test_r1cs_hostile_constraint_count_is_one_format_error():
    """nConstraints = 2^32 - 1 in a 200-byte file: one FormatError before any allocation (was a 96 GiB
    MemoryError: the reader sized its arrays from the header)."""
    hdr = struct.pack("<I", 32) + C.R.to_bytes(32, "little") + struct.pack("<IIIIQI", 4, 1, 1, 1, 4, 0xFFFFFFFF)
    with pytest.raises(FormatError, match="declares 4294967295 constraints"):
        r1cs.read_r1cs(binfile.build("r1cs", 1, [(1, hdr), (2, b"\0" * 100)]))
    # a term count past the end of the section is caught at that linear combination
    body = struct.pack("<I", 0xFFFFFFF0) + b"\0" * 20
    hdr = struct.pack("<I", 32) + C.R.to_bytes(32, "little") + struct.pack("<IIIIQI", 4, 1, 1, 1, 4, 1)
    with pytest.raises(FormatError, match="truncated in constraint 0"):
        r1cs.read_r1cs(binfile.build("r1cs", 1, [(1, hdr), (2, body)]))


def test_zkey_point_outside_subgroup_refused(art):
    """An A point on the curve but outside the prime-order subgroup (the file otherwise intact): refused by the
    batched device check, naming the section and index (the per-point host check tested only the curve)."""
    import random

    from cuzk_jax.reference.curve import g1 as ref_g1

    data = art.zkey.read_bytes()
    p = ref_g1.random_curve_point(random.Random(5))
    assert not ref_g1.in_subgroup(p)
    bad = _patch_section(data, 5, 3 * 96, points.g1_to_zkey_bytes(p))
    with pytest.raises(FormatError, match="A points: point 3 is not in the prime-order G1 subgroup"):
        zkey.read_zkey(bad)
    assert zkey.read_zkey(bad, check_points=False).n_vars > 0  # the opt-out still reads it
    # the same in a header point (always checked: it is part of the verification key)
    f = binfile.parse(data, "zkey", 1)
    alpha_off = 8 + 48 + 32 + 12
    bad = _patch_section(data, 2, alpha_off, points.g1_to_zkey_bytes(p))
    with pytest.raises(FormatError, match="alpha1 is not in the prime-order subgroup"):
        zkey.read_zkey(bad)
    bad = _patch_section(data, 2, alpha_off, bytes(96))
    with pytest.raises(FormatError, match="alpha1 is the point at infinity"):
        zkey.read_zkey(bad)
    assert f.sections[2][1] > alpha_off


def test_verification_key_checks(zk, host_proof):
    """vk_alphabeta_12 must be e(alpha, beta); identity / non-subgroup points are refused (all accepted before)."""
    import dataclasses
    import random

    from cuzk_jax.reference.curve import g1 as ref_g1

    vk = verifier.verification_key_from_zkey(zk)
    res = host_proof[0]
    assert verifier.verify(vk, res.public, res.proof)
    ab = list(vk.alphabeta)
    ab[3] = (ab[3] + 1) % C.P
    bad = jsonio.read_vk(jsonio.vk_to_json(dataclasses.replace(vk, alphabeta=tuple(ab))))
    with pytest.raises(FormatError, match="vk_alphabeta_12 is not e"):
        verifier.verify(bad, res.public, res.proof)
    other = verifier.verification_key_from_zkey(dataclasses.replace(zk, alpha1=zk.beta1))
    with pytest.raises(FormatError, match="vk_alphabeta_12"):  # alphabeta of another alpha
        verifier.verify(dataclasses.replace(vk, alphabeta=other.alphabeta), res.public, res.proof)
    for field, value, match in (("alpha1", None, r"vk_alpha_1 is the point at infinity"),
                                ("gamma2", None, r"vk_gamma_2 is the point at infinity"),
                                ("ic", [vk.ic[0], None] + vk.ic[2:], r"IC\[1\] is the point at infinity"),
                                ("ic", [ref_g1.random_curve_point(random.Random(6))] + vk.ic[1:],
                                 r"IC\[0\] is not in the prime-order subgroup")):
        bad = dataclasses.replace(vk, alphabeta=None, **{field: value})
        with pytest.raises(FormatError, match=match):
            verifier.verify(jsonio.read_vk(jsonio.vk_to_json(bad)), res.public, res.proof)


@pytest.mark.parametrize("value,match", [
    (35.9, "decimal string"), (True, "boolean"), ("3_5", "decimal string"), (" 35", "decimal string"),
    ("+35", "decimal string"), ("0x23", "decimal string"), (str(C.R), "out of range"), (None, "decimal string"),
])
def test_public_json_strict(value, match):
    """public.json: decimal strings / JSON integers of elements in [0, r) only (35.9 -> 35, true -> 1, "3_5" -> 35
    and values >= r were accepted); one FormatError naming the index."""
    assert jsonio.read_public(json.dumps(["1", 35, "0"])) == [1, 35, 0]
    with pytest.raises(FormatError, match=rf"\[1\]: .*{match}"):
        jsonio.read_public(json.dumps(["1", value]))


def test_json_nested_too_deeply_is_a_format_error():
    deep = "[" * 100_000 + "]" * 100_000
    for read in (jsonio.read_public, jsonio.read_proof, jsonio.read_vk):
        with pytest.raises(FormatError, match="nested too deeply"):
            read(deep)
