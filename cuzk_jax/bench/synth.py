"""``--op=synth``: circuit structure and per-partition witness synthesis, then device evaluation of A.z, B.z, C.z.

One row: the scalar results of :func:`cuzk_jax.circuits.bench.run` (what is timed is documented there); the
per-partition lists go to the JSON only.
"""

from __future__ import annotations

DEFAULTS = {"reps": 5, "warmup": 1}


def run(cfg) -> list[dict]:
    from cuzk_jax.circuits import bench as synth_bench
    from cuzk_jax.circuits import get_circuit

    preset = cfg.preset or get_circuit(cfg.circuit).preset
    result = synth_bench.run(cfg.circuit, preset, cfg.partitions, cfg.seed, cfg.reps, cfg.warmup, cfg.device_eval,
                             cfg.method, cfg.reference_check_max, cfg.partition_chunk or None)
    return [{"circuit": cfg.circuit, "preset": preset, **result}]
