"""Stage benchmark: ``scripts/bench.py --op=stage --log_n=24,27 [--batch=P] [--impl=rows,rows8]``.

Times the host -> device copy of a witness batch ``z`` (uint32 ``(8, P, 2^log_n)``, one device) with
:func:`cuzk_jax.groth16.staging.copy_rows`, ending with the ``(8, P, width)`` device array the prove programs take
(``width`` past ``n``, as the key's size-bucketed programs have it; :func:`~cuzk_jax.groth16.staging.stack_rows`,
the pipeline's program): ``rows`` -- the 8 limb rows copied one after another, then stacked and padded on the
device -- against ``rowsK``, the same rows issued from ``K`` threads (the
pipeline's stage uses :data:`cuzk_jax.groth16.pipeline.STAGE_THREADS`).

The batch is PoRep-like (52 % zeros, 47 % Montgomery ones, 1 % random values below r, as the A/B/L scalars of
``porep_like``; benchmark data only, seeded). Each row: median / min ms over ``--reps`` after
``--warmup``, host GB/s (``32 P n`` bytes over the median), ``equal``: the device array equals the ``rows`` one
bit for bit.
"""

from __future__ import annotations

import os

DEFAULTS = {"log_n": ["24"], "reps": 3, "warmup": 1}


def _batch(P: int, n: int, seed: int = 0):
    import numpy as np

    from cuzk_jax import encoding

    rng = np.random.default_rng(seed)
    u = rng.random((P, n), dtype=np.float32)
    one = np.asarray(encoding.ints_to_limbs([1], "fr", montgomery=True)[:, 0], np.uint32)
    z = np.zeros((8, P, n), np.uint32)
    ones = u >= 0.53
    other = (u >= 0.52) & ~ones
    z[:, ones] = one[:, None]
    k = int(other.sum())
    vals = rng.integers(0, 2**32, size=(8, k), dtype=np.uint32)
    vals[7] &= 0x0FFFFFFF  # below r
    z[:, other] = vals
    return z


def run(cfg) -> list[dict]:
    import statistics
    import time

    import jax
    import jax.numpy as jnp

    from cuzk_jax import bench
    from cuzk_jax.errors import BadInput
    from cuzk_jax.groth16 import staging

    impls = list(cfg.impl) or ["rows", "rows8"]
    bad = [i for i in impls if not (i.startswith("rows") and (i[4:] == "" or i[4:].isdigit() and int(i[4:]) > 0))]
    if bad:  # before any work
        raise BadInput(f"unknown --impl {','.join(bad)} for --op=stage (rows, rowsK with K threads)")
    P = max(1, int(cfg.batch))
    cores = os.cpu_count() or 1
    rows: list[dict] = []

    for log_n in [int(x) for x in cfg.log_n]:
        n = 1 << log_n
        width = -(-n // (1 << 20)) * (1 << 20) + (1 << 20)  # a bucketed width past n, as the key's programs
        z = _batch(P, n)
        ref = None
        for impl in impls:
            threads = int(impl[4:] or 1)
            fn = lambda threads=threads: staging.stack_rows(tuple(staging.copy_rows(z, threads=threads)),  # noqa: E731
                                                            width)
            for _ in range(max(0, cfg.warmup)):
                jax.block_until_ready(fn())
            times, out = [], None
            for _ in range(max(1, cfg.reps)):
                del out
                t0 = time.perf_counter()
                out = jax.block_until_ready(fn())
                times.append(time.perf_counter() - t0)
            if ref is None:
                ref = out
            med = statistics.median(times)
            row = {"log_n": log_n, "batch": P, "impl": impl, "median_ms": round(1e3 * med, 3),
                   "min_ms": round(1e3 * min(times), 3), "host_gb_s": round(32 * P * n / med / 1e9, 2),
                   "equal": bool(jnp.array_equal(out, ref)), "cores": cores}
            bench.emit(rows, row)
            print(row, flush=True)
            del out
        del ref, z
    return rows
