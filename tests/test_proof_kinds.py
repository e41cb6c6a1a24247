"""Filecoin's other proof kinds (issue 24): WinningPoSt, WindowPoSt, SnapDeals (EmptySectorUpdate).

Native (numpy batch) and in-circuit computations agree; every kind proves and verifies at its tiny preset (two
partitions of one sector) with negative twins: wrong leaf, wrong path, wrong comm_r, wrong rho, wrong h_select
and an out-of-range challenge are Unsatisfied naming the constraint; a wrong public input fails the pairing check
and an unsatisfied witness is refused by the prover.
"""

import copy
import dataclasses

import numpy as np
import pytest

from cuzk_jax import priorities
from cuzk_jax.circuits import ConstraintSystem, Unsatisfied, base
from cuzk_jax.circuits import native_batch as nb
from cuzk_jax.circuits import poseidon as native_poseidon
from cuzk_jax.circuits.fallback_post import leaf_challenge
from cuzk_jax.circuits.gadgets import merkle
from cuzk_jax.circuits.gadgets.num import alloc_num
from cuzk_jax.circuits.gadgets.poseidon import poseidon_hash
from cuzk_jax.circuits.snap_update import phi_native, rho_native, update_challenges
from cuzk_jax.errors import BadInput
from cuzk_jax.reference.constants import R

KINDS = ("winning_post", "window_post", "snap_update")
P = 2  # partitions per proved batch


@pytest.fixture(scope="module")
def instances():
    """Per kind: the tiny circuit, its R1CS and partition 0's inputs (seed 5)."""
    out = {}
    for name in KINDS:
        c = base.get_circuit(name, "tiny")
        out[name] = (c, c.r1cs(), c.sample_inputs(0, seed=5))
    return out


def _check(circuit, r1cs, inputs):
    r1cs.check(circuit.witness(inputs))


def test_priority_classes():
    want = {"winning_post": "winning_post", "window_post": "window_post", "snap_update": "snap_deals"}
    for name, cls in want.items():
        c = base.get_circuit(name)
        assert type(c).PRIORITY_CLASS == cls and priorities.class_of(c) == cls
    assert priorities.rank("winning_post") < priorities.rank("window_post") < priorities.rank("porep") \
        < priorities.rank("snap_deals")


def test_presets_carry_filecoin_parameters():
    p = base.presets("winning_post")["full"]
    assert (p["sectors"], p["challenges"], p["levels"]) == (1, 66, 10)
    p = base.presets("window_post")["full"]
    assert (p["sectors"], p["challenges"], p["levels"]) == (2349, 10, 10)
    p = base.presets("snap_update")["full"]
    assert (p["partitions"], p["challenges"], p["levels"], p["data_hash"]) == (16, 86, 10, "sha256")
    assert tuple(p["hs"]) == (7, 8, 9, 10, 11, 12)
    assert base.get_circuit("winning_post").PARTITIONS == 1


def test_batched_native_equals_scalar_native():
    gen = np.random.default_rng(1)
    x = nb.rand_fr(gen, (3, 8))
    assert all(0 <= int(v) < R for v in x.reshape(-1))
    for a in (2, 8):
        h = nb.poseidon_many([x[:, j] for j in range(a)])
        assert [int(v) for v in h] == [native_poseidon.hash([int(v) for v in row[:a]]) for row in x]
    tree, index, inverse = nb.unique_leaves(np.array([[3, 3, 60], [1, 2, 63]]))
    assert list(zip(tree, index)) == [(0, 3), (0, 60), (1, 1), (1, 2), (1, 63)] and inverse[0, 1] == 0
    for hash_name, arity, levels, bound in (("poseidon", 8, 2, R), ("sha256", 2, 6, 1 << 254)):
        vals = nb.rand_fr(gen, len(tree), bound)
        forest = nb.SparseForest(hash_name, arity, levels, 2, tree, index, vals, gen)
        paths = forest.paths(tree, index)
        for k in range(len(tree)):
            assert merkle.root_from_path_native(hash_name, arity, int(vals[k]), int(index[k]),
                                                paths[k].tolist()) == forest.roots[tree[k]]
    with pytest.raises(ValueError, match="duplicate"):
        nb.SparseForest("poseidon", 8, 2, 1, [0, 0], [1, 1], [5, 6], gen)


def test_in_circuit_hashes_equal_native(instances):
    """comm_r, phi and rho computed by the gadgets equal the native (batched) values the sampler produced."""
    c, _, inp = instances["snap_update"]
    cs = ConstraintSystem("full")
    num = [alloc_num(cs, inp[k], k) for k in ("comm_c", "comm_r_last_new", "comm_d_new", "comm_r_old")]
    assert poseidon_hash(cs, num[:2]).value == inp["comm_r_new"]
    phi = poseidon_hash(cs, num[2:])
    assert phi.value == phi_native(inp["comm_d_new"], inp["comm_r_old"])
    high = int(inp["challenges"][0]) >> (c.node_bits - inp["h"])
    rho = rho_native(phi.value, high)
    assert poseidon_hash(cs, [phi, alloc_num(cs, high, "high")]).value == rho
    assert (int(inp["old"][0]) + int(inp["data"][0]) * rho) % R == int(inp["new"][0])
    cs.check()
    w, _, wi = instances["window_post"]
    assert (nb.poseidon_many([wi["comm_c"], wi["comm_r_last"]]) == wi["comm_r"]).all()


def test_challenge_derivation(instances):
    c, _, inp = instances["window_post"]
    assert c.check_challenges(inp)
    s0 = inp["sector_ids"][0]
    assert int(inp["challenges"][0][1]) == leaf_challenge(inp["randomness"], s0, 1, c.nodes)
    bad = copy.deepcopy(inp)
    bad["randomness"] = (bad["randomness"] + 1) % R
    assert not c.check_challenges(bad)
    s, _, si = instances["snap_update"]
    assert s.check_challenges(si)
    p = s.params
    for k in (0, 3, 15):  # each challenge lies in its partition's chunk (challenges.rs' bucketing)
        cs = update_challenges(si["challenge_seed"], k, p["partitions"], p["challenges"], s.node_bits)
        assert all(x >> (s.node_bits - 4) == k for x in cs)
    with pytest.raises(BadInput, match="partition 16 out of range"):
        s.sample_inputs(16)


@pytest.mark.parametrize("name", KINDS)
def test_partitions_satisfy_one_shape(instances, name):
    c, r1cs, inp = instances[name]
    _check(c, r1cs, inp)
    _check(c, r1cs, c.sample_inputs(1, seed=5))
    assert len(c.public_inputs(inp)) == r1cs.num_public


@pytest.mark.parametrize("name,last", [("window_post", "sector_1/"), ("snap_update", "challenge_1/")])
def test_structure_is_tiled_from_one_block(instances, name, last):
    """The R1CS tiled from one sector (challenge) block equals the builder's: digest, constraint and input names."""
    c, tiled, _ = instances[name]
    cs = ConstraintSystem("structure")
    c.synthesize(cs, None)
    built = cs.to_r1cs()
    assert tiled.digest() == built.digest() and tiled.input_names == built.input_names
    for i in range(0, built.num_constraints, 101):
        assert tiled.constraint_name(i) == built.constraint_name(i)
    assert tiled.constraint_name(built.num_constraints - 1).startswith(last)


def _tampered(inp, key, *idx, delta=1):
    bad = copy.deepcopy(inp)
    v = bad[key]
    for i in idx[:-1]:
        v = v[i]
    if idx:
        v[idx[-1]] = (int(v[idx[-1]]) + delta) % R
    else:
        bad[key] = (int(v) + delta) % R
    return bad


POST_TWINS = [  # (what, key and index, the failing constraint's name)
    ("wrong leaf", ("leaves", 0, 1), r"'sector_0/challenge_1/comm_r_last/root'"),
    ("wrong path", ("paths", 1, 0, 1, 3), r"'sector_1/challenge_0/comm_r_last/root'"),
    ("wrong comm_r", ("comm_r", 1), r"'sector_1/comm_r/comm_r = H\(comm_c, comm_r_last\)'"),
    ("wrong comm_c", ("comm_c", 0), r"'sector_0/comm_r/comm_r = H\(comm_c, comm_r_last\)'"),
    ("wrong challenge", ("challenges", 0, 0), r"'sector_0/challenge_0/comm_r_last/"),
]


@pytest.mark.parametrize("what,where,match", POST_TWINS, ids=[t[0] for t in POST_TWINS])
def test_window_post_negative_twins(instances, what, where, match):
    c, r1cs, inp = instances["window_post"]
    with pytest.raises(Unsatisfied, match=match):
        _check(c, r1cs, _tampered(inp, *where))


def test_winning_post_negative_twins(instances):
    c, r1cs, inp = instances["winning_post"]
    with pytest.raises(Unsatisfied, match=r"'sector_0/challenge_0/comm_r_last/root'"):
        _check(c, r1cs, _tampered(inp, "leaves", 0, 0))
    with pytest.raises(Unsatisfied, match=r"'sector_0/comm_r/comm_r = H"):
        _check(c, r1cs, _tampered(inp, "comm_r", 0))
    out_of_range = _tampered(inp, "challenges", 0, 1, delta=c.nodes - int(inp["challenges"][0][1]))
    with pytest.raises(Unsatisfied, match=r"'sector_0/challenge_1/index_bits/bits/pack'"):  # index = nodes
        r1cs.check(_witness_unchecked(c, out_of_range))


def _witness_unchecked(circuit, inputs):
    """The witness of inputs the native gadgets refuse (an index past the tree): synthesize its bits from the
    value reduced into range, then put the real public value back."""
    c2 = copy.deepcopy(inputs)
    c2["challenges"][0][1] = int(inputs["challenges"][0][1]) % circuit.nodes
    w = circuit.witness(c2)
    k = 1 + 2  # z index of sector 0's second challenge: [ONE, comm_r, challenge_0, challenge_1, ...]
    w.inputs[k] = int(inputs["challenges"][0][1])
    return w


SNAP_TWINS = [  # (what, key and index, the failing constraint's name)
    ("wrong new leaf", ("new", 1), r"'challenge_1/encode'"),
    ("wrong data path", ("data_paths", 1, 2, 0), r"'challenge_1/comm_d_new/root'"),
    ("wrong new path", ("new_paths", 0, 1, 4), r"'challenge_0/comm_r_last_new/root'"),
    ("wrong comm_r_new", ("comm_r_new",), r"'comm_r_new/comm_r_new = H\(comm_c, root_new\)'"),
    ("wrong comm_r_old", ("comm_r_old",), r"'comm_r_old/comm_r_old = H\(comm_c, root_old\)'"),
]


@pytest.mark.parametrize("what,where,match", SNAP_TWINS, ids=[t[0] for t in SNAP_TWINS])
def test_snap_negative_twins(instances, what, where, match):
    c, r1cs, inp = instances["snap_update"]
    with pytest.raises(Unsatisfied, match=match):
        _check(c, r1cs, _tampered(inp, *where))


def test_snap_wrong_rho_and_h_select(instances):
    c, r1cs, inp = instances["snap_update"]
    # old and new leaf both off by one: the encoding still holds, the old replica tree refuses the leaf
    bad = _tampered(_tampered(inp, "old", 0), "new", 0)
    with pytest.raises(Unsatisfied, match=r"'challenge_0/comm_r_last_old/root'"):
        _check(c, r1cs, bad)
    # every tree and commitment consistent, but R_new encoded with rho(phi, high + 1): only 'encode' fails
    bad = c.sample_inputs(0, seed=5, tamper_rho=True)
    assert bad["comm_r_new"] != inp["comm_r_new"]
    with pytest.raises(Unsatisfied, match=r"'challenge_0/encode'"):
        _check(c, r1cs, bad)
    two_hot = dict(inp, h_select=inp["h_select"] | (1 if inp["h_select"] != 1 else 2))
    with pytest.raises(Unsatisfied, match=r"'h_select/one-hot'"):
        _check(c, r1cs, two_hot)


# -- end to end: setup, prove (two partitions in one batch), verify ------------------------------------------------


@pytest.fixture(scope="module")
def keys(instances):
    from cuzk_jax.groth16 import generator

    return {name: generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(24 + i))
            for i, (name, (_, r1cs, _)) in enumerate(instances.items())}


@pytest.mark.slow
@pytest.mark.parametrize("name", KINDS)
def test_prove_and_verify(instances, keys, name):
    from cuzk_jax.circuits import block_witness
    from cuzk_jax.groth16 import pipeline, prover, sector, verifier
    from cuzk_jax.ops import r1cs as ops_r1cs

    c, r1cs, _ = instances[name]
    pk = keys[name]
    res = sector.prove_sector(c, pk, P, sector=5, verify=True, config="msm=host")
    assert res.verified is True
    assert len(res.proof_bytes()) == 192 * P
    bad = [list(x) for x in res.public_inputs]
    bad[1][0] = (bad[1][0] + 1) % R  # comm_r (PoSt) / k (snap) of partition 1
    assert verifier.verify_each(pk.vk, bad, res.proofs) == [True, False]
    # an unsatisfied witness (wrong leaf / wrong rho) is refused before any proof is made
    if name == "snap_update":
        w_bad = c.witness(c.sample_inputs(1, seed=5, tamper_rho=True))
        where = "challenge_0/encode"
    else:
        w_bad = c.witness(_tampered(c.sample_inputs(1, seed=5), "leaves", 0, 0))
        where = "sector_0/challenge_0/comm_r_last/root"
    w_ok = c.witness(c.sample_inputs(0, seed=5))
    with pytest.raises(Unsatisfied, match=f"partition 1: .*'{where}'"):
        prover.prove(pk, r1cs, [w_ok, w_bad], config="msm=host")
    # the kinds bench's path: a ready batch of canonical limbs from the block witness (and its bad twin)
    z, publics = block_witness.witness_batch(c, P, 5, num_vars=r1cs.num_vars)
    assert publics == res.public_inputs
    proofs, _ = prover.prove(pk, r1cs, z, config="msm=host", montgomery=False)
    assert verifier.verify_batch(pk.vk, publics, proofs)
    rs = prover.insecure_randomness_for_tests(7, P)
    # the tiled evaluation (one block's rows per block, columns moved; layout=tiled, what auto picks at full size)
    # against the flat one (the same R1CS without its tiling): the same proofs, the same failing constraint
    # (WinningPoSt is one sector: one block, nothing to tile)
    # (its own resident key: prove's cache is keyed by the key and config, not by the layout)
    variants = (r1cs, dataclasses.replace(r1cs, tiling=None)) if r1cs.tiling is not None else (r1cs,)
    keys = [pipeline.make_resident(pk, v, "msm=host,layout=tiled" if v.tiling is not None else "msm=host")
            for v in variants]
    assert [isinstance(k.r1cs, ops_r1cs.TiledR1CS) for k in keys] == [r1cs.tiling is not None, False][:len(keys)]
    got = [prover.prove(k, v, z, montgomery=False, randomness=rs)[0] for k, v in zip(keys, variants)]
    assert all(g == got[0] for g in got)
    z[:, 1] = w_bad.z_limbs(montgomery=False)
    for k, v in zip(keys, variants):
        with pytest.raises(Unsatisfied, match=f"partition 1: .*'{where}'"):
            prover.prove(k, v, z, montgomery=False)


@pytest.mark.parametrize("name,override,match", [
    ("window_post", {"sectors": 0}, "sectors must be a positive int"),
    ("winning_post", {"levels": 21}, "levels must be <= 20"),
    ("snap_update", {"partitions": 3}, "power of two"),
    ("snap_update", {"hs": (1, 2, 3)}, "hs must be 6 ints"),
    ("snap_update", {"levels": 1}, "more partitions than nodes"),
])
def test_bad_parameters_are_bad_input(name, override, match):
    with pytest.raises(BadInput, match=match):
        base.get_circuit(name, "tiny", **override)


def test_bench_kinds_items():
    import types

    from cuzk_jax.bench import kinds

    cfg = types.SimpleNamespace(impl=["winning_post:full", "window_post:d20:1", "snap_update", "latency:domain20:full"])
    assert kinds._parse(cfg) == [("kind", "winning_post", "full", None), ("kind", "window_post", "d20", 1),
                                 ("kind", "snap_update", None, None), ("latency", "domain20", "full")]
    assert [x[1] for x in kinds._parse(types.SimpleNamespace(impl=[]))] == list(kinds.KINDS) + [None]
    with pytest.raises(ValueError, match="expected one of"):
        kinds._parse(types.SimpleNamespace(impl=["porep"]))
