"""SnapDeals (EmptySectorUpdate): a committed-capacity replica re-encoded with new data, proved per partition.

Filecoin (rust-fil-proofs ``storage-proofs-update``: ``vanilla.rs``, ``circuit.rs``, ``constants.rs``,
``challenges.rs``; FIP-0019). A CC sector's replica ``R_old`` (tree ``comm_r_last_old``) is updated with data ``D``
(tree ``comm_d_new``) into ``R_new[c] = R_old[c] + D[c] * rho(c)`` where

* ``phi = Poseidon(comm_d_new, comm_r_old)``, ``rho(c) = Poseidon(phi, high(c))`` and ``high(c)`` is the ``h`` most
  significant bits of the node index ``c`` (``vanilla::phi`` / ``vanilla::rho``);
* ``h = hs[i]`` where ``h_select = 2^i`` is a public input (six allowed values ``hs``; 32 GiB: 7..12);
* ``comm_r_old = Poseidon(comm_c, comm_r_last_old)``, ``comm_r_new = Poseidon(comm_c, comm_r_last_new)`` (the column
  commitment comm_c is kept from the original sealing).

Per partition ``k`` the circuit proves, for each challenge ``c`` (whose top ``log2(partitions)`` bits are ``k``):
inclusion of ``R_old[c]`` in the arity-8 Poseidon tree ``comm_r_last_old``, of ``R_new[c]`` in ``comm_r_last_new``,
of ``D[c]`` in the binary tree ``comm_d_new`` (SHA-256 as Filecoin's TreeD, or Poseidon in the small presets), and
the encoding ``R_new[c] - R_old[c] = D[c] * rho(c)`` (one constraint, named ``encode``); plus the two comm_r
relations, phi, and ``h_select`` one-hot (6 bits summing to one).

Public inputs (z order): Filecoin's ``k, comm_r_old, comm_d_new, comm_r_new, h_select``, then the partition's
challenges.

==============  ======  ==========  ==========  ==========  =================================================
preset          levels  partitions  challenges  TreeD hash  what
==============  ======  ==========  ==========  ==========  =================================================
``tiny``        2       16          2           poseidon    tests (64 nodes)
``small``       3       16          4           poseidon    tests and CPU benchmarks (512 nodes)
``sector_16m``  6       4           10          sha256      Filecoin's 16 MiB-class constants (8^6 = 2^18 nodes)
``d20p``        10      16          62          poseidon    32 GiB shape, Poseidon TreeD: about 2^20 constraints
``full``        10      16          86          sha256      Filecoin's 32 GiB update: 16 partitions x 86
==============  ======  ==========  ==========  ==========  =================================================

The small presets keep Filecoin's 32 GiB partition count (16), so a sector of the default 10 partitions
(``scripts/prove.py``) fits; Filecoin's own small test sectors have 1-4.

Simplifications (documented; the constraint structure otherwise follows ``circuit.rs``):

* Challenges are public inputs, derived natively by :func:`update_challenges` exactly as ``challenges.rs`` does
  (``digest = Poseidon(seed, digest_index)``, ``254 // random_bits`` challenges per digest, partition bits on top)
  but Filecoin derives them *in the circuit* from ``comm_r_new``. A sampled instance uses a random seed, not
  ``comm_r_new``: its trees are sparse (only the challenged paths are hashed), so it cannot commit to ``comm_r_new``
  before it knows its challenges; a prover with the whole sector would pass ``comm_r_new`` as the seed.
* Filecoin's apex tree (the top levels of TreeD shared by a partition's challenges) is not used: every challenge
  carries its full TreeD path.
* Poseidon is circomlib-framed (:mod:`.poseidon`), not neptune's "gen randomness" domain, so digests differ.

Synthesis: :meth:`SnapUpdate.synthesize_header` (inputs, comm_r relations, phi, h_select) then one
:meth:`SnapUpdate.synthesize_challenge` block per challenge, the same gates for every challenge, so the R1CS is
tiled from one block (:func:`.tiling.tiled_r1cs`; equal to the builder's).

Priority class ``snap_deals`` (:mod:`cuzk_jax.priorities`): bulk work, after PoRep. All partitions of one sector
(``sample_inputs(k, seed)`` for ``k < partitions``) share the sector's trees and commitments.
"""

from __future__ import annotations

import numpy as np

from cuzk_jax.errors import BadInput
from cuzk_jax.reference.constants import R

from . import poseidon as native_poseidon
from .base import Circuit
from .gadgets import merkle
from .gadgets.num import Num, alloc_input_num, alloc_num, enforce_equal, from_bits_le, mul, to_bits_le
from .gadgets.poseidon import poseidon_hash
from .native_batch import SparseForest, poseidon_many, rand_fr

ARITY = 8
H_SELECT_BITS = 6  # Filecoin: six allowed h values, h_select = 2^i
_SECTOR_CACHE: dict = {}  # (parameters, seed, tamper_rho) -> sampled sector; at most 4 kept


def update_challenges(seed: int, k: int, partitions: int, challenges: int, node_bits: int) -> list[int]:
    """``challenges.rs``: the challenges of partition ``k`` (each in partition ``k``'s chunk of the nodes); Filecoin's
    ``seed`` is ``comm_r_new`` (see the module docstring)."""
    part_bits = partitions.bit_length() - 1
    rb = node_bits - part_bits  # random bits per challenge
    per_digest = 254 // rb  # Fr::CAPACITY // random_bits
    digests = -(-challenges // per_digest)
    out = []
    for d in range(digests):
        digest = native_poseidon.hash([seed, k * digests + d])
        for i in range(per_digest):
            if len(out) == challenges:
                break
            out.append(((digest >> (i * rb)) & ((1 << rb) - 1)) | (k << rb))
    return out


def _bit(b) -> Num:
    """A Boolean as a Num (free)."""
    return Num(b.lc(), b.value)


def phi_native(comm_d_new: int, comm_r_old: int) -> int:
    return native_poseidon.hash([comm_d_new, comm_r_old])


def rho_native(phi: int, high: int) -> int:
    return native_poseidon.hash([phi, high])


class SnapUpdate(Circuit):
    name = "snap_update"
    PRIORITY_CLASS = "snap_deals"
    DEFAULT_PRESET = "tiny"
    PRESETS = {
        "tiny": {"levels": 2, "partitions": 16, "challenges": 2, "hs": (1, 1, 2, 2, 3, 3), "data_hash": "poseidon",
                 "doc": "64 nodes, 16 partitions x 2 challenges, Poseidon TreeD (tests)"},
        "small": {"levels": 3, "partitions": 16, "challenges": 4, "hs": (1, 2, 3, 4, 5, 6), "data_hash": "poseidon",
                  "doc": "512 nodes, 16 partitions x 4 challenges, Poseidon TreeD"},
        "sector_16m": {"levels": 6, "partitions": 4, "challenges": 10, "hs": (7, 8, 9, 10, 11, 12),
                       "data_hash": "sha256", "doc": "2^18 nodes, Filecoin's small-sector constants, SHA-256 TreeD"},
        "d20p": {"levels": 10, "partitions": 16, "challenges": 62, "hs": (7, 8, 9, 10, 11, 12),
                 "data_hash": "poseidon", "doc": "32 GiB shape, 62 challenges, Poseidon TreeD: about 2^20 constraints"},
        "full": {"levels": 10, "partitions": 16, "challenges": 86, "hs": (7, 8, 9, 10, 11, 12),
                 "data_hash": "sha256", "doc": "Filecoin's 32 GiB EmptySectorUpdate: 16 partitions x 86 challenges"},
    }

    def _validate(self):
        p = self.params
        for key in ("levels", "partitions", "challenges"):
            if not isinstance(p[key], int) or isinstance(p[key], bool) or p[key] < 1:
                raise BadInput(f"snap_update: {key} must be a positive int, got {p[key]!r}")
        if p["partitions"] & (p["partitions"] - 1):
            raise BadInput(f"snap_update: partitions must be a power of two, got {p['partitions']}")
        if 3 * p["levels"] > 62:
            raise BadInput("snap_update: levels must be <= 20")
        if self.node_bits - (p["partitions"].bit_length() - 1) < 1:
            raise BadInput("snap_update: more partitions than nodes")
        hs = tuple(p["hs"])
        if len(hs) != H_SELECT_BITS or not all(isinstance(h, int) and 1 <= h <= self.node_bits for h in hs):
            raise BadInput(f"snap_update: hs must be {H_SELECT_BITS} ints in [1, {self.node_bits}], got {hs!r}")
        if p["data_hash"] not in merkle.HASHES:
            raise BadInput(f"snap_update: data_hash must be one of {merkle.HASHES}, got {p['data_hash']!r}")

    @property
    def node_bits(self) -> int:
        return 3 * self.params["levels"]

    # -- witness sampling ---------------------------------------------------------------------------------------------
    def sample_sector(self, seed: int = 0, *, tamper_rho: bool = False) -> dict:
        """Every partition's witness data of sector ``seed`` (cached per process, so the partitions of a sector --
        also those a synthesis worker gets one task at a time -- sample it once).

        ``tamper_rho``: encode ``R_new`` with ``rho(phi, high + 1)`` (a negative-test instance whose trees and
        commitments are all consistent, so only the ``encode`` constraints fail)."""
        key = (repr(sorted(self.params.items())), seed, tamper_rho)
        cache = _SECTOR_CACHE
        if key in cache:
            return cache[key]
        p = self.params
        nb, parts, chal = self.node_bits, p["partitions"], p["challenges"]
        rng = self._rng(0, seed)
        gen = np.random.default_rng(rng.getrandbits(128))
        challenge_seed = rng.randrange(R)
        h_index = rng.randrange(H_SELECT_BITS)
        h = p["hs"][h_index]
        cs_all = np.array([update_challenges(challenge_seed, k, parts, chal, nb) for k in range(parts)],
                          dtype=np.int64)  # (partitions, challenges)
        nodes = np.unique(cs_all)
        inverse = np.searchsorted(nodes, cs_all)
        zeros = np.zeros(len(nodes), dtype=np.int64)
        old = rand_fr(gen, len(nodes))
        data_bound = (1 << 254) if p["data_hash"] == "sha256" else R
        data = rand_fr(gen, len(nodes), data_bound)
        tree_old = SparseForest("poseidon", ARITY, p["levels"], 1, zeros, nodes, old, gen)
        tree_d = SparseForest(p["data_hash"], 2, nb, 1, zeros, nodes, data, gen)
        comm_c = int(rand_fr(gen, 1)[0])
        comm_r_last_old = int(tree_old.roots[0])
        comm_r_old = native_poseidon.hash([comm_c, comm_r_last_old])
        comm_d_new = int(tree_d.roots[0])
        phi = phi_native(comm_d_new, comm_r_old)
        high = (nodes >> (nb - h)) + (1 if tamper_rho else 0)
        rho = poseidon_many([np.full(len(nodes), phi, dtype=object), high.astype(object)])
        new = (old + data * rho) % R
        tree_new = SparseForest("poseidon", ARITY, p["levels"], 1, zeros, nodes, new, gen)
        comm_r_last_new = int(tree_new.roots[0])
        sector = {
            "challenge_seed": challenge_seed, "h_select": 1 << h_index, "h": h,
            "comm_c": comm_c, "comm_r_last_old": comm_r_last_old, "comm_r_old": comm_r_old,
            "comm_d_new": comm_d_new, "comm_r_last_new": comm_r_last_new,
            "comm_r_new": native_poseidon.hash([comm_c, comm_r_last_new]),
            "challenges": cs_all, "old": old[inverse], "data": data[inverse], "new": new[inverse],
            "old_paths": tree_old.paths(np.zeros_like(cs_all), cs_all),
            "data_paths": tree_d.paths(np.zeros_like(cs_all), cs_all),
            "new_paths": tree_new.paths(np.zeros_like(cs_all), cs_all),
        }
        if len(cache) >= 4:
            cache.clear()
        cache[key] = sector
        return sector

    def sample_inputs(self, partition: int = 0, seed: int = 0, *, tamper_rho: bool = False) -> dict:
        """Partition ``partition`` of sector ``seed`` (see :meth:`sample_sector`)."""
        if not 0 <= partition < self.params["partitions"]:
            raise BadInput(f"snap_update: partition {partition} out of range [0, {self.params['partitions']})")
        s = self.sample_sector(seed, tamper_rho=tamper_rho)
        out = {k: s[k] for k in ("challenge_seed", "h_select", "h", "comm_c", "comm_r_last_old", "comm_r_old",
                                  "comm_d_new", "comm_r_last_new", "comm_r_new")}
        out["k"] = partition
        for k in ("challenges", "old", "data", "new", "old_paths", "data_paths", "new_paths"):
            out[k] = s[k][partition].copy()  # the sector stays cached: callers may edit their copy
        return out

    def public_inputs(self, inputs: dict) -> list[int]:
        return ([int(inputs[k]) for k in ("k", "comm_r_old", "comm_d_new", "comm_r_new", "h_select")]
                + [int(c) for c in inputs["challenges"]])

    def check_challenges(self, inputs: dict) -> bool:
        """The verifier's side: the challenges are :func:`update_challenges` of the seed and partition."""
        p = self.params
        want = update_challenges(inputs["challenge_seed"], inputs["k"], p["partitions"], p["challenges"],
                                 self.node_bits)
        return [int(c) for c in inputs["challenges"]] == want

    # -- synthesis ----------------------------------------------------------------------------------------------------
    def synthesize(self, cs, inputs=None):
        get = _getter(inputs)
        shared = self.synthesize_header(cs, get)
        for j in range(self.params["challenges"]):
            with cs.namespace(f"challenge_{j}"):
                self.synthesize_challenge(cs, shared, get, j)

    def synthesize_header(self, cs, get) -> dict:
        """Public inputs, comm_c and the two roots, the comm_r relations, phi and h_select (one-hot)."""
        k = alloc_input_num(cs, get("k"), "k")
        comm_r_old = alloc_input_num(cs, get("comm_r_old"), "comm_r_old")
        comm_d_new = alloc_input_num(cs, get("comm_d_new"), "comm_d_new")
        comm_r_new = alloc_input_num(cs, get("comm_r_new"), "comm_r_new")
        h_select = alloc_input_num(cs, get("h_select"), "h_select")
        del k  # Filecoin binds k through the in-circuit challenge derivation; here the verifier checks it
        comm_c = alloc_num(cs, get("comm_c"), "comm_c")
        root_old = alloc_num(cs, get("comm_r_last_old"), "comm_r_last_old")
        root_new = alloc_num(cs, get("comm_r_last_new"), "comm_r_last_new")
        with cs.namespace("comm_r_old"):
            enforce_equal(cs, poseidon_hash(cs, [comm_c, root_old]), comm_r_old, "comm_r_old = H(comm_c, root_old)")
        with cs.namespace("comm_r_new"):
            enforce_equal(cs, poseidon_hash(cs, [comm_c, root_new]), comm_r_new, "comm_r_new = H(comm_c, root_new)")
        with cs.namespace("phi"):
            phi = poseidon_hash(cs, [comm_d_new, comm_r_old])
        with cs.namespace("h_select"):
            sel = to_bits_le(cs, h_select, H_SELECT_BITS)
            enforce_equal(cs, sum((_bit(b) for b in sel), Num.constant(0)), Num.constant(1), "one-hot")
        return {"comm_d_new": comm_d_new, "root_old": root_old, "root_new": root_new, "phi": phi, "sel": sel}

    def synthesize_challenge(self, cs, shared, get, j: int) -> None:
        """Challenge ``j``'s block (inside the caller's ``challenge_<j>`` namespace): the same gates for every j."""
        p = self.params
        nb, levels = self.node_bits, p["levels"]

        def path(key, arity, n_levels):
            return [[alloc_num(cs, get(key, j, lvl, s), f"sibling_{lvl}_{s}") for s in range(arity - 1)]
                    for lvl in range(n_levels)]

        c = alloc_input_num(cs, get("challenges", j), "index")
        with cs.namespace("index_bits"):
            bits = to_bits_le(cs, c, nb)
        with cs.namespace("high"):
            high = Num.constant(0)  # sum_i h_select_i * (c >> (node_bits - hs[i]))
            for i, h in enumerate(p["hs"]):
                high = high + mul(cs, _bit(shared["sel"][i]), from_bits_le(bits[nb - h:]), f"hs_{i}")
        with cs.namespace("rho"):
            rho = poseidon_hash(cs, [shared["phi"], high])
        old = alloc_num(cs, get("old", j), "old")
        data = alloc_num(cs, get("data", j), "data")
        new = alloc_num(cs, get("new", j), "new")
        cs.enforce_raw(data.terms(), rho.terms(), (new - old).terms(), "encode")  # R_new - R_old = D * rho
        with cs.namespace("comm_r_last_old"):
            merkle.enforce_inclusion(cs, "poseidon", ARITY, old, path("old_paths", ARITY, levels), bits,
                                     shared["root_old"])
        with cs.namespace("comm_r_last_new"):
            merkle.enforce_inclusion(cs, "poseidon", ARITY, new, path("new_paths", ARITY, levels), bits,
                                     shared["root_new"])
        with cs.namespace("comm_d_new"):
            merkle.enforce_inclusion(cs, p["data_hash"], 2, data, path("data_paths", 2, nb), bits,
                                     shared["comm_d_new"])

    # -- header and identical blocks (:mod:`.tiling`, :mod:`.block_witness`): one block per challenge ---------------
    BLOCK_PREFIX = "challenge"
    BLOCK_ALIGN = 1

    @property
    def block_count(self) -> int:
        return self.params["challenges"]

    def uses_blocks(self) -> bool:
        return type(self).synthesize is SnapUpdate.synthesize

    def sample_blocks(self, partition: int, seed: int, b0: int, b1: int) -> tuple[dict, int]:
        """``(inputs, 0)``: the partition's whole inputs (the sector is sampled once per process and cached)."""
        return self.sample_inputs(partition, seed), 0

    def block_synthesis(self, inputs, offset: int = 0):
        """``(header, block)`` for :mod:`.block_witness` and :meth:`build_structure` (``inputs`` are a whole
        partition's, so ``offset`` is 0; None inputs: structure)."""
        get = _getter(inputs)
        return (lambda cs: self.synthesize_header(cs, get),
                lambda cs, shared, j: self.synthesize_challenge(cs, shared, get, j))


def _getter(inputs):
    """``get(key, *index)``: ``int(inputs[key][index...])``, or None without inputs (structure mode)."""
    def get(key, *idx):
        if inputs is None:
            return None
        v = inputs[key]
        for i in idx:
            v = v[i]
        return int(v)
    return get
