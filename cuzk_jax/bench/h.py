"""The Groth16 H polynomial (7 NTTs + pointwise work per partition), batched over partitions.

  python scripts/bench.py --op=h --log_n=16,20,22 --batch=10
  python scripts/bench.py --op=h --log_n=20 --batch=10 --impl=xla,pallas  # NttConfig strings

Each (variant, impl, case) runs in a fresh Python process without the persistent compilation cache
(:func:`cuzk_jax.bench.ntt.measure_fresh`), so ``first_call_s`` is a new process's table generation + compile +
first run. ``--log_n`` takes ``LOGN`` or ``LOGNxBATCH`` entries as ``--op=ntt``.

Rows: variant (``arkworks``: :func:`cuzk_jax.ops.qap.compute_h`; ``snarkjs``: ``compute_h_snarkjs``, 6 NTTs and
no final iNTT), impl, log_n, batch, first_call_s, compile_s, median_ms (all partitions), per_partition_ms,
sppark_floor_ms (NTTs x the sppark single-NTT reference point x batch: a floor for supraseal's groth16_ntt_h, which
also does the pointwise work), ratio (median / sppark_floor_ms), peak_gib, error.
"""

from __future__ import annotations

from cuzk_jax.bench.ntt import SPPARK_MS, measure_fresh, parse_cases

VARIANTS = {"arkworks": ("h", 7), "snarkjs": ("h_snarkjs", 6)}


def run(cfg) -> list[dict]:
    from cuzk_jax import bench
    from cuzk_jax.ops.config import NttConfig

    # the default, and XLA beside it
    impls = list(cfg.impl) or list(dict.fromkeys([str(NttConfig.default()), str(NttConfig.default("cpu"))]))
    rows = []
    for log_n, b in parse_cases(cfg.log_n):
        batch = b or int(cfg.batch)
        for variant, (op, n_ntt) in VARIANTS.items():
            for impl in impls:
                row = {"variant": variant, "impl": impl, "log_n": log_n, "batch": batch, "ntts": n_ntt}
                row.update(measure_fresh(op, impl, log_n, batch, cfg.reps, cfg.warmup))
                if "median_ms" in row:
                    med = row["median_ms"]
                    row["per_partition_ms"] = med / batch
                    ref = SPPARK_MS.get(log_n)
                    row["sppark_floor_ms"] = n_ntt * ref * batch if ref else None
                    row["ratio"] = med / (n_ntt * ref * batch) if ref else None
                bench.emit(rows, row)
                print(row, flush=True)
    return rows
