"""Merkle inclusion for SHA-256 (binary) and Poseidon (arity 2^k) trees, in-circuit and native.

Conventions (filecoin-like; the native helpers below and the gadgets agree on them):

* Leaves and nodes are Fr elements. A path is given bottom-up; level ``l`` uses the ``k = log2(arity)`` index bits
  ``index_bits[k*l : k*(l+1)]`` (least significant first) as the position of the current node among its
  ``arity`` siblings; the path element holds the other ``arity - 1`` children in order (filecoin's ``insert``).
* SHA-256 node (filecoin's ``sha256_trunc254_padded`` on two 32-byte nodes): ``node = trunc254(sha256(le32(left) ||
  le32(right)))`` read back as a little-endian integer, where ``le32(v)`` is the 32-byte little-endian encoding and
  ``trunc254`` clears the two top bits of the last byte. Node values are therefore < 2^254 and so are leaves (the
  circuit proves it by decomposing each hashed child into 254 bits). Cost per level: 1 (swap) + 2 x 255 (bits) +
  ~45.3k (two compressions, the second over the constant padding block).
* Poseidon node: :func:`cuzk_jax.circuits.poseidon.hash` of the ``arity`` children. Cost per level: ~240
  (arity 2) / ~421 (arity 8: 402 for the hash + 19 for ``insert``).
"""

from __future__ import annotations

import random as _random

from cuzk_jax.reference.constants import R

from .. import poseidon as native_poseidon
from .. import sha256_native
from ..cs import ConstraintSystem
from . import boolean as B
from .num import Num, conditional_swap, enforce_equal, from_bits_le, insert, to_bits_le
from .poseidon import poseidon_hash
from .sha256 import fr_bits_order, sha256, sha_bits_to_le, trunc254

HASHES = ("sha256", "poseidon")


# ---------------------------------------------------------------------------------------------------------------
# Native (plain Python) trees
# ---------------------------------------------------------------------------------------------------------------


def sha256_node_native(left: int, right: int) -> int:
    data = sha256_native.fr_to_bytes(left) + sha256_native.fr_to_bytes(right)
    return int.from_bytes(sha256_native.sha256_trunc254(data), "little")


def poseidon_node_native(children) -> int:
    return native_poseidon.hash(list(children))


def node_native(hash_name: str, children) -> int:
    if hash_name == "sha256":
        if len(children) != 2:
            raise ValueError("SHA-256 trees are binary")
        return sha256_node_native(*children)
    return poseidon_node_native(children)


def nodes_native(hash_name: str, rows) -> list[int]:
    """``[node_native(hash_name, row) for row in rows]``; Poseidon rows hashed together
    (:func:`cuzk_jax.circuits.poseidon.hash_many`)."""
    if hash_name == "poseidon":
        return native_poseidon.hash_many(rows)
    return [node_native(hash_name, row) for row in rows]


def check_tree_args(hash_name: str, arity: int, levels: int) -> int:
    """Validate a Merkle tree's shape (``ValueError`` naming the problem); returns ``log2(arity)``, the index bits
    per level."""
    if hash_name not in HASHES:
        raise ValueError(f"unknown Merkle hash {hash_name!r}; expected one of {HASHES}")
    if arity < 2 or arity & (arity - 1):
        raise ValueError(f"Merkle arity must be a power of two >= 2, got {arity}")
    if hash_name == "sha256" and arity != 2:
        raise ValueError("SHA-256 Merkle trees are binary (arity 2)")
    if levels < 1:
        raise ValueError(f"a Merkle tree needs at least one level, got {levels}")
    return arity.bit_length() - 1


class SparseMerkleTree:
    """A Merkle tree with ``arity ** levels`` leaves of which only ``leaves`` (``{index: value}``) are given;
    every other node a path needs is filled with a random value below ``bound`` from ``rng`` -- enough to produce
    consistent inclusion proofs for the given leaves without hashing the whole tree."""

    def __init__(self, hash_name: str, arity: int, levels: int, leaves: dict, rng: _random.Random,
                 bound: int | None = None):
        check_tree_args(hash_name, arity, levels)
        n = arity ** levels
        for i in leaves:
            if not 0 <= i < n:
                raise ValueError(f"leaf index {i} out of range for {n} leaves")
        self.hash_name, self.arity, self.levels = hash_name, arity, levels
        bound = bound or ((1 << 254) if hash_name == "sha256" else R)
        self.nodes = [dict(leaves)]
        for _ in range(levels):
            cur = self.nodes[-1]
            keys, rows = sorted({i // arity for i in cur}), []
            for p in keys:  # the random fill draws from rng in this order (parents ascending, children in order)
                kids = []
                for j in range(p * arity, (p + 1) * arity):
                    if j not in cur:
                        cur[j] = rng.randrange(bound)
                    kids.append(cur[j])
                rows.append(kids)
            self.nodes.append(dict(zip(keys, nodes_native(hash_name, rows))))
        self.root = self.nodes[-1][0]

    def path(self, index: int) -> list[list[int]]:
        """Bottom-up path: per level, the ``arity - 1`` other children in order."""
        out = []
        for lvl in range(self.levels):
            p = index // self.arity
            out.append([self.nodes[lvl][j] for j in range(p * self.arity, (p + 1) * self.arity) if j != index])
            index = p
        return out


def root_from_path_native(hash_name: str, arity: int, leaf: int, index: int, path) -> int:
    cur = leaf
    for sibs in path:
        pos = index % arity
        kids = list(sibs[:pos]) + [cur] + list(sibs[pos:])
        cur = node_native(hash_name, kids)
        index //= arity
    return cur


# ---------------------------------------------------------------------------------------------------------------
# Gadgets
# ---------------------------------------------------------------------------------------------------------------


def sha256_node(cs: ConstraintSystem, left: Num, right: Num) -> Num:
    """``trunc254(sha256(le32(left) || le32(right)))`` as a Num (each child decomposed into 254 bits)."""
    with cs.namespace("left_bits"):
        lb = to_bits_le(cs, left, 254)
    with cs.namespace("right_bits"):
        rb = to_bits_le(cs, right, 254)
    msg = fr_bits_order(lb + [B.FALSE, B.FALSE]) + fr_bits_order(rb + [B.FALSE, B.FALSE])
    with cs.namespace("sha256"):
        digest = trunc254(sha256(cs, msg))
    return from_bits_le(sha_bits_to_le(digest))


def root_from_path(cs: ConstraintSystem, hash_name: str, arity: int, leaf: Num, path: list,
                   index_bits: list) -> Num:
    """The root reached from ``leaf`` along ``path`` (per level a list of ``arity - 1`` sibling Nums) with the
    position given by ``index_bits`` (``log2(arity) * len(path)`` Booleans, least significant first)."""
    k = check_tree_args(hash_name, arity, len(path))
    if len(index_bits) != k * len(path):
        raise ValueError(f"root_from_path: need {k * len(path)} index bits, got {len(index_bits)}")
    cur = leaf
    for lvl, sibs in enumerate(path):
        if len(sibs) != arity - 1:
            raise ValueError(f"level {lvl}: need {arity - 1} siblings, got {len(sibs)}")
        with cs.namespace(f"level_{lvl}"):
            bits = index_bits[k * lvl: k * (lvl + 1)]
            if hash_name == "sha256":
                left, right = conditional_swap(cs, cur, sibs[0], bits[0])
                cur = sha256_node(cs, left, right)
            else:
                kids = insert(cs, cur, list(sibs), bits)
                cur = poseidon_hash(cs, kids)
    return cur


def enforce_inclusion(cs: ConstraintSystem, hash_name: str, arity: int, leaf: Num, path: list, index_bits: list,
                      root: Num) -> None:
    """Constrain ``leaf`` to sit at ``index`` in the tree with root ``root``."""
    computed = root_from_path(cs, hash_name, arity, leaf, path, index_bits)
    enforce_equal(cs, computed, root, "root")
