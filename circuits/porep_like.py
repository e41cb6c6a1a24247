"""A scaled PoRep C2 partition: the structure of Filecoin's stacked-DRG (SDR) porep circuit at adjustable size.

Filecoin's PoRep C2 proves, per partition and per challenged node, (1) inclusion of the original data node in the
SHA-256 data tree (comm_d), (2) the node's layer labels, each a SHA-256 over its parents' labels, (3) inclusion of
the node's column (its labels across layers, Poseidon-hashed) and of its parents' columns in the column tree
(comm_c), (4) inclusion of the replica node (data + last-layer label) in the replica tree (comm_r_last), and
(5) ``comm_r = Poseidon(comm_c, comm_r_last)``. This circuit keeps exactly that structure with parameters:

* ``challenges`` -- challenged nodes per partition;
* ``depth`` -- log2 of the number of nodes (tree height of the binary comm_d tree);
* ``layers`` -- SDR layers; the column hash is Poseidon of arity ``layers``;
* ``parents`` -- parents per node (labels hash the parents' labels of the same layer);
* ``tree_arity`` -- arity of the Poseidon trees comm_c / comm_r_last (2 or 8; ``depth`` must be a multiple of
  log2(arity));
* ``data_hash`` -- ``"sha256"`` (as filecoin: comm_d tree and labels use SHA-256, about 45k constraints per tree
  level and per label block) or ``"poseidon"`` (the same structure with Poseidon in their place, for small presets
  and fast tests).

Definitions (native and in-circuit, see also :mod:`cuzk_jax.circuits.gadgets.merkle`):

* ``label_l(node) = trunc254(sha256(le32(replica_id) || be32(l) || be64(node) || 0^20 || le32(parent_1 label_l) ||
  ... ))`` (SHA-256 variant; values < 2^254), or ``Poseidon(replica_id, l * 2^64 + node, parent labels...)``;
* ``column(node) = Poseidon(label_1, ..., label_layers)``; ``replica(node) = data(node) + label_layers(node)``;
* parents of node ``c`` are ``H(replica_id, c, k) mod c`` for ``k < parents`` (a stand-in for the DRG/expander
  graph; they are public inputs, as the parent path indices are in filecoin);
* challenges are distinct nodes in ``[1, 2^depth)``.

* ``label_parents`` (optional, SHA-256 only; 0 = ``parents``) -- parent-label entries hashed into each label: the
  parents' labels repeated cyclically to this many entries (Filecoin repeats its 14 parents to 37).

Public inputs (in z order): ``replica_id, comm_d, comm_r``, then per challenge ``node, parent_1..parent_p``.
Private: ``comm_c, comm_r_last``, per challenge the data node, the three Merkle paths, the parents' columns and
their comm_c paths. Witness sampling builds sparse trees (only the nodes the paths need, filled with random
values), so every partition is a different random sector instance of the same circuit shape.

Sector-scale presets (constraints from the tiled structure; domain = the next power of two of constraints + public
inputs, what the prover's input constraints need)::

    preset     challenges  constraints   public  domain  fill
    domain24    2          16,300,762     33     2^24    97.2 %   (label_parents 43, see below)
    domain26    9          65,510,893    138     2^26    97.6 %
    sector32g  18         131,021,290    273     2^27    97.6 %   (Filecoin 32 GiB PoRep C2: 130,278,869)

Each challenge block of ``sector32g`` costs 7,278,933 constraints: the depth-30 comm_d path (30 SHA-256 nodes of two
compressions, ~1.37M), 11 labels of 20 compressions each (~5.8M), 15 column hashes (Poseidon arity 11) and 15
arity-8 comm_c paths plus the comm_r_last path (~0.07M).

How ``sector32g`` compares with Filecoin's 32 GiB PoRep C2 partition (rust-fil-proofs ``StackedCircuit``):

* ``challenges=18``: the same (180 challenges in 10 partitions).
* ``depth=30``: the same: 2^30 nodes of 32 bytes; comm_d is a binary SHA-256 tree of depth 30 in both.
* ``layers=11``: the same; the column hash is Poseidon of arity 11 in both.
* ``parents=14``: the same count (Filecoin: 6 DRG base parents from the same layer + 8 expander parents from the
  previous layer; layer 1 has only the 6 base parents). Here all 14 come from the same layer and from a hash-based
  stand-in graph; parent indices are public inputs in both.
* ``label_parents=37``: the same: Filecoin hashes replica_id, layer and node (one 64-byte block) and the parents'
  labels repeated to 37 entries, 1,248 bytes = 20 compressions with the padding, as here.
* ``tree_arity=8``: the same arity; Filecoin's comm_c / comm_r_last trees are 8 sub-trees of arity-8 base trees
  (9 + 1 levels of arity 8), here one arity-8 tree of 10 levels: the same path length and hash count.
* Poseidon: this project's circomlib-style framing and round numbers (see :mod:`.poseidon`), not neptune's; the
  constraint cost per hash is the same order (x^5 S-boxes, 3 constraints each).
* ``domain26`` and ``domain24`` keep the per-challenge shape with fewer challenges (9 and 2); ``domain24`` also
  hashes 43 parent-label entries (23 compressions per label instead of 20) to fill its domain.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
import os
import time

import numpy as np

from cuzk_jax import encoding
from cuzk_jax.errors import BadInput

from cuzk_jax.reference.constants import R

from . import poseidon as native_poseidon
from .base import Circuit
from .cs import ConstraintSystem
from .r1cs import PackedWitness
from .vector_witness import BatchCS, one_limbs
from .zfile import SHARED_DIR_ENV  # noqa: F401  (re-exported)
from .zfile import alloc_z, map_shared, pwrite_all, shared_z
from .gadgets import boolean as B
from .gadgets import merkle
from .gadgets.num import Num, alloc_input_num, alloc_num, enforce_equal, from_bits_le, to_bits_le
from .gadgets.poseidon import poseidon_hash
from .gadgets.sha256 import fr_bits_order, sha256, sha_bits_to_le, trunc254
from .sha256_native import fr_to_bytes, sha256_trunc254

HEADER_BYTES = 32


def label_native(data_hash: str, replica_id: int, layer: int, node: int, parent_labels) -> int:
    if data_hash == "sha256":
        msg = (fr_to_bytes(replica_id) + layer.to_bytes(4, "big") + node.to_bytes(8, "big") + bytes(20)
               + b"".join(fr_to_bytes(x) for x in parent_labels))
        return int.from_bytes(sha256_trunc254(msg), "little")
    return native_poseidon.hash([replica_id, (layer << 64) + node] + list(parent_labels))


def repeat_parents(items, count: int) -> list:
    """``items`` repeated cyclically to ``count`` entries (Filecoin's label hash repeats its 14 parents' labels to
    37 entries); ``items`` itself when ``count == len(items)``."""
    items = list(items)
    if not items:
        return items
    return [items[k % len(items)] for k in range(count)]


def parents_of(replica_id: int, node: int, count: int) -> list[int]:
    """The stand-in parent graph: ``count`` parents of ``node`` (> 0), each in ``[0, node)``."""
    out = []
    for k in range(count):
        h = hashlib.sha256(b"porep_like parent" + fr_to_bytes(replica_id) + node.to_bytes(8, "little")
                           + k.to_bytes(4, "little")).digest()
        out.append(int.from_bytes(h, "little") % node)
    return out


def _getter(inputs):
    """``get(key, *index)``: ``inputs[key][index...]``, or None for structure-only synthesis."""
    if inputs is None:
        return lambda key, *idx: None

    def get(key, *idx):
        v = inputs[key]
        for i in idx:
            v = v[i]
        return v
    return get


class PorepLike(Circuit):
    name = "porep_like"
    DEFAULT_PRESET = "tiny"
    PRESETS = {
        "tiny": {"challenges": 1, "depth": 1, "layers": 1, "parents": 0, "label_parents": 0, "tree_arity": 2,
                 "data_hash": "poseidon", "doc": "smallest shape (Poseidon everywhere, no parents)"},
        "mini": {"challenges": 1, "depth": 2, "layers": 1, "parents": 1, "label_parents": 0, "tree_arity": 2,
                 "data_hash": "poseidon", "doc": "every component once (Poseidon everywhere), for tests"},
        "small": {"challenges": 2, "depth": 6, "layers": 2, "parents": 2, "label_parents": 0, "tree_arity": 8,
                  "data_hash": "poseidon", "doc": "Poseidon everywhere, arity-8 column/replica trees"},
        "sha_min": {"challenges": 1, "depth": 1, "layers": 1, "parents": 0, "label_parents": 0, "tree_arity": 2,
                    "data_hash": "sha256", "doc": "the smallest SHA-256 shape: one comm_d level, one label"},
        "medium": {"challenges": 1, "depth": 6, "layers": 2, "parents": 2, "label_parents": 0, "tree_arity": 8,
                   "data_hash": "sha256", "doc": "SHA-256 comm_d/labels, ~2^19 constraints"},
        "domain20": {"challenges": 2, "depth": 6, "layers": 2, "parents": 2, "label_parents": 0, "tree_arity": 8,
                     "data_hash": "sha256",
                     "doc": "medium with two challenges: 844,306 constraints, fills a 2^20 domain"},
        "large": {"challenges": 2, "depth": 9, "layers": 2, "parents": 2, "label_parents": 0, "tree_arity": 8,
                  "data_hash": "sha256", "doc": "SHA-256 comm_d/labels, >= 2^20 constraints"},
        "xlarge": {"challenges": 4, "depth": 12, "layers": 2, "parents": 2, "label_parents": 0, "tree_arity": 8,
                   "data_hash": "sha256", "doc": "SHA-256 comm_d/labels, ~2^21.5 constraints"},
        "domain24": {"challenges": 2, "depth": 30, "layers": 11, "parents": 14, "label_parents": 43,
                     "tree_arity": 8, "data_hash": "sha256",
                     "doc": "sector32g's challenge shape with 2 challenges and 43 label entries: fills a 2^24 "
                            "domain"},
        "domain26": {"challenges": 9, "depth": 30, "layers": 11, "parents": 14, "label_parents": 37,
                     "tree_arity": 8, "data_hash": "sha256",
                     "doc": "sector32g's challenge shape with 9 challenges: fills a 2^26 domain"},
        "sector32g": {"challenges": 18, "depth": 30, "layers": 11, "parents": 14, "label_parents": 37,
                      "tree_arity": 8, "data_hash": "sha256",
                      "doc": "shaped like a 32 GiB PoRep C2 partition: fills a 2^27 domain"},
    }

    def _validate(self):
        p = self.params
        for key in ("challenges", "depth", "layers"):
            if not isinstance(p[key], int) or p[key] < 1:
                raise ValueError(f"porep_like: {key} must be a positive int, got {p[key]!r}")
        if not isinstance(p["parents"], int) or p["parents"] < 0:
            raise ValueError(f"porep_like: parents must be a non-negative int, got {p['parents']!r}")
        if p["tree_arity"] not in (2, 8):
            raise ValueError(f"porep_like: tree_arity must be 2 or 8, got {p['tree_arity']!r}")
        if p["data_hash"] not in ("sha256", "poseidon"):
            raise ValueError(f"porep_like: data_hash must be 'sha256' or 'poseidon', got {p['data_hash']!r}")
        k = p["tree_arity"].bit_length() - 1
        if p["depth"] % k:
            raise ValueError(f"porep_like: depth {p['depth']} is not a multiple of log2(tree_arity) = {k}")
        if p["depth"] > 62:
            raise ValueError("porep_like: depth must be <= 62 (node indices are 64-bit)")
        lp = p.get("label_parents", 0)
        if not isinstance(lp, int) or lp < 0:
            raise ValueError(f"porep_like: label_parents must be a non-negative int, got {lp!r}")
        if lp and (p["data_hash"] != "sha256" or lp < p["parents"] or p["parents"] < 1):
            raise ValueError("porep_like: label_parents (repeated parent labels) needs data_hash 'sha256', at least "
                             f"one parent and label_parents >= parents; got {lp} with {p['parents']} parents")
        if p["challenges"] > (1 << p["depth"]) - 1:
            raise ValueError(f"porep_like: {p['challenges']} distinct challenges do not fit in [1, 2^{p['depth']})")

    @property
    def label_entries(self) -> int:
        """Parent-label entries hashed into each label: ``label_parents``, or ``parents`` when that is 0."""
        return self.params.get("label_parents", 0) or self.params["parents"]

    @property
    def tree_levels(self) -> int:
        return self.params["depth"] // (self.params["tree_arity"].bit_length() - 1)

    @property
    def value_bound(self) -> int:
        return (1 << 254) if self.params["data_hash"] == "sha256" else R

    # -- witness sampling ---------------------------------------------------------------------------------------------
    def sample_inputs(self, partition=0, seed=0):
        p = self.params
        rng = self._rng(partition, seed)
        dh, L, bound = p["data_hash"], p["layers"], self.value_bound
        replica_id = rng.randrange(1 << 254)
        challenges = rng.sample(range(1, 1 << p["depth"]), p["challenges"])
        parents = {c: parents_of(replica_id, c, p["parents"]) for c in challenges}
        columns: dict[int, list[int]] = {}
        for c in sorted(challenges):
            for par in parents[c]:
                if par not in columns:
                    columns[par] = [rng.randrange(bound) for _ in range(L)]
            columns[c] = [label_native(dh, replica_id, layer + 1, c,
                                       repeat_parents([columns[par][layer] for par in parents[c]], self.label_entries))
                          for layer in range(L)]
        data = {c: rng.randrange(bound) for c in challenges}
        comm_d_tree = merkle.SparseMerkleTree(dh, 2, p["depth"], data, rng)
        col_hash = dict(zip(columns, native_poseidon.hash_many(columns.values())))
        comm_c_tree = merkle.SparseMerkleTree("poseidon", p["tree_arity"], self.tree_levels, col_hash, rng)
        replica = {c: (data[c] + columns[c][-1]) % R for c in challenges}
        comm_r_last_tree = merkle.SparseMerkleTree("poseidon", p["tree_arity"], self.tree_levels, replica, rng)
        comm_c, comm_r_last = comm_c_tree.root, comm_r_last_tree.root
        return {
            "replica_id": replica_id,
            "comm_d": comm_d_tree.root,
            "comm_r": native_poseidon.hash([comm_c, comm_r_last]),
            "comm_c": comm_c,
            "comm_r_last": comm_r_last,
            "challenges": challenges,
            "parents": [parents[c] for c in challenges],
            "data": [data[c] for c in challenges],
            "comm_d_paths": [comm_d_tree.path(c) for c in challenges],
            "labels": [columns[c] for c in challenges],
            "comm_c_paths": [comm_c_tree.path(c) for c in challenges],
            "comm_r_last_paths": [comm_r_last_tree.path(c) for c in challenges],
            "parent_columns": [[columns[par] for par in parents[c]] for c in challenges],
            "parent_comm_c_paths": [[comm_c_tree.path(par) for par in parents[c]] for c in challenges],
        }

    def public_inputs(self, inputs):
        out = [inputs["replica_id"], inputs["comm_d"], inputs["comm_r"]]
        for c, pars in zip(inputs["challenges"], inputs["parents"]):
            out += [c] + list(pars)
        return out

    # -- synthesis ----------------------------------------------------------------------------------------------------
    # Layout (what the tiled structure and the batched witness rely on): a *header* (replica_id, comm_d, comm_r
    # inputs; comm_c, comm_r_last; comm_r = H(comm_c, comm_r_last); replica_id bits) followed by one *challenge
    # block* per challenge, every block allocating the same number of inputs, private variables and constraints in
    # the same order, and referring only to its own wires and the header's.
    HEADER_KEYS = ("replica_id", "comm_d", "comm_r", "comm_c", "comm_r_last")

    def synthesize(self, cs, inputs=None):
        get = _getter(inputs)
        shared = self.synthesize_header(cs, get)
        for j in range(self.params["challenges"]):
            with cs.namespace(f"challenge_{j}"):
                self.synthesize_challenge(cs, shared, get, j)

    # challenges from which PorepLike.witness takes the batched path (below it, the per-gate numpy overhead of
    # a batch this small costs more than the builder's Python ints)
    BATCH_MIN_CHALLENGES = 4

    def witness(self, inputs, check_shape: bool = True, batched: bool | None = None, out=None):
        """The assignment for ``inputs``: batched over the challenges (:func:`witness_batch`, a
        :class:`~.r1cs.PackedWitness`) when ``batched`` (default: at least ``BATCH_MIN_CHALLENGES`` challenges and
        :meth:`synthesize` not overridden by a subclass), else the Python builder's. Both are equal wire for wire.

        ``out``: an ``(8, 1, num_vars)`` uint32 array (e.g. the engine's shared-file mapping) the batched path builds
        the limbs in -- the PackedWitness is then a view of it, no private copy -- ValueError when its shape is not
        this circuit's; the builder's path ignores it."""
        if batched is None:
            batched = (self.params["challenges"] >= self.BATCH_MIN_CHALLENGES
                       and type(self).synthesize is PorepLike.synthesize)
        if not batched:
            return super().witness(inputs, check_shape)
        if out is not None:
            n = block_counts(self)["num_vars"]
            if out.shape != (8, 1, n) or out.dtype != np.uint32:
                raise ValueError(f"porep_like witness: out must be uint32 (8, 1, {n}), got {out.dtype} {out.shape}")
        cs, counts = synthesize_batch(self, [inputs])
        z = alloc_z((8, 1, counts["num_vars"])) if out is None else out
        fill_z(cs, counts, 1, z)
        w = PackedWitness(z[:, 0, :], counts["num_inputs"], counts["num_constraints"])
        if check_shape and self._r1cs is not None:
            self._r1cs.check_shape(w)
        return w

    def span_units(self) -> int:
        """How many spans a partition's witness can be split into for :meth:`witness_span` (its challenges; 0 for
        one challenge, or for a subclass with its own ``synthesize``, whose layout the batched path does not know).
        The engine splits a partition over several workers with it (``engine.synthesis.SplitSynthesis``)."""
        C = self.params["challenges"]
        return C if C > 1 and type(self).synthesize is PorepLike.synthesize else 0

    def witness_span(self, inputs, lo: int, hi: int, out: str) -> dict:
        """Challenges ``lo .. hi - 1`` of the partition with ``inputs`` into the shared file ``out`` (``(8, 1,
        num_vars)`` uint32 Fr limbs, Montgomery form, as ``witness(out=)`` writes): their public inputs and block
        wires, and the header's columns when ``lo == 0`` (:func:`fill_instances`), so spans that cover ``[0,
        challenges)`` once write every column once and together equal :meth:`witness`. Returns the sizes of
        :func:`block_counts`. ValueError for an empty or out-of-range span or a file of another size."""
        C = self.params["challenges"]
        if not (0 <= lo < hi <= C):
            raise ValueError(f"porep_like witness_span: [{lo}, {hi}) is not a span of [0, {C})")
        n = block_counts(self)["num_vars"]
        if os.path.getsize(out) != 32 * n:
            raise ValueError(f"porep_like witness_span: {out} holds {os.path.getsize(out) // 32} wires, the "
                             f"witness has {n}")
        return _task(self, [inputs], 0, (lo, hi), True, out, (8, 1, n))

    def warm_worker(self) -> None:
        """Build what a worker process keeps between witnesses of this shape (the counting run's Poseidon parameters
        and programs, the batched gadgets' per-shape tables) from the header and one challenge of partition 0:
        an engine warms its workers with this rather than with a whole partition (~4 GiB each at sector scale)."""
        block_counts(self)
        if self.params["challenges"] >= self.BATCH_MIN_CHALLENGES and type(self).synthesize is PorepLike.synthesize:
            synthesize_batch(self, [self.sample_inputs(0, 0)], ([0], [0]))
        else:
            self.witness(self.sample_inputs(0, 0), check_shape=False)

    def _blocks(self):
        """``(header, block0, challenges, "challenge")`` in structure mode when :meth:`synthesize` is this class's
        and there is more than one challenge, else None: the base class then tiles the structure from one
        synthesized challenge block (:func:`.tiling.tiled_r1cs`, equal to the builder's) and gives the R1CS -- built
        or loaded from a compiled file -- its :class:`~.tiling.Tiling` (the prover's tiled layout). Not the block
        witness protocol (:mod:`.block_witness`): the witness is this module's batched one."""
        if type(self).synthesize is not PorepLike.synthesize or self.params["challenges"] < 2:
            return None
        get = _getter(None)
        return ((lambda cs: self.synthesize_header(cs, get)),
                (lambda cs, shared: self.synthesize_challenge(cs, shared, get, 0)),
                self.params["challenges"], "challenge")

    def synthesize_header(self, cs, get):
        """The header (see above); ``get(key, *index)`` returns an input value (None in structure mode)."""
        replica_id = alloc_input_num(cs, get("replica_id"), "replica_id")
        comm_d = alloc_input_num(cs, get("comm_d"), "comm_d")
        comm_r = alloc_input_num(cs, get("comm_r"), "comm_r")
        comm_c = alloc_num(cs, get("comm_c"), "comm_c")
        comm_r_last = alloc_num(cs, get("comm_r_last"), "comm_r_last")
        with cs.namespace("comm_r"):
            enforce_equal(cs, poseidon_hash(cs, [comm_c, comm_r_last]), comm_r, "comm_r = H(comm_c, comm_r_last)")
        replica_bits = None
        if self.params["data_hash"] == "sha256":
            with cs.namespace("replica_id_bits"):
                replica_bits = fr_bits_order(to_bits_le(cs, replica_id, 254) + [B.FALSE, B.FALSE])
        return {"replica_id": replica_id, "comm_d": comm_d, "comm_c": comm_c, "comm_r_last": comm_r_last,
                "replica_bits": replica_bits}

    def synthesize_challenge(self, cs, shared, get, j: int):
        """Challenge block ``j`` (inside the caller's ``challenge_<j>`` namespace)."""
        p = self.params
        dh, L, depth, arity = p["data_hash"], p["layers"], p["depth"], p["tree_arity"]
        replica_id, comm_d, comm_c = shared["replica_id"], shared["comm_d"], shared["comm_c"]

        def alloc_path(key, idx, hash_arity, levels, name):
            return [[alloc_num(cs, get(key, *idx, lvl, k), f"{name}_{lvl}_{k}") for k in range(hash_arity - 1)]
                    for lvl in range(levels)]

        node = alloc_input_num(cs, get("challenges", j), "node")
        parent_nodes = [alloc_input_num(cs, get("parents", j, k), f"parent_{k}") for k in range(p["parents"])]
        with cs.namespace("node_bits"):
            node_bits = to_bits_le(cs, node, depth)
        data = alloc_num(cs, get("data", j), "data")
        with cs.namespace("comm_d"):
            path = alloc_path("comm_d_paths", (j,), 2, depth, "sibling")
            merkle.enforce_inclusion(cs, dh, 2, data, path, node_bits, comm_d)
        parent_cols = [[alloc_num(cs, get("parent_columns", j, k, layer), f"parent_{k}_label_{layer + 1}")
                        for layer in range(L)] for k in range(p["parents"])]
        labels = []
        for layer in range(L):
            with cs.namespace(f"label_{layer + 1}"):
                labels.append(self._label(cs, replica_id, shared["replica_bits"], layer + 1, node, node_bits,
                                          [col[layer] for col in parent_cols]))
        with cs.namespace("column"):
            column = poseidon_hash(cs, labels)
        with cs.namespace("comm_c"):
            path = alloc_path("comm_c_paths", (j,), arity, self.tree_levels, "sibling")
            merkle.enforce_inclusion(cs, "poseidon", arity, column, path, node_bits, comm_c)
        with cs.namespace("comm_r_last"):
            path = alloc_path("comm_r_last_paths", (j,), arity, self.tree_levels, "sibling")
            merkle.enforce_inclusion(cs, "poseidon", arity, data + labels[-1], path, node_bits, shared["comm_r_last"])
        for k in range(p["parents"]):
            with cs.namespace(f"parent_{k}"):
                with cs.namespace("node_bits"):
                    pbits = to_bits_le(cs, parent_nodes[k], depth)
                with cs.namespace("column"):
                    pcol = poseidon_hash(cs, parent_cols[k])
                with cs.namespace("comm_c"):
                    path = alloc_path("parent_comm_c_paths", (j, k), arity, self.tree_levels, "sibling")
                    merkle.enforce_inclusion(cs, "poseidon", arity, pcol, path, pbits, comm_c)

    def _label(self, cs, replica_id: Num, replica_bits, layer: int, node: Num, node_bits, parent_labels) -> Num:
        if self.params["data_hash"] == "poseidon":
            return poseidon_hash(cs, [replica_id, node + (layer << 64)] + list(parent_labels))
        # header: be32(layer) || be64(node) || 20 zero bytes; node bits are little-endian
        header = [B.constant((layer >> (31 - i)) & 1) for i in range(32)]
        header += [node_bits[63 - i] if 63 - i < len(node_bits) else B.FALSE for i in range(64)]
        header += [B.FALSE] * (8 * 20)
        msg = list(replica_bits) + header
        pbits = []
        for k, lab in enumerate(parent_labels):
            with cs.namespace(f"parent_{k}_bits"):
                pbits.append(fr_bits_order(to_bits_le(cs, lab, 254) + [B.FALSE, B.FALSE]))
        for bits in repeat_parents(pbits, self.label_entries):
            msg += bits
        with cs.namespace("sha256"):
            digest = trunc254(sha256(cs, msg))
        return from_bits_le(sha_bits_to_le(digest))


# -------------------------------------------------------------------------------------------------------------------
# Batched witnesses (the fast path): the header and ONE challenge block run over every (partition, challenge)
# instance at once with numpy values (:mod:`.vector_witness`), then scatter into z.
# -------------------------------------------------------------------------------------------------------------------


def synthesize_batch(circuit: PorepLike, inputs_list, instances=None):
    """Run the header and one challenge block of ``circuit`` over a batch of ``N`` instances: by default every
    challenge of every partition (instance ``k`` = challenge ``k % C`` of ``inputs_list[k // C]``), else
    ``instances = (parts, chals)``, two length-``N`` int sequences: instance ``k`` = challenge ``chals[k]`` of
    ``inputs_list[parts[k]]``. Every instance also carries its partition's header values, so any subset of the
    (partition, challenge) pairs is a valid batch. Returns ``(cs, counts)`` where ``cs`` is the
    :class:`~.vector_witness.BatchCS` and ``counts`` the header/block sizes (see :func:`block_counts`)."""
    C = circuit.params["challenges"]
    P = len(inputs_list)
    if instances is None:
        inst_p = np.repeat(np.arange(P), C).tolist()
        inst_j = np.tile(np.arange(C), P).tolist()
    else:
        inst_p = [int(v) for v in instances[0]]
        inst_j = [int(v) for v in instances[1]]
        if len(inst_p) != len(inst_j) or not inst_p:
            raise ValueError("synthesize_batch: instances needs two equally long, non-empty sequences")
        if min(inst_p) < 0 or max(inst_p) >= P or min(inst_j) < 0 or max(inst_j) >= C:
            raise ValueError(f"synthesize_batch: an instance outside {P} partitions x {C} challenges")
    N = len(inst_p)

    def get(key, *idx):
        out = np.empty(N, object)
        if not idx:  # a header value: the same for every challenge of a partition
            out[:] = [inputs_list[p][key] for p in inst_p]
            return out
        rest = idx[1:]  # idx[0] is the block's challenge (0): each instance reads its own challenge's value
        vals = []
        for p, j in zip(inst_p, inst_j):
            v = inputs_list[p][key][j]
            for i in rest:
                v = v[i]
            vals.append(v)
        out[:] = vals
        return out

    cached = getattr(circuit, "_block_counts", None)
    if cached is not None and cached[0] == sorted(circuit.params.items()):
        # the header's and one block's wires bound the bit rows: no regrowth of the (rows, N) buffer
        cs = BatchCS(N, capacity=max(1, cached[1]["head_aux"] + cached[1]["block_aux"]))
    else:
        cs = BatchCS(N)
    shared = circuit.synthesize_header(cs, get)
    head = (cs.num_inputs, cs.num_aux, cs.num_constraints)
    with cs.namespace("challenge_0"):
        circuit.synthesize_challenge(cs, shared, get, 0)
    counts = _counts(C, head, (cs.num_inputs, cs.num_aux, cs.num_constraints))
    return cs, counts


def _counts(C, head, total1):
    ni_h, na_h, m_h = head
    ni_b, na_b, m_b = (total1[0] - ni_h, total1[1] - na_h, total1[2] - m_h)
    num_inputs = ni_h + C * ni_b
    return {"challenges": C, "head_inputs": ni_h, "head_aux": na_h, "head_constraints": m_h, "block_inputs": ni_b,
            "block_aux": na_b, "block_constraints": m_b, "num_inputs": num_inputs, "num_aux": na_h + C * na_b,
            "num_vars": num_inputs + na_h + C * na_b, "num_constraints": m_h + C * m_b}


class _CountCS(ConstraintSystem):
    """Counts inputs, private variables and constraints without recording anything (structure mode, no rows)."""

    def __init__(self):
        super().__init__("structure")
        self.keep = False


def block_counts(circuit: PorepLike) -> dict:
    """Sizes of the header and of one challenge block (inputs, private variables, constraints) and of the whole
    circuit, from a counting run of the header and one block (cached on the circuit)."""
    cached = getattr(circuit, "_block_counts", None)
    if cached is not None and cached[0] == sorted(circuit.params.items()):
        return cached[1]
    cs = _CountCS()
    get = _getter(None)
    shared = circuit.synthesize_header(cs, get)
    head = (cs.num_inputs, cs.num_aux, cs.num_constraints)
    with cs.namespace("challenge_0"):
        circuit.synthesize_challenge(cs, shared, get, 0)
    counts = _counts(circuit.params["challenges"], head, (cs.num_inputs, cs.num_aux, cs.num_constraints))
    circuit._block_counts = (sorted(circuit.params.items()), counts)
    return counts


def fill_z(cs: BatchCS, counts: dict, P: int, out: np.ndarray, montgomery: bool = True, first: int = 0) -> None:
    """Write the ``P`` partitions of a default batch (every challenge of every partition, from
    :func:`synthesize_batch`) into ``out[:, first:first + P, :]`` (see :func:`fill_instances`)."""
    C = counts["challenges"]
    fill_instances(cs, counts, out, first + np.repeat(np.arange(P), C), np.tile(np.arange(C), P), montgomery)


def fill_instances(cs: BatchCS, counts: dict, out: np.ndarray, rows, chals, montgomery: bool = True) -> None:
    """Write the instances of a batch into ``out`` (``(8, *, num_vars)`` uint32, e.g. a memmap; Fr limbs, Montgomery
    form unless ``montgomery=False``): instance ``k`` (challenge ``chals[k]`` of the partition stored in row
    ``rows[k]`` of ``out``) fills that challenge's columns of row ``rows[k]``: its public inputs and its block of
    private wires. The instance of challenge 0 also fills the partition's header columns (ONE, the header inputs
    and private wires), so every column of a partition is written exactly once whichever way its challenges are
    split into batches.

    Each challenge block's private wires are one contiguous column range, written in chunks of :data:`FILL_CHUNK`
    columns: the chunk's bits scattered into a uint8 vector, multiplied by the limbs of 1, its field wires patched
    in, then the chunk goes out -- by ``os.pwrite`` when ``out`` is a writable ``np.memmap`` (see
    :func:`_file_writer`), else by a copy into ``out``."""
    C = counts["challenges"]
    ni_h, na_h, ni_b, na_b = counts["head_inputs"], counts["head_aux"], counts["block_inputs"], counts["block_aux"]
    n_in, V = counts["num_inputs"], counts["num_vars"]
    rows = np.asarray(rows, np.int64).reshape(-1)
    chals = np.asarray(chals, np.int64).reshape(-1)
    if len(rows) != cs.n or len(chals) != cs.n:
        raise ValueError(f"fill_instances: {len(rows)} rows and {len(chals)} challenges for {cs.n} instances")
    if out.ndim != 3 or out.shape[0] != 8 or out.shape[2] != V or rows.min() < 0 or rows.max() >= out.shape[1]:
        raise ValueError(f"fill_instances: out has shape {out.shape}, expected (8, > {rows.max()}, {V})")
    if chals.min() < 0 or chals.max() >= C:
        raise ValueError(f"fill_instances: a challenge outside [0, {C})")
    one = one_limbs(montgomery)[:, None]
    bit_aux, bits = cs.bit_aux, cs.bits
    nh = int(np.searchsorted(bit_aux, na_h))  # header bit rows come first (aux indices ascend)
    h_off, b_off = bit_aux[:nh], bit_aux[nh:] - na_h
    bits_h = bits[:nh]
    fr_aux = np.asarray(cs.fr_aux, np.int64)
    fr_head = np.flatnonzero(fr_aux < na_h).tolist()
    fr_block = np.flatnonzero(fr_aux >= na_h)
    fh_cols = n_in + fr_aux[fr_head]
    fb_off = fr_aux[fr_block] - na_h  # ascending, like b_off
    if len(b_off) + len(fb_off) != na_b:
        raise AssertionError("fill_instances: a block's wires are not all bits or field elements")
    vec_h = np.zeros(na_h, np.uint8)

    def limbs(vals):
        return encoding.ints_to_limbs(vals, "fr", montgomery=montgomery)

    # every instance's block field wires in one conversion: (8, n, F)
    n, F = cs.n, len(fr_block)
    fr_limbs = None
    if F:
        vals = np.stack([cs.fr_values[i] for i in fr_block.tolist()])  # (F, n) object
        fr_limbs = _fr_limbs(vals.T.ravel().tolist(), montgomery).reshape(8, n, F)
    bits_b = bits[nh:]
    bounds = list(range(0, na_b, FILL_CHUNK)) + [na_b]
    b_cut = np.searchsorted(b_off, bounds).tolist()
    f_cut = np.searchsorted(fb_off, bounds).tolist()
    buf = np.empty((8, min(FILL_CHUNK, na_b)), np.uint32)
    vec = np.empty(buf.shape[1], np.uint8)
    write = _file_writer(out) or _array_writer(out)
    try:
        for k in range(n):
            q, j = int(rows[k]), int(chals[k])
            if j == 0:  # the partition's header: ONE and the header inputs, header bits, then header field wires
                out[:, q, :ni_h] = limbs([int(cs.input_values[i][k]) for i in range(ni_h)])
                vec_h[h_off] = bits_h[:, k]
                np.multiply(one, vec_h[None, :], out=out[:, q, n_in:n_in + na_h])  # no temporary: written in place
                if fr_head:
                    out[:, q, fh_cols] = limbs([int(cs.fr_values[i][k]) for i in fr_head])
            if ni_b:
                out[:, q, ni_h + j * ni_b:ni_h + (j + 1) * ni_b] = limbs(
                    [int(cs.input_values[i][k]) for i in range(ni_h, ni_h + ni_b)])
        starts = [n_in + na_h + int(j) * na_b for j in chals]
        # chunk by chunk, every instance: a chunk's bit rows (all instances, contiguous) stay in cache while each
        # instance's column is read out of them
        for c in range(len(bounds) - 1):
            c0, m = bounds[c], bounds[c + 1] - bounds[c]
            v, b = vec[:m], buf[:, :m]
            ra, rb, fa, fb = b_cut[c], b_cut[c + 1], f_cut[c], f_cut[c + 1]
            pos, sub = b_off[ra:rb] - c0, bits_b[ra:rb]
            fpos = fb_off[fa:fb] - c0
            for k in range(n):
                # bit and field wires partition the block: each position of v is set here or patched below
                v[pos] = sub[:, k]
                np.multiply(one, v[None, :], out=b)
                if fb > fa:
                    b[:, fpos] = fr_limbs[:, k, fa:fb]
                write(int(rows[k]), starts[k] + c0, b)
    finally:
        close = getattr(write, "close", None)
        if close is not None:
            close()


def _fr_limbs(vals: list, montgomery: bool) -> np.ndarray:
    """Field elements -> ``(8, len(vals))`` uint32 limbs: :func:`encoding.ints_to_limbs`, or for Python ints in
    Montgomery form ``(v << 256) mod r`` directly (``R = 2^256``). The values are a BatchCS's field wires, canonical
    by ``alloc_raw``'s contract, so the direct path does not re-check their range."""
    if not (montgomery and vals and set(map(type, vals)) <= {int}):
        return encoding.ints_to_limbs(vals, "fr", montgomery=montgomery)
    buf = b"".join([((v << 256) % R).to_bytes(32, "little") for v in vals])
    return np.frombuffer(buf, "<u4").reshape(len(vals), 8).T


# columns per chunk of fill_instances: its (8, FILL_CHUNK) uint32 buffer stays in cache between being computed and
# being written out
FILL_CHUNK = 1 << 16


class _FileWriter:
    """Writes ``(8, m)`` chunks of columns of one row of a writable ``np.memmap`` through ``os.pwrite`` on its
    file: a write into a fresh tmpfs file allocates its pages in the kernel's copy loop, cheaper than a page
    fault per 4 KiB page of the mapping. The mapping sees the writes (one page cache)."""

    def __init__(self, fd: int, pos0: int, strides):
        self.fd, self.pos0, self.strides = fd, pos0, strides

    def __call__(self, q: int, col: int, chunk: np.ndarray) -> None:
        s0, s1, s2 = self.strides
        base = self.pos0 + q * s1 + col * s2
        for lim in range(chunk.shape[0]):
            pwrite_all(self.fd, chunk[lim], base + lim * s0)

    def close(self) -> None:
        os.close(self.fd)


def _file_writer(out: np.ndarray):
    """A :class:`_FileWriter` for ``out`` when it is (a view of) a writable, file-backed ``np.memmap`` with
    contiguous rows, else None."""
    root = out
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not (isinstance(root, np.memmap) and getattr(root, "filename", None) and root.mode in ("r+", "w+")
            and out.strides[2] == out.itemsize == 4 and out.dtype == np.uint32):
        return None
    try:
        fd = os.open(root.filename, os.O_WRONLY)
    except OSError:
        return None
    return _FileWriter(fd, int(root.offset) + (out.ctypes.data - root.ctypes.data), out.strides)


def _array_writer(out: np.ndarray):
    def write(q: int, col: int, chunk: np.ndarray) -> None:
        out[:, q, col:col + chunk.shape[1]] = chunk
    return write


def _task(circuit, inputs_list, first, span, montgomery, path, shape):
    """Worker: instances ``span[0] .. span[1] - 1`` of the flat order (instance ``k`` = challenge ``k % C`` of
    partition ``k // C``) into rows ``k // C`` of the shared output file; ``inputs_list`` holds the inputs of the
    partitions ``first, first + 1, ...`` that the span touches."""
    C = circuit.params["challenges"]
    k = np.arange(span[0], span[1])
    rows, chals = k // C, k % C
    cs, counts = synthesize_batch(circuit, inputs_list, (rows - first, chals))
    z = map_shared(path, shape)
    fill_instances(cs, counts, z, rows, chals, montgomery)
    z.flush()
    del z
    return counts


def _sample_task(circuit, partition, seed):
    """Worker: the sampled inputs of ``partition`` of sector ``seed``."""
    return circuit.sample_inputs(partition, seed)


_POOL: dict = {}


def _init_worker(circuit) -> None:
    circuit.__dict__.pop("_block_counts", None)  # a copy may carry the parent's counts: count here for real,
    block_counts(circuit)  # which generates the Poseidon parameters and programs this shape uses, once per worker


def _started(_=None) -> int:
    time.sleep(0.2)  # long enough that the warm-up tasks land on distinct, newly spawned workers
    return os.getpid()


def worker_pool(circuit: PorepLike, workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """The process pool :func:`witness_batch` uses for ``workers`` workers on ``circuit``'s shape: kept between
    calls (one pool per process; a different shape or size replaces it), ``spawn`` context (safe after JAX started
    threads), each worker warmed by a counting run of the shape (Poseidon parameters and programs)."""
    key = (workers, circuit.name, tuple(sorted(circuit.params.items())))
    pool = _POOL.get(key)
    if pool is None:
        shutdown_pool()
        ctx = multiprocessing.get_context("spawn")
        pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                                                      initargs=(circuit.without_r1cs(),))
        _POOL[key] = pool
    return pool


def warm_pool(circuit: PorepLike, workers: int) -> int:
    """Start (and warm) every worker of :func:`worker_pool` now; returns how many distinct workers answered."""
    pool = worker_pool(circuit, workers)
    return len(set(pool.map(_started, range(workers))))


def shutdown_pool() -> None:
    """Stop the workers of :func:`worker_pool` (if any)."""
    while _POOL:
        _, pool = _POOL.popitem()
        pool.shutdown(wait=True, cancel_futures=True)


def witness_batch(circuit: PorepLike, inputs_list, workers: int | None = 1, montgomery: bool = True):
    """Witnesses of ``len(inputs_list)`` partitions of ``circuit`` (each ``inputs`` from ``sample_inputs``):
    ``(z, publics)`` with ``z`` the ``(8, P, num_vars)`` uint32 Fr limbs of :func:`~.r1cs.stack_z` (Montgomery form
    unless ``montgomery=False``), equal to stacking the builder's witnesses, and ``publics`` the public inputs of
    each partition.

    ``workers`` > 1 splits the ``P * challenges`` (partition, challenge) instances into ``min(workers, P *
    challenges)`` contiguous ranges (:func:`work_spans`; a partition's challenges may go to several workers), each
    synthesized by a worker of :func:`worker_pool` (kept warm between calls) writing its columns straight into a
    shared file under ``/dev/shm``; the array returned then maps that (already unlinked) file. The result is the
    same for every ``workers``. ``workers=None``: one per CPU.
    """
    z, publics, _ = _witness_batch(circuit, inputs_list, workers, montgomery)
    return z, publics


def partition_witnesses(circuit: PorepLike, inputs_list, workers: int | None = 1):
    """:func:`witness_batch` as one :class:`~.r1cs.PackedWitness` per partition (views of one ``(8, P, n)``
    array; what :func:`cuzk_jax.groth16.prover.prove` takes) and the public inputs."""
    z, publics, counts = _witness_batch(circuit, inputs_list, workers, True)
    return [PackedWitness(z[:, p, :], counts["num_inputs"], counts["num_constraints"])
            for p in range(len(inputs_list))], publics


def sampled_witness_batch(circuit: PorepLike, partitions: int, seed: int, workers: int | None = 1,
                          montgomery: bool = True):
    """:func:`witness_batch` of partitions ``0 .. partitions - 1`` of sector ``seed`` (inputs from
    ``circuit.sample_inputs(p, seed)``), each partition sampled by a worker rather than by the caller: ``(z,
    publics)``, ``z`` the ``(8, P, num_vars)`` uint32 limbs."""
    z, publics, _ = _witness_batch(circuit, None, workers, montgomery, (partitions, seed))
    return z, publics


def sector_witnesses(circuit: PorepLike, partitions: int, seed: int, workers: int | None = 1):
    """:func:`partition_witnesses` of partitions ``0 .. partitions - 1`` of sector ``seed``, sampled by the workers
    too (one task per partition: the stand-in sealing data costs about as much native hashing as the witness costs
    gadget work), then synthesized in the spans of :func:`witness_batch`."""
    z, publics, counts = _witness_batch(circuit, None, workers, True, (partitions, seed))
    return [PackedWitness(z[:, p, :], counts["num_inputs"], counts["num_constraints"])
            for p in range(partitions)], publics


def work_spans(P: int, C: int, workers: int) -> list[tuple[int, int]]:
    """The work units of :func:`witness_batch` for ``P`` partitions of ``C`` challenges on ``workers`` workers:
    ``min(workers, P * C)`` contiguous, near-equal ranges ``(k0, k1)`` of the flat instance order (instance ``k`` =
    challenge ``k % C`` of partition ``k // C``), so a partition's challenges may be split between workers.

    One range per worker, not more: a batch's cost is a fixed part (the gadgets' per-gate Python work, the same for
    one instance or many) plus a part linear in its instances (values and the write into ``z``)."""
    n = min(max(1, int(workers)), P * C)
    return [(int(g[0]), int(g[-1]) + 1) for g in np.array_split(np.arange(P * C), n)]


def _witness_batch(circuit, inputs_list, workers, montgomery, sample=None):
    if not isinstance(circuit, PorepLike):
        raise BadInput(f"witness_batch: needs a porep_like circuit, got {type(circuit).__name__}")
    P = len(inputs_list) if sample is None else int(sample[0])
    if P < 1:
        raise BadInput("witness_batch: no partitions")
    workers = (os.cpu_count() or 1) if workers is None else max(1, int(workers))
    C = circuit.params["challenges"]
    spans = work_spans(P, C, workers)
    if len(spans) == 1:
        if sample is not None:
            inputs_list = [circuit.sample_inputs(p, sample[1]) for p in range(P)]
        publics = [circuit.public_inputs(inp) for inp in inputs_list]
        cs, counts = synthesize_batch(circuit, inputs_list)
        z = alloc_z((8, P, counts["num_vars"]))
        fill_z(cs, counts, P, z, montgomery)
        return z, publics, counts
    counts = block_counts(circuit)
    shape = (8, P, counts["num_vars"])
    with shared_z(shape) as (path, mapped):
        slim = circuit.without_r1cs()
        pool = worker_pool(circuit, workers)
        try:
            if sample is None:
                inputs_list = list(inputs_list)
                sampling = {}
            else:
                # each partition is sampled once, by one worker (sampling a partition costs about as much as its
                # witness and cannot be split by challenge: its trees cover all its challenges); a span starts as
                # soon as the partitions it touches are sampled
                inputs_list = [None] * P
                sampling = {pool.submit(_sample_task, slim, p, sample[1]): p for p in range(P)}
            waiting, futs = list(spans), []
            while True:
                ready = [sp for sp in waiting
                         if all(inputs_list[p] is not None for p in range(sp[0] // C, (sp[1] - 1) // C + 1))]
                for sp in ready:
                    first, last = sp[0] // C, (sp[1] - 1) // C
                    futs.append(pool.submit(_task, slim, inputs_list[first:last + 1], first, sp, montgomery, path,
                                            shape))
                    waiting.remove(sp)
                if not sampling:
                    break
                done, _ = concurrent.futures.wait(sampling, return_when=concurrent.futures.FIRST_COMPLETED)
                for f in done:
                    inputs_list[sampling.pop(f)] = f.result()
            for f in futs:
                if f.result()["num_vars"] != shape[2]:
                    raise AssertionError("witness_batch: a worker's shape differs from the counting run")
        except concurrent.futures.process.BrokenProcessPool:
            shutdown_pool()  # a dead worker breaks the pool: the next call starts a fresh one
            raise
        z = mapped()
    publics = [circuit.public_inputs(inp) for inp in inputs_list]
    return z, publics, counts
