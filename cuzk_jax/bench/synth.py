"""``--op=synth``: circuit structure and per-partition witness synthesis, then device evaluation of A.z, B.z, C.z.

One row per preset (``--preset`` takes a comma-separated list, e.g. ``--preset=medium,domain24``): the scalar
results of :func:`cuzk_jax.circuits.bench.run` (what is timed is documented there) -- structure and witness
constraints/s, builder vs batched witness on the same inputs where the preset is small enough, peak host memory,
worker count (``--workers``, 0 = one per CPU); the per-partition lists go to the JSON only.
"""

from __future__ import annotations

DEFAULTS = {"reps": 5, "warmup": 1}


def run(cfg) -> list[dict]:
    from cuzk_jax.bench import emit
    from cuzk_jax.circuits import bench as synth_bench
    from cuzk_jax.circuits import get_circuit

    presets = [p for p in (cfg.preset or "").split(",") if p] or [get_circuit(cfg.circuit).preset]
    rows: list[dict] = []
    for preset in presets:
        result = synth_bench.run(cfg.circuit, preset, cfg.partitions, cfg.seed, cfg.reps, cfg.warmup,
                                 cfg.device_eval, cfg.reference_check_max, cfg.partition_chunk or None,
                                 workers=getattr(cfg, "workers", 0) or None)
        emit(rows, {"circuit": cfg.circuit, "preset": preset, **result})
    return rows
