"""The Groth16 H polynomial (7 NTTs + pointwise work per partition), batched over partitions.

  python scripts/bench.py --op=h --log_n=16,20,22 --batch=10
  python scripts/bench.py --op=h --log_n=20 --batch=10 --impl=xla  # NttConfig strings

Rows: variant (``arkworks``: :func:`cuzk_jax.ops.qap.compute_h`; ``snarkjs``: ``compute_h_snarkjs``, 6 NTTs and
no final iNTT), impl, log_n, batch, first_call_s, median_ms (all partitions), per_partition_ms, sppark_7ntt_ms
(7 x the sppark single-NTT reference point x batch: a floor for supraseal's groth16_ntt_h, which also does the
pointwise work), ratio (median / sppark_7ntt_ms), error.
"""

from __future__ import annotations

import time

from cuzk_jax import bench
from cuzk_jax.bench.ntt import SPPARK_MS, random_fr
from cuzk_jax.ops import qap
from cuzk_jax.ops.config import NttConfig

VARIANTS = {"arkworks": (qap.compute_h, 7), "snarkjs": (qap.compute_h_snarkjs, 6)}


def run(cfg) -> list[dict]:
    # the default, and XLA beside it
    impls = list(cfg.impl) or list(dict.fromkeys([str(NttConfig.default()), str(NttConfig.default("cpu"))]))
    batch = int(cfg.batch)
    rows = []
    for log_n in map(int, cfg.log_n):
        n = 1 << log_n
        shape = (batch, n)
        a, b, c = (random_fr(shape, seed=10 * log_n + k) for k in range(3))
        for variant, (fn0, n_ntt) in VARIANTS.items():
            for impl in impls:
                row = {"variant": variant, "impl": impl, "log_n": log_n, "batch": batch}
                try:
                    config = NttConfig.parse(impl)
                    fn = lambda a, b, c, fn0=fn0, config=config: fn0(a, b, c, config=config)  # noqa: E731
                    t0 = time.perf_counter()
                    bench.block(fn(a, b, c))
                    row["first_call_s"] = round(time.perf_counter() - t0, 2)
                    t = bench.time_runs(fn, (a, b, c), reps=cfg.reps, warmup=cfg.warmup)
                    med = t["median_s"] * 1e3
                    row["median_ms"] = med
                    row["per_partition_ms"] = med / batch
                    ref = SPPARK_MS.get(log_n)
                    row["sppark_7ntt_ms"] = 7 * ref * batch if ref else None
                    row["ratio"] = med / (7 * ref * batch) if ref else None
                    row["ntts"] = n_ntt
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                bench.emit(rows, row)
                print(row, flush=True)
        del a, b, c
    return rows
