"""SHA-256, Poseidon and Merkle gadgets against oracles we did not write (hashlib; the Poseidon reference
implementation's published test vectors) and against the plain-Python versions, with negative twins.

SHA-256 systems are ~26k constraints per compression: the tests use one compression each, except one 2-compression
Merkle level.
"""

import hashlib
import os
import random

import pytest

from cuzk_jax.circuits import ConstraintSystem, Unsatisfied
from cuzk_jax.circuits import poseidon as P
from cuzk_jax.circuits import sha256_native
from cuzk_jax.circuits.gadgets import boolean as B
from cuzk_jax.circuits.gadgets import merkle as M
from cuzk_jax.circuits.gadgets import num as N
from cuzk_jax.circuits.gadgets import poseidon as PG
from cuzk_jax.circuits.gadgets import sha256 as S
from cuzk_jax.circuits.gadgets.uint32 import UInt32
from cuzk_jax.reference.constants import R

# ---------------------------------------------------------------------------------------------------------------
# SHA-256
# ---------------------------------------------------------------------------------------------------------------


def test_native_sha256_matches_hashlib():
    rng = random.Random(1)
    for n in list(range(0, 130)) + [1000]:
        msg = bytes(rng.getrandbits(8) for _ in range(n))
        assert sha256_native.sha256(msg) == hashlib.sha256(msg).digest(), n
    assert sha256_native.num_blocks(55) == 1 and sha256_native.num_blocks(56) == 2


def test_sha256_compress_gadget():
    rng = random.Random(2)
    state_v = [rng.getrandbits(32) for _ in range(8)]
    block = bytes(rng.getrandbits(8) for _ in range(64))
    cs = ConstraintSystem("full")
    state = [UInt32.alloc(cs, v) for v in state_v]
    bits = B.alloc_bits(cs, S.bytes_to_bits(block), 512)
    n0 = cs.num_constraints
    with cs.namespace("compress"):
        out = S.sha256_compress(cs, state, bits)
    assert [w.value for w in out] == list(sha256_native.compress(state_v, block))
    assert [B.pack_value(w.bits) for w in out] == [w.value for w in out]
    assert cs.num_constraints - n0 == 26416  # the documented cost of one variable compression
    cs.check()
    # negative twin: change one intermediate value in the middle of the rounds
    r1cs, w = cs.to_r1cs(), cs.witness()
    col = r1cs.num_inputs + cs.num_aux - 9000
    with pytest.raises(Unsatisfied, match=r"compress/(round_\d+|final)/"):
        r1cs.check(w.with_value(col, 1 - w.z[col]))


@pytest.mark.parametrize("n", [0, 3, 32, 55])
def test_sha256_gadget_matches_hashlib(n):
    msg = os.urandom(n)
    cs = ConstraintSystem("witness")
    bits = B.alloc_bits(cs, S.bytes_to_bits(msg), 8 * n)
    digest = S.sha256(cs, bits)
    assert S.bits_to_bytes(digest) == hashlib.sha256(msg).digest()
    s = ConstraintSystem("structure")
    S.sha256(s, B.alloc_bits(s, None, 8 * n))
    assert s.num_constraints == cs.num_constraints


def test_sha256_constant_message_costs_nothing():
    cs = ConstraintSystem("full")
    digest = S.sha256(cs, S.constant_bits(b"abc"))
    assert S.bits_to_bytes(digest) == hashlib.sha256(b"abc").digest()
    assert cs.num_constraints == 0
    with pytest.raises(ValueError, match="whole number of bytes"):
        S.sha256(cs, [B.TRUE] * 7)


def test_trunc254_and_bit_orders():
    d = hashlib.sha256(b"x").digest()
    bits = S.constant_bits(d)
    assert S.bits_to_bytes(S.trunc254(bits)) == sha256_native.trunc254(d)
    v = int.from_bytes(sha256_native.trunc254(d), "little")
    le = S.sha_bits_to_le(S.trunc254(bits))
    assert B.pack_value(le) == v and v < 1 << 254
    x = random.Random(3).getrandbits(254)
    assert S.bits_to_bytes(S.fr_bits_order([B.constant((x >> i) & 1) for i in range(256)])) == x.to_bytes(32, "little")


# ---------------------------------------------------------------------------------------------------------------
# Poseidon
# ---------------------------------------------------------------------------------------------------------------

# The reference implementation's test vectors for BLS12-381 Fr (hadeshash test_vectors.txt:
# poseidonperm_x5_255_3 and poseidonperm_x5_255_5), permuting [0, 1, ..., t-1].
VECTORS = {
    3: [0x28CE19420FC246A05553AD1E8C98F5C9D67166BE2C18E9E4CB4B4E317DD2A78A,
        0x51F3E312C95343A896CFD8945EA82BA956C1118CE9B9859B6EA56637B4B1DDC4,
        0x3B2B69139B235626A0BFB56C9527AE66A7BF486AD8C11C14D1DA0C69BBE0F79A],
    5: [0x2A918B9C9F9BD7BB509331C81E297B5707F6FC7393DCEE1B13901A0B22202E18,
        0x65EBF8671739EEB11FB217F2D5C5BF4A0C3F210E3F3CD3B08B5DB75675D797F7,
        0x2CC176FC26BC70737A696A9DFD1B636CE360EE76926D182390CDB7459CF585CE,
        0x4DC4E29D283AFD2A491FE6AEF122B9A968E74EFF05341F3CC23FDA1781DCB566,
        0x03FF622DA276830B9451B88B85E6184FD6AE15C8AB3EE25A5667BE8592CCE3B1],
}


@pytest.mark.parametrize("t", sorted(VECTORS))
def test_poseidon_published_vectors(t):
    prm = P.params(t)
    assert (prm.r_f, prm.r_p) == {3: (8, 57), 5: (8, 60)}[t]
    assert P.permute(list(range(t)), prm) == VECTORS[t]


def test_poseidon_round_numbers_and_width9():
    assert P.round_numbers(3) == (8, 57) and P.round_numbers(5) == (8, 60) and P.round_numbers(9) == (8, 63)
    prm = P.params(9)
    assert len(prm.round_constants) == 71 and all(len(rc) == 9 for rc in prm.round_constants)
    assert all(0 <= c < R for rc in prm.round_constants for c in rc)
    assert P.mds_is_secure([list(r) for r in prm.mds])
    with pytest.raises(ValueError, match="width"):
        P.params(1)
    with pytest.raises(ValueError, match="Fr elements"):
        P.hash([R])


def test_mds_security_checks_reject_weak_matrices():
    t = 3
    ident = [[int(i == j) for j in range(t)] for i in range(t)]
    assert not P.mds_is_secure(ident)  # M^1 is a scalar matrix
    diag = [[(i + 2) * (i == j) for j in range(t)] for i in range(t)]
    assert not P.mds_is_secure(diag)  # e_0 spans an invariant subspace (algorithm 2)
    # block structure: lanes {1, 2} never feed lane 0 -> invariant subspace trail
    block = [[2, 0, 0], [1, 3, 1], [1, 1, 4]]
    assert not P.mds_is_secure(block)
    assert P.mds_is_secure([list(r) for r in P.params(3).mds])


def test_grain_is_deterministic():
    a, b = P.Grain(3, 8, 57), P.Grain(3, 8, 57)
    assert [a.bits(255) for _ in range(3)] == [b.bits(255) for _ in range(3)]
    assert P.Grain(3, 8, 57).bits(64) != P.Grain(5, 8, 60).bits(64)


@pytest.mark.parametrize("arity", [1, 2, 4, 8])
def test_poseidon_gadget_matches_native(arity):
    rng = random.Random(arity)
    for vals in ([rng.randrange(R) for _ in range(arity)], [R - 1] * arity, [0] * arity):
        cs = ConstraintSystem("full")
        xs = [N.alloc_num(cs, v) for v in vals]
        with cs.namespace("h"):
            lanes = PG.permutation_lanes(cs, xs)
        assert [x.value for x in lanes] == P.permute([0] + vals)
        assert lanes[0].value == P.hash(vals)
        # 3 constraints per S-box: t per full round (8), 1 per partial round, minus the folded capacity S-box
        r_p = P.params(arity + 1).r_p
        assert cs.num_constraints == PG.constraints_per_hash(arity) == 3 * (8 * (arity + 1) + r_p - 1)
        cs.check()
    assert PG.constraints_per_hash(2) == 240 and PG.constraints_per_hash(8) == 402
    # negative twin: an S-box output changed
    r1cs, w = cs.to_r1cs(), cs.witness()
    col = r1cs.num_inputs + arity + 5
    with pytest.raises(Unsatisfied, match=r"h/poseidon/x\d"):
        r1cs.check(w.with_value(col, w.z[col] + 1))


def test_poseidon_gadget_takes_linear_combinations():
    cs = ConstraintSystem("full")
    a, b = N.alloc_num(cs, 5), N.alloc_num(cs, 7)
    out = PG.poseidon_hash(cs, [a + b * 3, N.Num.constant(9)])
    assert out.value == P.hash([26, 9])
    cs.check()


# ---------------------------------------------------------------------------------------------------------------
# Merkle
# ---------------------------------------------------------------------------------------------------------------


def test_native_sha256_node_matches_hashlib():
    left, right = 12345, (1 << 253) + 7
    digest = bytearray(hashlib.sha256(left.to_bytes(32, "little") + right.to_bytes(32, "little")).digest())
    digest[31] &= 0x3F
    assert M.sha256_node_native(left, right) == int.from_bytes(bytes(digest), "little")


@pytest.mark.parametrize("hash_name,arity,levels", [("poseidon", 2, 3), ("poseidon", 8, 2), ("poseidon", 4, 2),
                                                    ("sha256", 2, 3)])
def test_native_sparse_tree_paths(hash_name, arity, levels):
    rng = random.Random(9)
    n = arity ** levels
    leaves = {i: rng.randrange(1 << 254) for i in rng.sample(range(n), 3)}
    tree = M.SparseMerkleTree(hash_name, arity, levels, leaves, rng)
    for i, v in leaves.items():
        path = tree.path(i)
        assert M.root_from_path_native(hash_name, arity, v, i, path) == tree.root
        assert M.root_from_path_native(hash_name, arity, v + 1, i, path) != tree.root
    # with every leaf given, the sparse tree is the full tree: compare with a direct level-by-level hash
    all_leaves = {i: rng.randrange(1 << 254) for i in range(n)}
    full = [all_leaves[i] for i in range(n)]
    while len(full) > 1:
        full = [M.node_native(hash_name, full[k:k + arity]) for k in range(0, len(full), arity)]
    assert M.SparseMerkleTree(hash_name, arity, levels, all_leaves, rng).root == full[0]
    with pytest.raises(ValueError, match="binary"):
        M.SparseMerkleTree("sha256", 4, 2, {}, rng)


def _inclusion_system(hash_name, arity, levels, seed, tamper=None):
    rng = random.Random(seed)
    n = arity ** levels
    index = rng.randrange(n)
    leaf = rng.randrange(1 << 254)
    tree = M.SparseMerkleTree(hash_name, arity, levels, {index: leaf}, rng)
    path = tree.path(index)
    root = tree.root
    if tamper == "sibling":
        path[0][0] += 1
    elif tamper == "index":
        index ^= 1
    cs = ConstraintSystem("full")
    root_n = N.alloc_input_num(cs, root)
    idx_n = N.alloc_input_num(cs, index)
    bits = N.to_bits_le(cs, idx_n, (arity.bit_length() - 1) * levels)
    leaf_n = N.alloc_num(cs, leaf)
    path_n = [[N.alloc_num(cs, s) for s in sibs] for sibs in path]
    with cs.namespace("merkle"):
        M.enforce_inclusion(cs, hash_name, arity, leaf_n, path_n, bits, root_n)
    return cs


@pytest.mark.parametrize("arity,levels", [(2, 3), (8, 2)])
def test_poseidon_inclusion_gadget(arity, levels):
    _inclusion_system("poseidon", arity, levels, 1).check()
    for tamper in ("sibling", "index"):
        with pytest.raises(Unsatisfied, match="merkle/root"):
            _inclusion_system("poseidon", arity, levels, 1, tamper).check()


def test_sha256_inclusion_gadget_one_level():
    cs = _inclusion_system("sha256", 2, 1, 4)
    cs.check()
    r1cs, w = cs.to_r1cs(), cs.witness()
    # index bit + its packing, swap, 2 x 254-bit decompositions, SHA-256 of 64 bytes (45,277 for a fully variable
    # message; the 4 constant zero bits of two 254-bit values fold 15 more)
    assert r1cs.num_constraints == 1 + 1 + 1 + 2 * 255 + 45262
    bad = w.with_value(1, w.z[1] + 1)  # wrong public root
    with pytest.raises(Unsatisfied, match="merkle/root"):
        r1cs.check(bad)
