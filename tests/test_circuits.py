"""Circuits: satisfied by sampled witnesses, shared structure across partitions, negative twins naming the failing
constraint, parameter validation."""

import pytest

from cuzk_jax.circuits import Unsatisfied, get_circuit, list_circuits, presets
from cuzk_jax.circuits import poseidon as P
from cuzk_jax.circuits.porep_like import label_native, parents_of
from cuzk_jax.reference.constants import R


def _tampered(witness, column, delta=1):
    return witness.with_value(column, witness.z[column] + delta)


def test_registry():
    names = list_circuits()
    assert set(names) >= {"cube", "merkle_inclusion", "porep_like"}
    assert "large" in names["porep_like"] and "doc" in presets("porep_like")["large"]
    with pytest.raises(ValueError, match="unknown circuit"):
        get_circuit("nope")
    with pytest.raises(ValueError, match="unknown preset"):
        get_circuit("porep_like", "huge")
    with pytest.raises(ValueError, match="unknown parameter"):
        get_circuit("porep_like", "tiny", challenge=3)
    c = get_circuit("porep_like", "tiny", layers=2)
    assert c.params["layers"] == 2 and c.preset == "tiny"


def test_cube():
    c = get_circuit("cube")
    inputs = c.sample_inputs()
    assert inputs == {"x": 3, "y": 35}
    r1cs, w = c.full(inputs)
    assert (r1cs.num_constraints, r1cs.num_public, r1cs.num_aux) == (3, 1, 3)
    assert w.z == [1, 35, 3, 9, 27] and w.public_inputs == c.public_inputs(inputs) == [35]
    r1cs.check(w)
    with pytest.raises(Unsatisfied, match=r"#2 'x\^3 \+ x \+ 5 = y'"):
        r1cs.check(_tampered(w, 1))  # wrong public y
    with pytest.raises(Unsatisfied, match=r"#0 'x\^2'"):
        r1cs.check(_tampered(w, 2))  # wrong private x
    other = c.sample_inputs(partition=1, seed=0)
    assert other["y"] == (other["x"] ** 3 + other["x"] + 5) % R
    c.r1cs().check(c.witness(other))


@pytest.mark.parametrize("preset", ["poseidon2_d8", "poseidon8_d3"])
def test_merkle_inclusion(preset):
    c = get_circuit("merkle_inclusion", preset)
    r1cs = c.r1cs()
    for partition in range(2):
        inputs = c.sample_inputs(partition, seed=1)
        w = c.witness(inputs)
        assert w.public_inputs == c.public_inputs(inputs)
        r1cs.check(w)
    with pytest.raises(Unsatisfied, match="merkle/root"):
        r1cs.check(_tampered(w, 1))  # wrong root
    with pytest.raises(Unsatisfied, match="index/bits"):
        r1cs.check(_tampered(w, 2, 1 << 20))  # index out of the tree's range


@pytest.mark.parametrize("preset", ["tiny", "mini", "small"])
def test_porep_like_partitions_share_structure(preset):
    c = get_circuit("porep_like", preset)
    r1cs = c.r1cs()
    digests = set()
    for partition in range(2):
        inputs = c.sample_inputs(partition, seed=0)
        full, w = c.full(inputs)
        digests.add(full.digest())
        assert w.public_inputs == c.public_inputs(inputs)
        assert len(w.public_inputs) == 3 + c.params["challenges"] * (1 + c.params["parents"])
        r1cs.check(w)
    assert digests == {r1cs.digest()}
    a, b = c.sample_inputs(0, 0), c.sample_inputs(1, 0)
    assert a["challenges"] != b["challenges"] or a["replica_id"] != b["replica_id"]
    assert c.sample_inputs(0, 0) == a  # deterministic


def test_porep_like_negative_twins():
    c = get_circuit("porep_like", "mini")
    r1cs = c.r1cs()
    w = c.witness(c.sample_inputs(0, 0))
    cases = {
        3: r"comm_r/comm_r = H",  # public comm_r
        2: r"challenge_0/comm_d/level_\d+/.*|challenge_0/comm_d/root",  # public comm_d
        4: r"challenge_0/node_bits/bits/pack",  # public challenge index
        5: r"challenge_0/parent_0/node_bits/bits/pack",  # public parent index
    }
    for column, pattern in cases.items():
        with pytest.raises(Unsatisfied, match=pattern):
            r1cs.check(_tampered(w, column, 4))
    # a private parent label: its column hash no longer opens comm_c
    names = [r1cs.constraint_name(i) for i in range(r1cs.num_constraints)]
    assert any(n.startswith("challenge_0/label_1/") for n in names)
    for delta_col in (r1cs.num_inputs + 2, r1cs.num_aux // 2 + r1cs.num_inputs):
        with pytest.raises(Unsatisfied):
            r1cs.check(_tampered(w, delta_col))


def test_porep_like_sha256_shape():
    c = get_circuit("porep_like", "sha_min")
    inputs = c.sample_inputs(0, 3)
    r1cs, w = c.full(inputs)
    r1cs.check(w)
    assert r1cs.num_constraints == c.r1cs().num_constraints
    # the in-circuit label is the native SHA-256 label
    rid, node = inputs["replica_id"], inputs["challenges"][0]
    assert inputs["labels"][0][0] == label_native("sha256", rid, 1, node, [])
    with pytest.raises(Unsatisfied, match=r"#\d+ 'comm_r/poseidon/x2'"):
        r1cs.check(_tampered(w, r1cs.num_inputs + 1))  # comm_r_last enters the comm_r hash first
    with pytest.raises(Unsatisfied, match=r"challenge_0/comm_d/"):
        r1cs.check(_tampered(w, r1cs.num_inputs + r1cs.num_aux // 4))  # inside the comm_d SHA-256


def test_porep_like_native_helpers():
    pars = parents_of(5, 100, 4)
    assert len(pars) == 4 and all(0 <= x < 100 for x in pars) and pars == parents_of(5, 100, 4)
    assert label_native("poseidon", 1, 2, 3, [4]) == P.hash([1, (2 << 64) + 3, 4])


@pytest.mark.parametrize("override,match", [
    ({"tree_arity": 4}, "tree_arity"),
    ({"depth": 4, "tree_arity": 8}, "multiple"),
    ({"challenges": 0}, "challenges"),
    ({"challenges": 4, "depth": 2}, "distinct"),
    ({"data_hash": "md5"}, "data_hash"),
    ({"parents": -1}, "parents"),
])
def test_porep_like_validation(override, match):
    with pytest.raises(ValueError, match=match):
        get_circuit("porep_like", "tiny", **override)


def test_synth_bench_runs_end_to_end():
    from cuzk_jax.circuits import bench

    res = bench.run("cube", "default", partitions=2, reps=1, warmup=0, device_eval=True, reference_check_max=10,
                    log=lambda *a: None)
    assert res["constraints"] == 3 and res["partitions"] == 2 and len(res["witness_s"]) == 2
    assert res["all_satisfied"] is True and res["evaluate_s"] > 0 and "reference_check_s" in res
    with pytest.raises(ValueError, match="partitions"):
        bench.run("cube", "default", partitions=0)
