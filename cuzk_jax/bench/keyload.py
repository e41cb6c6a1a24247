"""``--op=keyload``: loading a cached proving key, with and without the subgroup test of its queries.

The key cache loads with ``subgroup_check=False`` (its files are its own, hash-named); ``full`` runs every check.
Each mode (``--modes``: cache, full) loads twice in one process: the first includes compiling the decode programs,
the second is the steady cost. Needs the key in the cache (``cuzk-setup --circuit=... --preset=...`` first).
"""

from __future__ import annotations

import os
import time

from cuzk_jax import bench

MODES = ("cache", "full")
DEFAULTS = {"preset": "tiny"}


def run(cfg) -> list[dict]:
    import jax

    from cuzk_jax import keycache
    from cuzk_jax.circuits import base
    from cuzk_jax.groth16.data_structures import ProvingKey

    bad = [m for m in cfg.modes if m not in MODES]
    if bad:
        raise ValueError(f"unknown --modes {bad}; expected some of {MODES}")
    circuit = base.get_circuit(cfg.circuit, cfg.preset)
    path = keycache.key_path(circuit, circuit.r1cs(), cfg.key_dir or None)
    if not os.path.exists(path):
        raise ValueError(f"no cached key {path}: run cuzk-setup --circuit={cfg.circuit} --preset={cfg.preset} first")
    with open(path, "rb") as fh:
        data = fh.read()
    rows: list[dict] = []
    for mode in cfg.modes:
        for rep in ("first", "second"):
            t0 = time.perf_counter()
            pk = ProvingKey.from_bytes(data, subgroup_check=mode == "full")
            jax.block_until_ready(pk)
            bench.emit(rows, {"preset": cfg.preset, "mode": mode, "load": rep, "mbytes": round(len(data) / 2**20, 1),
                              "seconds": round(time.perf_counter() - t0, 2)})
            del pk
    return rows
