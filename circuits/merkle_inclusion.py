"""Merkle inclusion: the leaf at a public index of a tree with a public root (private leaf and path).

Public inputs: ``[root, index]``. The index is decomposed into ``levels * log2(arity)`` bits; the path follows the
conventions of :mod:`cuzk_jax.circuits.gadgets.merkle` (SHA-256 trees are binary and hold 254-bit values).
"""

from __future__ import annotations

from cuzk_jax.reference.constants import R

from .base import Circuit
from .gadgets import merkle
from .gadgets.num import alloc_input_num, alloc_num, to_bits_le


class MerkleInclusion(Circuit):
    name = "merkle_inclusion"
    DEFAULT_PRESET = "poseidon2_d8"
    PRESETS = {
        "poseidon2_d8": {"hash": "poseidon", "arity": 2, "levels": 8, "doc": "binary Poseidon tree, 256 leaves"},
        "poseidon8_d3": {"hash": "poseidon", "arity": 8, "levels": 3, "doc": "arity-8 Poseidon tree, 512 leaves"},
        "poseidon8_d10": {"hash": "poseidon", "arity": 8, "levels": 10,
                          "doc": "arity-8 Poseidon tree, 2^30 leaves (a 32 GiB sector's comm_r_last shape)"},
        "sha256_d1": {"hash": "sha256", "arity": 2, "levels": 1, "doc": "one SHA-256 node (2 compressions)"},
        "sha256_d4": {"hash": "sha256", "arity": 2, "levels": 4, "doc": "SHA-256 tree, 16 leaves"},
        "sha256_d23": {"hash": "sha256", "arity": 2, "levels": 23, "doc": "SHA-256 tree, 2^23 leaves (>= 2^20 "
                                                                           "constraints)"},
    }

    def _validate(self):
        p = self.params
        merkle.check_tree_args(p["hash"], p["arity"], p["levels"])

    @property
    def index_bits(self) -> int:
        return (self.params["arity"].bit_length() - 1) * self.params["levels"]

    def synthesize(self, cs, inputs=None):
        p = self.params
        a = p["arity"]
        get = (lambda k: None) if inputs is None else inputs.__getitem__
        root = alloc_input_num(cs, get("root"), "root")
        index = alloc_input_num(cs, get("index"), "index")
        with cs.namespace("index"):
            bits = to_bits_le(cs, index, self.index_bits)
        leaf = alloc_num(cs, get("leaf"), "leaf")
        path = []
        for lvl in range(p["levels"]):
            sibs = None if inputs is None else inputs["path"][lvl]
            path.append([alloc_num(cs, None if sibs is None else sibs[k], f"sibling_{lvl}_{k}") for k in range(a - 1)])
        with cs.namespace("merkle"):
            merkle.enforce_inclusion(cs, p["hash"], a, leaf, path, bits, root)

    def sample_inputs(self, partition=0, seed=0):
        p = self.params
        rng = self._rng(partition, seed)
        n = p["arity"] ** p["levels"]
        index = rng.randrange(n)
        leaf = rng.randrange(1 << 254 if p["hash"] == "sha256" else R)
        tree = merkle.SparseMerkleTree(p["hash"], p["arity"], p["levels"], {index: leaf}, rng)
        return {"root": tree.root, "index": index, "leaf": leaf, "path": tree.path(index)}

    def public_inputs(self, inputs):
        return [inputs["root"], inputs["index"]]
