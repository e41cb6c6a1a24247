"""``--op=keyload``: loading a cached proving key, with and without the subgroup test of its queries.

The key cache loads with ``subgroup_check=False`` (its files are its own, hash-named); ``full`` runs every check.
A cached key in the raw format (:mod:`cuzk_jax.groth16.keyfile`, what the cache writes now) is loaded with
``keyfile.load`` (``cache``: checksums + curve checks; ``full``: also the subgroup test), an older unit in the byte
format of ``data_structures`` with ``ProvingKey.from_bytes``; the row says which (``format``) and the GB/s.
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
    from cuzk_jax.groth16 import keyfile

    raw = keyfile.is_raw_key(path)
    size = os.path.getsize(path)
    data = None
    if not raw:
        with open(path, "rb") as fh:
            data = fh.read()
    rows: list[dict] = []
    for mode in cfg.modes:
        for rep in ("first", "second"):
            t0 = time.perf_counter()
            if raw:
                pk = keyfile.load(path, subgroup_check=mode == "full")
            else:
                pk = ProvingKey.from_bytes(data, subgroup_check=mode == "full")
            jax.block_until_ready(pk)
            dt = time.perf_counter() - t0
            bench.emit(rows, {"preset": cfg.preset, "format": "raw" if raw else "bytes", "mode": mode, "load": rep,
                              "mbytes": round(size / 2**20, 1), "seconds": round(dt, 2),
                              "gb_per_s": round(size / 1e9 / max(dt, 1e-9), 3)})
            del pk
    return rows
