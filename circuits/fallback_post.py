"""Filecoin's FallbackPoSt relation, shared by :mod:`.winning_post` and :mod:`.window_post`.

Both PoSt kinds are ONE circuit in rust-fil-proofs (``storage-proofs-post/src/fallback/circuit.rs``), instantiated
with different ``sector_count`` and ``challenge_count``. Per partition it proves, for each of ``sectors`` sectors:

1. ``comm_r = Poseidon(comm_c, comm_r_last)`` (comm_r public; comm_c and comm_r_last private);
2. for each of ``challenges`` challenged leaves: inclusion of the replica leaf (private) at the challenged index
   (public) in the arity-8 Poseidon replica tree whose root is ``comm_r_last`` (the private path; the index is
   decomposed into ``3 * levels`` bits that steer the path, so an index outside the tree is unsatisfiable).

Public inputs (z order, as FallbackPoSt's ``generate_public_inputs``): per sector ``comm_r``, then its challenged
leaf indices. Constraints per challenge: ``levels`` arity-8 hashes + ``insert`` (~424 each) + ``3 * levels + 1``
for the index bits; per sector one arity-2 hash (240) and one equality.

**Challenges** are derived outside the circuit, by prover and verifier alike, as FallbackPoSt's
``generate_leaf_challenge`` does: ``le_u64(sha256(le32(randomness) || le_u64(sector_id) || le_u64(n))[0..8]) mod
nodes`` for challenge ``n`` of a sector (:func:`leaf_challenge`). Simplification (documented): ``n`` counts the
challenges of one sector (Filecoin's v1.1 API); Filecoin's WindowPoSt v1 numbered them across a partition.

**Sectors** are a vectorised axis of the native witness code: the sectors of a partition are drawn in chunks of
:data:`SAMPLE_CHUNK`, each from its own seed; within a chunk the challenges are one ``(sectors, challenges)`` array
and the replica trees one :class:`~.native_batch.SparseForest` (each level of all its sectors hashed in one batch).
Every sector is the same block of gates (:meth:`FallbackPost.synthesize_sector`), so the R1CS is built by tiling
one synthesized block (:func:`.tiling.tiled_r1cs`, equal to the builder's) and the witness is made block range by
block range in worker processes (:mod:`.block_witness`, the builder per sector). Running one sector block over
all sectors with numpy object arrays (:mod:`.vector_witness`) gave the same wires but no gain for this
Poseidon-only circuit (measurements in ``docs/proof_kinds.md``), so it is not used.

Differences from Filecoin (same constraint structure, different constants): Poseidon here is circomlib-framed
(:mod:`.poseidon`), not neptune's, so digests differ; 64 GiB sectors' extra arity-2 top level is not modelled
(every level has arity 8); a partition whose last sectors are padding repeats real sectors in Filecoin, here every
sector is drawn independently.
"""

from __future__ import annotations

import hashlib

import numpy as np

from cuzk_jax.errors import BadInput
from cuzk_jax.reference.constants import R

from .base import Circuit
from .gadgets import merkle
from .gadgets.num import alloc_input_num, alloc_num, enforce_equal, to_bits_le
from .gadgets.poseidon import poseidon_hash
from .native_batch import SparseForest, poseidon_many, rand_fr, unique_leaves
from .sha256_native import fr_to_bytes

SAMPLE_CHUNK = 16  # sectors drawn from one seed (:meth:`FallbackPost.sample_blocks`)
ARITY = 8  # Filecoin's replica tree (TreeR): base arity 8 (32 GiB: U8, U8, U0 -> 10 levels of arity 8)


def leaf_challenge(randomness: int, sector_id: int, n: int, nodes: int) -> int:
    """FallbackPoSt's ``generate_leaf_challenge``: the ``n``-th challenged leaf of ``sector_id``."""
    h = hashlib.sha256(fr_to_bytes(randomness) + sector_id.to_bytes(8, "little") + n.to_bytes(8, "little")).digest()
    return int.from_bytes(h[:8], "little") % nodes


def leaf_challenges(randomness: int, sector_ids, challenges: int, nodes: int) -> np.ndarray:
    """``(len(sector_ids), challenges)`` int64 array of :func:`leaf_challenge`."""
    return np.array([[leaf_challenge(randomness, int(s), n, nodes) for n in range(challenges)] for s in sector_ids],
                    dtype=np.int64).reshape(len(sector_ids), challenges)


def sample_sectors(rng, sector_ids, challenges: int, levels: int, randomness: int) -> dict:
    """Replica trees for ``sector_ids`` (random leaves and comm_c) and the challenged leaves' witnesses."""
    gen = np.random.default_rng(rng.getrandbits(128))
    s = len(sector_ids)
    idx = leaf_challenges(randomness, sector_ids, challenges, ARITY ** levels)
    tree, index, inverse = unique_leaves(idx)
    values = rand_fr(gen, len(tree))
    forest = SparseForest("poseidon", ARITY, levels, s, tree, index, values, gen)
    comm_c = rand_fr(gen, s)
    comm_r_last = forest.roots
    return {
        "randomness": randomness,
        "sector_ids": [int(x) for x in sector_ids],
        "comm_r": poseidon_many([comm_c, comm_r_last]),
        "comm_c": comm_c,
        "comm_r_last": comm_r_last,
        "challenges": idx,
        "leaves": values[inverse],
        "paths": forest.paths(np.repeat(np.arange(s), challenges).reshape(s, challenges), idx),
    }


class FallbackPost(Circuit):
    """The FallbackPoSt circuit (see the module docstring); parameters ``sectors``, ``challenges``, ``levels``
    (the replica tree has ``8 ** levels`` leaves)."""

    name = "fallback_post"
    DEFAULT_PRESET = "tiny"
    PRESETS = {"tiny": {"sectors": 2, "challenges": 2, "levels": 2, "doc": "two sectors, two challenges each"}}

    def _validate(self):
        p = self.params
        for key in ("sectors", "challenges", "levels"):
            if not isinstance(p[key], int) or isinstance(p[key], bool) or p[key] < 1:
                raise BadInput(f"{self.name}: {key} must be a positive int, got {p[key]!r}")
        if 3 * p["levels"] > 62:
            raise BadInput(f"{self.name}: levels must be <= 20 (leaf indices are 64-bit)")

    @property
    def nodes(self) -> int:
        """Leaves of a sector's replica tree (32 GiB sector: 2^30 nodes of 32 bytes)."""
        return ARITY ** self.params["levels"]

    # -- witness sampling ---------------------------------------------------------------------------------------------
    def sample_inputs(self, partition: int = 0, seed: int = 0) -> dict:
        """A random instance: ``randomness`` and sector ids from ``(partition, seed)``; the partition proves sectors
        ``partition * sectors ...`` of a provider whose first sector id is drawn from the seed. Sectors are drawn in
        chunks of :data:`SAMPLE_CHUNK`, each from its own seed, so that a worker can sample just its sectors
        (:meth:`sample_blocks`); the instance is the chunks' concatenation."""
        return self.sample_blocks(partition, seed, 0, self.params["sectors"])[0]

    def sample_blocks(self, partition: int, seed: int, b0: int, b1: int) -> tuple[dict, int]:
        """``(inputs, b0)``: sectors ``b0 .. b1 - 1`` of :meth:`sample_inputs`'s instance alone (same values; the
        per-sector arrays hold those sectors only) -- a :mod:`.block_witness` work unit's inputs."""
        p = self.params
        if not 0 <= b0 < b1 <= p["sectors"]:
            raise BadInput(f"{self.name}: sector range [{b0}, {b1}) outside [0, {p['sectors']})")
        rng = self._rng(partition, seed)
        randomness = rng.randrange(R)
        first = rng.randrange(1 << 40) + partition * p["sectors"]
        k0, k1 = b0 // SAMPLE_CHUNK, (b1 - 1) // SAMPLE_CHUNK + 1
        chunks = []
        for k in range(k0, k1):
            ids = range(first + k * SAMPLE_CHUNK, first + min(p["sectors"], (k + 1) * SAMPLE_CHUNK))
            chunks.append(sample_sectors(self._rng(partition, f"{seed}:chunk{k}"), ids, p["challenges"],
                                         p["levels"], randomness))
        lo, hi = b0 - k0 * SAMPLE_CHUNK, b1 - k0 * SAMPLE_CHUNK
        out = {"randomness": randomness, "sector_ids": [i for c in chunks for i in c["sector_ids"]][lo:hi]}
        for key in ("comm_r", "comm_c", "comm_r_last", "challenges", "leaves", "paths"):
            out[key] = np.concatenate([np.asarray(c[key]) for c in chunks])[lo:hi]
        return out, b0

    def public_inputs(self, inputs: dict) -> list[int]:
        out = []
        for s in range(self.params["sectors"]):
            out.append(int(inputs["comm_r"][s]))
            out += [int(c) for c in inputs["challenges"][s]]
        return out

    def check_challenges(self, inputs: dict) -> bool:
        """The verifier's side: the challenges in ``inputs`` are the ones ``randomness`` and the sector ids give."""
        want = leaf_challenges(inputs["randomness"], inputs["sector_ids"], self.params["challenges"], self.nodes)
        return bool(np.array_equal(np.asarray(inputs["challenges"], dtype=np.int64), want))

    # -- synthesis ----------------------------------------------------------------------------------------------------
    def synthesize(self, cs, inputs=None):
        for s in range(self.params["sectors"]):
            with cs.namespace(f"sector_{s}"):
                self.synthesize_sector(cs, _sector_getter(inputs, s))

    def synthesize_sector(self, cs, get) -> None:
        """One sector's block (inside the caller's ``sector_<s>`` namespace); ``get(key, *index)`` reads the
        sector's own value (None in structure mode). Every sector block has the same gates."""
        levels = self.params["levels"]
        comm_r = alloc_input_num(cs, get("comm_r"), "comm_r")
        comm_c = alloc_num(cs, get("comm_c"), "comm_c")
        comm_r_last = alloc_num(cs, get("comm_r_last"), "comm_r_last")
        with cs.namespace("comm_r"):
            enforce_equal(cs, poseidon_hash(cs, [comm_c, comm_r_last]), comm_r, "comm_r = H(comm_c, comm_r_last)")
        for j in range(self.params["challenges"]):
            with cs.namespace(f"challenge_{j}"):
                index = alloc_input_num(cs, get("challenges", j), "index")
                with cs.namespace("index_bits"):
                    bits = to_bits_le(cs, index, 3 * levels)
                leaf = alloc_num(cs, get("leaves", j), "leaf")
                path = [[alloc_num(cs, get("paths", j, lvl, k), f"sibling_{lvl}_{k}") for k in range(ARITY - 1)]
                        for lvl in range(levels)]
                with cs.namespace("comm_r_last"):
                    merkle.enforce_inclusion(cs, "poseidon", ARITY, leaf, path, bits, comm_r_last)

    # -- header and identical blocks (:mod:`.tiling`, :mod:`.block_witness`): one block per sector, no header --------
    BLOCK_PREFIX = "sector"
    BLOCK_ALIGN = SAMPLE_CHUNK  # a work unit samples whole chunks

    @property
    def block_count(self) -> int:
        return self.params["sectors"]

    def uses_blocks(self) -> bool:
        return type(self).synthesize is FallbackPost.synthesize

    def block_synthesis(self, inputs, offset: int = 0):
        """``(header, block)`` for :mod:`.block_witness` and :meth:`build_structure`: no header; block ``j`` is
        sector ``j``, read from ``inputs``' sector ``j - offset`` (None inputs: structure)."""
        return (lambda cs: None,
                lambda cs, shared, j: self.synthesize_sector(cs, _sector_getter(inputs, j - offset)))


def _sector_getter(inputs, s: int):
    """``get(key, *index)``: sector ``s``'s value of ``inputs[key][s][index...]`` as an int (None without inputs)."""
    def get(key, *idx):
        if inputs is None:
            return None
        v = inputs[key][s]
        for i in idx:
            v = v[i]
        return int(v)
    return get
