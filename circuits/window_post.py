"""WindowPoSt: proof that every sector of a partition is still stored, within its deadline (FallbackPoSt).

Filecoin (rust-fil-proofs ``filecoin-proofs/src/constants.rs``, specs.filecoin.io "Window PoSt"): each partition
proof covers ``WINDOW_POST_SECTOR_COUNT`` sectors (2349 for 32 GiB sectors, 2300 for 64 GiB) with
``WINDOW_POST_CHALLENGE_COUNT = 10`` challenges per sector; a deadline with more sectors is several partitions,
192 bytes each. The relation is :class:`~.fallback_post.FallbackPost`'s, per sector: ``comm_r = Poseidon(comm_c,
comm_r_last)`` and, per challenge, inclusion of the challenged replica leaf in the arity-8 Poseidon tree
``comm_r_last`` (challenge derivation and documented differences in :mod:`.fallback_post`). Sectors are the
vectorised axis of the native witness code (one sparse forest, one Poseidon batch per tree level).

==============  ========  ==========  ======  =====================================================================
preset          sectors   challenges  levels  what
==============  ========  ==========  ======  =====================================================================
``tiny``        2         2           2       tests (64-leaf trees)
``small``       4         2           3       tests and CPU benchmarks (512-leaf trees)
``sector_2k``   2         10          2       Filecoin's 2 KiB test sectors: 2 sectors per partition, 64 nodes
``d20``         24        10          10      24 sectors of 32 GiB shape: about 2^20 constraints (GPU benchmarks)
``full``        2349      10          10      Filecoin's 32 GiB WindowPoSt partition (about 10^8 constraints)
==============  ========  ==========  ======  =====================================================================

Priority class ``window_post`` (:mod:`cuzk_jax.priorities`): after WinningPoSt, before PoRep.
"""

from __future__ import annotations

from .fallback_post import FallbackPost


class WindowPost(FallbackPost):
    name = "window_post"
    PRIORITY_CLASS = "window_post"
    DEFAULT_PRESET = "tiny"
    PRESETS = {
        "tiny": {"sectors": 2, "challenges": 2, "levels": 2, "doc": "2 sectors x 2 challenges, 64-leaf trees (tests)"},
        "small": {"sectors": 4, "challenges": 2, "levels": 3, "doc": "4 sectors x 2 challenges, 512-leaf trees"},
        "sector_2k": {"sectors": 2, "challenges": 10, "levels": 2,
                      "doc": "Filecoin's 2 KiB test shape: 2 sectors x 10 challenges, 64 nodes"},
        "d20": {"sectors": 24, "challenges": 10, "levels": 10,
                "doc": "24 sectors x 10 challenges of 32 GiB shape (about 2^20 constraints)"},
        "full": {"sectors": 2349, "challenges": 10, "levels": 10,
                 "doc": "Filecoin's 32 GiB WindowPoSt partition: 2349 sectors x 10 challenges, 2^30 nodes"},
    }
