"""WinningPoSt: proof that one sector's replica is still stored, inside a block time (FallbackPoSt, one sector).

Filecoin (rust-fil-proofs ``filecoin-proofs/src/constants.rs``, specs.filecoin.io "Winning PoSt"): a miner elected
to produce a block proves ``WINNING_POST_SECTOR_COUNT = 1`` sector with ``WINNING_POST_CHALLENGE_COUNT = 66``
challenged leaves, in ONE partition (one 192-byte Groth16 proof). The relation is
:class:`~.fallback_post.FallbackPost`'s: ``comm_r = Poseidon(comm_c, comm_r_last)`` and, per challenge, inclusion
of the challenged replica leaf in the arity-8 Poseidon tree ``comm_r_last``; challenges are
``sha256(randomness || sector_id || n)`` mod the sector's nodes (see :mod:`.fallback_post` for the derivation and
the documented differences).

==============  ========  ==========  ======  =====================================================================
preset          sectors   challenges  levels  what
==============  ========  ==========  ======  =====================================================================
``tiny``        1         2           2       tests (64-leaf tree)
``small``       1         8           4       tests and CPU benchmarks (4096-leaf tree)
``sector_2k``   1         66          2       Filecoin's 2 KiB test sector: 64 nodes = 8^2 (the real 2 KiB tree)
``full``        1         66          10      Filecoin's 32 GiB WinningPoSt: 2^30 nodes = 8^10
==============  ========  ==========  ======  =====================================================================

Priority class ``winning_post`` (:mod:`cuzk_jax.priorities`): the most urgent work. ``PARTITIONS = 1``: Filecoin
proves WinningPoSt in one partition (``scripts/prove.py --circuit=winning_post --partitions=1``).
"""

from __future__ import annotations

from .fallback_post import FallbackPost


class WinningPost(FallbackPost):
    name = "winning_post"
    PRIORITY_CLASS = "winning_post"
    PARTITIONS = 1  # Filecoin's partitions per WinningPoSt proof
    DEFAULT_PRESET = "tiny"
    PRESETS = {
        "tiny": {"sectors": 1, "challenges": 2, "levels": 2, "doc": "1 sector, 2 challenges, 64-leaf tree (tests)"},
        "small": {"sectors": 1, "challenges": 8, "levels": 4, "doc": "1 sector, 8 challenges, 4096-leaf tree"},
        "sector_2k": {"sectors": 1, "challenges": 66, "levels": 2,
                      "doc": "Filecoin's 66 challenges over a 2 KiB sector (64 nodes)"},
        "full": {"sectors": 1, "challenges": 66, "levels": 10,
                 "doc": "Filecoin's 32 GiB WinningPoSt: 66 challenges, 2^30-node arity-8 tree"},
    }
