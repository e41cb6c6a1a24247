"""``--op=snarkjs``: ``snarkjs groth16 prove`` vs cuzk_jax on the same zkey and witness, per domain size.

On a host with Node it builds (and caches) the circuits and keys and times both; ``--export_dir`` copies the files
for a machine without Node, which runs ``--impl=device --artifacts_dir=... --baseline=<the CPU run's JSON>``. The
logic is in :mod:`cuzk_jax.snarkjs.bench` (what is timed and how is documented there).
"""

from __future__ import annotations

DEFAULTS = {"log_n": ["12", "16"], "impl": ["snarkjs", "device"], "reps": 3, "warmup": 1}


def run(cfg) -> list[dict]:
    from cuzk_jax.snarkjs import bench as sbench

    return sbench.run([int(k) for k in cfg.log_n], list(cfg.impl), reps=cfg.reps, warmup=cfg.warmup, setup=cfg.setup,
                      artifacts_dir=cfg.artifacts_dir, export_dir=cfg.export_dir, export_zkey=cfg.export_zkey,
                      baseline=cfg.baseline)
