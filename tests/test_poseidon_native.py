"""The fast native Poseidon paths against the reference :func:`cuzk_jax.circuits.poseidon.permute` (itself checked
against the reference implementation's published vectors in ``test_gadgets_hash.py``), and the witness sampling
that uses them against digests of its output taken before they existed."""

import hashlib
import random

import pytest

from cuzk_jax.circuits import get_circuit
from cuzk_jax.circuits import poseidon as P
from cuzk_jax.circuits.gadgets import merkle as M
from cuzk_jax.reference.constants import R

# t = 3: comm_r and arity-2 trees; 9: arity-8 trees; 12: sector32g's column hash (11 layers)
WIDTHS = (2, 3, 5, 9, 12)


def _states(t, rng, n=12):
    edge = [[0] * t, [R - 1] * t, list(range(t)), [R - 1 - i for i in range(t)],
            [0] + [R - 1] * (t - 1), [R - 1] + [0] * (t - 1)]
    return edge + [[rng.randrange(R) for _ in range(t)] for _ in range(n)]


@pytest.mark.parametrize("t", WIDTHS)
def test_permute_fast_equals_reference(t):
    prm = P.params(t)
    rng = random.Random(t)
    for st in _states(t, rng):
        assert P.permute_fast(st, prm) == P.permute(st, prm)
    # non-canonical inputs are reduced first, as the reference does
    assert P.permute_fast([R + 1] + [2 * R] * (t - 1)) == P.permute([1] + [0] * (t - 1))
    with pytest.raises(ValueError, match="lanes"):
        P.permute_fast([0] * (t + 1), prm)


@pytest.mark.parametrize("r_f,r_p", [(4, 5), (4, 0), (2, 1)])
def test_permute_fast_other_round_numbers(r_f, r_p):
    """Tables follow the parameters object (round numbers other than the width's: an R_P that is not a multiple
    of t, no partial round, one), not just the width."""
    prm = P.params(3, r_f, r_p)
    assert P.fast_tables(prm) is P.fast_tables(prm) and P.fast_tables(prm) is not P.fast_tables(P.params(3))
    for st in _states(3, random.Random(7), 4):
        assert P.permute_fast(st, prm) == P.permute(st, prm)


@pytest.mark.parametrize("t", WIDTHS)
def test_hash_and_hash_many_equal_reference(t):
    rng = random.Random(100 + t)
    rows = [st[1:] for st in _states(t, rng, 20)]
    ref = [P.permute([0] + r)[0] for r in rows]
    assert [P.hash(r) for r in rows] == ref
    for n in (0, 1, P.HASH_MANY_MIN - 1, P.HASH_MANY_MIN, len(rows)):  # both sides of the scalar threshold
        out = P.hash_many(rows[:n])
        assert out == ref[:n] and all(type(x) is int for x in out)


def test_hash_many_rejects_what_hash_rejects():
    good = [[1, 2]] * P.HASH_MANY_MIN
    with pytest.raises(ValueError, match="Fr elements"):
        P.hash_many(good + [[1, R]])
    with pytest.raises(ValueError, match="Fr elements"):
        P.hash_many(good + [[1, True]])
    with pytest.raises(ValueError, match="same number"):
        P.hash_many(good + [[1, 2, 3]])


@pytest.mark.parametrize("arity", [2, 8])
def test_sparse_tree_nodes_and_paths(arity):
    rng, levels = random.Random(arity), 12 // (arity.bit_length() - 1)  # 2^12 leaves
    leaves = {i: rng.randrange(R) for i in rng.sample(range(arity ** levels), 20)}
    tree = M.SparseMerkleTree("poseidon", arity, levels, leaves, random.Random(5))
    for lvl in range(levels):
        for p, v in tree.nodes[lvl + 1].items():
            if p * arity in tree.nodes[lvl]:  # a hashed node (the others are the random fill of the next level)
                assert v == P.permute([0] + [tree.nodes[lvl][j] for j in range(p * arity, (p + 1) * arity)])[0]
    for i, v in leaves.items():
        assert M.root_from_path_native("poseidon", arity, v, i, tree.path(i)) == tree.root


# sha256(repr(PorepLike.sample_inputs(partition, seed))), taken with the round-by-round permute and per-node hashing
PINNED = {
    ("tiny", 0, 0): "db6008d9fccbba1f4d8d604bc7e0d272c0dbb278b5df332361e07855da50bdc3",
    ("tiny", 2, 7): "015afa75a0dd70df6e7bb5541c67f007d2264d7792df7855f6d70f3064bea456",
    ("mini", 1, 5): "39bd02317439d931901bab47b283218dbe6837e21683ec5afb09b93b66d3398c",
    ("small", 0, 0): "9c85695219522e1eee671d559b068820e1e63115dd43605ac7e6b45ef8920f9f",
    ("small", 3, 11): "4979d6982f26d35839cda214c4b2ba52eab7e6d206106b80a3efa1048a9ecf55",
    ("domain20", 1, 3): "a76ea5d23bffddd98133228d772426c1def7fa6c36a82dc09e90673f20ef03a3",
}


@pytest.mark.parametrize("preset,partition,seed", sorted(PINNED))
def test_porep_like_sample_inputs_unchanged(preset, partition, seed):
    inputs = get_circuit("porep_like", preset).sample_inputs(partition, seed)
    assert hashlib.sha256(repr(inputs).encode()).hexdigest() == PINNED[(preset, partition, seed)]
