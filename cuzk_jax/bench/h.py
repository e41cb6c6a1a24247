"""The Groth16 H polynomial (7 NTTs + pointwise work per partition), batched over partitions.

  python scripts/bench.py --op=h --log_n=16,20,22 --batch=10
  python scripts/bench.py --op=h --log_n=20 --batch=10 --impl=xla,pallas  # NttConfig strings

Each (variant, impl, case) runs in a fresh Python process without the persistent compilation cache
(:func:`cuzk_jax.bench.ntt.measure_fresh`), so ``first_call_s`` is a new process's table generation + compile +
first run. ``--log_n`` takes ``LOGN`` or ``LOGNxBATCH`` entries as ``--op=ntt``.

``--impl=parts`` instead times, in this process and on the default NTT config, the programs the prover's split H
step runs (:func:`cuzk_jax.ops.qap.compute_h_split`, what a 2^27 partition uses): the coset evaluations of one
input (``coset``, three per partition), the pointwise step with the last transform and the canonical H-MSM
scalars (``finish``; a separate conversion program ``h_out`` until session 23), the pointwise step alone with the
scalars of a Lagrange H query (``finish_lagrange``: no last transform), the whole split step (``split``),
and one forward NTT of the domain (``ntt``) as the unit they are made of. Random Montgomery inputs, ``0.98 n`` evaluations per partition; rows: part, log_n, batch, first_s
(compile + first run), median_ms, ntt_equiv (median over the NTT row's). For finding where the H phase's time
goes at sector scale (3.0 s per 2^27 partition against ~0.8 s of NTTs).

  python scripts/bench.py --op=h --impl=parts --log_n=24,27 --reps=3 --warmup=1

Rows: variant (``arkworks``: :func:`cuzk_jax.ops.qap.compute_h`, a coefficient H query's; ``snarkjs``:
``compute_h_snarkjs``, 6 NTTs and no final iNTT; ``lagrange``: ``compute_h_lagrange``, the same on our domain, what
a key of this project's setup takes), impl, log_n, batch, first_call_s, compile_s, median_ms (all partitions),
per_partition_ms, sppark_floor_ms (NTTs x the sppark single-NTT reference point x batch: a floor for supraseal's
groth16_ntt_h, which also does the pointwise work), ratio (median / sppark_floor_ms), peak_gib, error.
"""

from __future__ import annotations

from cuzk_jax.bench.ntt import SPPARK_MS, measure_fresh, parse_cases

VARIANTS = {"arkworks": ("h", 7), "snarkjs": ("h_snarkjs", 6), "lagrange": ("h_lagrange", 6)}


def _parts(log_n: int, batch: int, reps: int, warmup: int) -> list[dict]:
    import statistics
    import time

    import jax
    import jax.numpy as jnp

    from cuzk_jax import bench
    from cuzk_jax.ops import ntt as ops_ntt, qap
    from cuzk_jax.ops.config import NttConfig

    n = 1 << log_n
    config = NttConfig.coerce(None)
    m = n - n // 64
    key = jax.random.PRNGKey(log_n)
    # below r: the top limb under 2^29 (r's top limb is 0x73eda753)
    x = jax.random.bits(key, (8, batch, m), jnp.uint32).at[7].set(
        jax.random.bits(key, (batch, m), jnp.uint32) >> 3)
    full = jnp.pad(x, [(0, 0), (0, 0), (0, n - m)])
    ev = {}

    def coset():
        ev["e"] = qap.coset_evaluations(x, n, config=config)
        return ev["e"]

    parts = [("ntt", lambda: ops_ntt.ntt(full, config=config)), ("coset", coset),
             ("finish", lambda: qap.h_from_evaluations(ev["e"], ev["e"], ev["e"], n, config=config, scalars=True)),
             ("finish_lagrange", lambda: qap.h_from_evaluations(ev["e"], ev["e"], ev["e"], n, config=config,
                                                                form="lagrange", scalars=True)),
             ("split", lambda: qap.compute_h_split(x, x, x, n, config=config, scalars=True))]
    rows, unit = [], None
    for name, fn in parts:
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        first = time.perf_counter() - t0
        for _ in range(warmup):
            jax.block_until_ready(fn())
        times = []
        for _ in range(max(1, reps)):
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            times.append(1e3 * (time.perf_counter() - t0))
        med = statistics.median(times)
        unit = med if name == "ntt" else unit
        rows.append({"part": name, "log_n": log_n, "batch": batch, "first_s": round(first, 3),
                     "median_ms": round(med, 3), "ntt_equiv": round(med / unit, 2) if unit else None})
        if bench.profiling():  # one more, traced run (cuzk_jax.bench.profile)
            rows[-1]["profile"] = bench.trace_once(fn, label=f"{name} 2^{log_n}: ")
    return rows


def run(cfg) -> list[dict]:
    from cuzk_jax import bench
    from cuzk_jax.ops.config import NttConfig

    if "parts" in cfg.impl:
        rows = []
        for log_n, b in parse_cases(cfg.log_n):
            for row in _parts(log_n, b or int(cfg.batch), cfg.reps, cfg.warmup):
                bench.emit(rows, row)
                print(row, flush=True)
        return rows

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
