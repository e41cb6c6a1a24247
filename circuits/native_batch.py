"""Batched native hashing for witness sampling: Poseidon over many preimages at once, and many sparse Merkle trees.

The proof-kind circuits (:mod:`.winning_post`, :mod:`.window_post`, :mod:`.snap_update`) hash the same shapes for
many sectors and challenges. Here the batch is a numpy axis: field elements are Python ints in ``object`` arrays
(numpy has no 255-bit integer dtype), so each round of :func:`poseidon_many` is a handful of array expressions
over the whole batch instead of an interpreted loop per hash; results equal :func:`cuzk_jax.circuits.poseidon.hash`
element for element (tested).

:class:`SparseForest` is :class:`~cuzk_jax.circuits.gadgets.merkle.SparseMerkleTree` for many trees at once:
node keys are ``tree * width + index`` (int64), deduplicated with ``np.unique`` per level, siblings that no path
owner knows are filled with random field elements from a numpy ``Generator``, and every level's parents are hashed
in one :func:`poseidon_many` call. Path conventions are :mod:`~cuzk_jax.circuits.gadgets.merkle`'s (bottom-up,
per level the ``arity - 1`` other children in order).
"""

from __future__ import annotations

import numpy as np

from cuzk_jax.reference.constants import R

from . import poseidon as native_poseidon
from .gadgets import merkle


def rand_fr(gen: np.random.Generator, shape, bound: int = R) -> np.ndarray:
    """Uniform-ish field elements below ``bound`` (``object`` array of ``shape``): 320 random bits reduced."""
    shape = tuple(np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
    words = gen.integers(0, 1 << 32, size=(10,) + shape, dtype=np.uint64).astype(object)
    acc = np.zeros(shape, dtype=object)
    for w in words:
        acc = (acc << 32) | w
    return acc % bound


def as_object(x) -> np.ndarray:
    """``x`` as an ``object`` array of Python ints (so products never overflow)."""
    a = np.asarray(x)
    if a.dtype != object:
        a = a.astype(object)
    return a


def poseidon_many(columns) -> np.ndarray:
    """``hash(columns[0][i], ..., columns[a-1][i])`` for every ``i`` (arity ``a = len(columns)``; each column an
    array of ints in ``[0, r)`` of one shape). Same permutation and framing as :func:`.poseidon.hash`:
    ``permute([0, x_1, ..., x_a])[0]``."""
    cols = [as_object(c) for c in columns]
    if not cols:
        raise ValueError("poseidon_many: need at least one input column")
    shape = cols[0].shape
    for i, c in enumerate(cols):
        if c.shape != shape:
            raise ValueError(f"poseidon_many: column {i} has shape {c.shape}, column 0 {shape}")
    rows = np.stack([c.reshape(-1) for c in cols], axis=1).tolist()
    out = np.empty(len(rows), dtype=object)
    out[:] = native_poseidon.hash_many(rows) if rows else []
    return out.reshape(shape)


def hash_nodes(hash_name: str, children: np.ndarray) -> np.ndarray:
    """Merkle node hashes of rows of ``children`` (``(n, arity)`` object array)."""
    if hash_name == "poseidon":
        return poseidon_many([children[:, j] for j in range(children.shape[1])])
    out = np.empty(children.shape[0], dtype=object)
    for i, row in enumerate(children):  # SHA-256: hashlib per node (already C speed per call)
        out[i] = merkle.sha256_node_native(int(row[0]), int(row[1]))
    return out


class SparseForest:
    """``n_trees`` sparse Merkle trees (``arity ** levels`` leaves each) built together.

    ``tree``, ``index``, ``value``: 1-D arrays of the known leaves (unique ``(tree, index)`` pairs); every tree
    must have at least one. Other nodes on their paths are random below ``bound`` (default: r, or 2^254 for
    SHA-256 trees, whose nodes are 254-bit).
    """

    def __init__(self, hash_name: str, arity: int, levels: int, n_trees: int, tree, index, value,
                 gen: np.random.Generator, bound: int | None = None):
        merkle.check_tree_args(hash_name, arity, levels)
        self.hash_name, self.arity, self.levels, self.n_trees = hash_name, arity, levels, n_trees
        bound = bound or ((1 << 254) if hash_name == "sha256" else R)
        width = arity ** levels
        tree = np.asarray(tree, dtype=np.int64)
        index = np.asarray(index, dtype=np.int64)
        if np.any((index < 0) | (index >= width)) or np.any((tree < 0) | (tree >= n_trees)):
            raise ValueError("SparseForest: leaf index or tree number out of range")
        keys = tree * width + index
        order = np.argsort(keys, kind="stable")
        keys, vals = keys[order], as_object(value)[order]
        if len(keys) > 1 and np.any(keys[1:] == keys[:-1]):
            raise ValueError("SparseForest: duplicate (tree, index) leaves")
        self._parents: list[np.ndarray] = []  # per level: sorted parent keys
        self._children: list[np.ndarray] = []  # per level: (len(parents), arity) object array
        for _ in range(levels):
            pkeys = np.unique(keys // arity)
            kids = rand_fr(gen, (len(pkeys), arity), bound)
            kids[np.searchsorted(pkeys, keys // arity), keys % arity] = vals
            self._parents.append(pkeys)
            self._children.append(kids)
            keys, vals = pkeys, hash_nodes(hash_name, kids)
        if len(keys) != n_trees:
            raise ValueError("SparseForest: every tree needs at least one known leaf")
        self.roots = vals  # keys are now 0 .. n_trees - 1, sorted

    def paths(self, tree, index) -> np.ndarray:
        """Paths of the leaves ``(tree, index)`` (arrays of one shape ``S``): ``S + (levels, arity - 1)``."""
        tree = np.asarray(tree, dtype=np.int64)
        index = np.asarray(index, dtype=np.int64)
        shape = tree.shape
        key = (tree * self.arity ** self.levels + index).reshape(-1)
        out = np.empty((key.size, self.levels, self.arity - 1), dtype=object)
        skip = np.arange(self.arity - 1)[None, :]
        for lvl in range(self.levels):
            pk, pos = key // self.arity, key % self.arity
            row = np.searchsorted(self._parents[lvl], pk)
            if np.any(row >= len(self._parents[lvl])) or np.any(self._parents[lvl][np.minimum(
                    row, len(self._parents[lvl]) - 1)] != pk):
                raise ValueError("SparseForest.paths: a leaf that is not in the forest")
            cols = skip + (skip >= pos[:, None])
            out[:, lvl, :] = np.take_along_axis(self._children[lvl][row], cols, axis=1)
            key = pk
        return out.reshape(shape + (self.levels, self.arity - 1))


def unique_leaves(index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a ``(trees, challenges)`` array of leaf indices: ``(tree, index, inverse)`` of the distinct
    ``(tree, index)`` pairs, with ``inverse`` mapping each challenge back to its pair (shape of ``index``)."""
    index = np.asarray(index, dtype=np.int64)
    n, c = index.shape
    tree = np.repeat(np.arange(n, dtype=np.int64), c)
    pairs = np.stack([tree, index.reshape(-1)], axis=1)
    uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
    return uniq[:, 0], uniq[:, 1], inverse.reshape(n, c)
