"""NTT over Fr (forward, natural order in and out, data resident on the device) per stage implementation.

  python scripts/bench.py --op=ntt --log_n=16,18,20,22,24            # one transform per size
  python scripts/bench.py --op=ntt --log_n=20 --batch=10              # 10 partitions of 2^20 in one call
  python scripts/bench.py --op=ntt --log_n=20 --impl=xla,pallas:block=128:warps=4  # NttConfig strings

Rows: impl, log_n, batch, first_call_s (table build + compile + one run; the persistent compilation cache may
shorten it -- pass --cache_dir= for a cold figure), median_ms (whole batch), per_ntt_ms, sppark_ms (the reference
point times the batch), ratio (median / sppark; 1.0 = parity), target_ms (this issue's target, where one is set),
hlo_fusions (fusions in the compiled stage loop, a diagnostic), checked (outputs compared with Python-int
evaluation at two points for log_n <= 20), error (an impl that failed to build or run, e.g. a Pallas lowering
problem, is reported instead of aborting the run).

Reference: supraseal's GPU NTT (sppark, BLS12-381 Fr, data resident, natural order in and out, median of 7),
measured on an H200.
"""

from __future__ import annotations

import random
import time

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax import bench, encoding
from cuzk_jax.ops import ntt as N
from cuzk_jax.ops.config import NttConfig
from cuzk_jax.reference import ntt as RN

SPPARK_MS = {16: 0.034, 18: 0.078, 20: 0.28, 22: 1.12, 24: 4.7, 26: 23.8}
TARGET_MS = {(20, 1): 2.0, (24, 1): 30.0, (20, 10): 20.0}
CHECK_MAX_LOG_N = 20


def random_fr(shape, seed: int) -> jax.Array:
    """Uniform-ish valid Montgomery-form Fr limbs: the top limb is kept below 2^30, so every value is < 2^254 < r."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 1 << 32, size=(8,) + tuple(shape), dtype=np.uint64).astype(np.uint32)
    x[-1] &= np.uint32(0x3FFFFFFF)
    return jnp.asarray(x)


def default_impls() -> list[str]:
    if jax.default_backend() == "gpu":
        return [str(NttConfig.default("gpu")), "xla"]
    return [str(NttConfig.default())]  # the Pallas interpreter on CPU measures nothing useful


def hlo_fusions(x, config: NttConfig) -> int | None:
    """Number of fusion instructions in the compiled stage loop (how many kernels XLA made of it)."""
    try:
        n = x.shape[-1]
        log_n = N.log2_size(n)
        B = int(np.prod(x.shape[1:-1])) if x.ndim > 2 else 1
        with jax.enable_x64(True):
            X = jax.ShapeDtypeStruct((B, 8, n), jnp.uint32)
            W = jax.ShapeDtypeStruct((8, max(n // 2, 1)), jnp.uint32)
            text = N.lower_stages(X, W, log_n, config).compile().as_text()
        return sum(1 for line in text.splitlines() if " fusion(" in line and "=" in line)
    except Exception:  # diagnostics only
        return None


def spot_check(x, y, seed: int) -> bool:
    """Compare outputs 0 and one random index of batch entry 0 with the definition (Python ints)."""
    n = x.shape[-1]
    x0 = np.asarray(x).reshape(8, -1, n)[:, 0]
    y0 = np.asarray(y).reshape(8, -1, n)[:, 0]
    xs = encoding.limbs_to_ints(x0, "fr", montgomery=True)
    w = RN.root_of_unity(n)
    i = random.Random(seed).randrange(n)
    ok = True
    for idx in (0, i):
        wi = pow(w, idx, RN.R)
        got = encoding.limbs_to_ints(y0[:, idx : idx + 1], "fr", montgomery=True)[0]
        ok &= got == RN.poly_eval(xs, wi)
    return bool(ok)


def run(cfg) -> list[dict]:
    impls = list(cfg.impl) or default_impls()
    batch = int(cfg.batch)
    rows = []
    for log_n in map(int, cfg.log_n):
        n = 1 << log_n
        shape = (batch, n) if batch > 1 else (n,)
        x = random_fr(shape, seed=log_n)
        for impl in impls:
            row = {"impl": impl, "log_n": log_n, "batch": batch}
            try:
                config = NttConfig.coerce(impl)
                fn = lambda a, config=config: N.ntt(a, config=config)  # noqa: E731
                t0 = time.perf_counter()
                y = bench.block(fn(x))
                row["first_call_s"] = round(time.perf_counter() - t0, 2)
                t = bench.time_runs(fn, (x,), reps=cfg.reps, warmup=cfg.warmup)
                med = t["median_s"] * 1e3
                row["median_ms"] = med
                row["min_ms"] = t["min_s"] * 1e3
                row["per_ntt_ms"] = med / batch
                ref = SPPARK_MS.get(log_n)
                row["sppark_ms"] = ref * batch if ref else None
                row["ratio"] = med / (ref * batch) if ref else None
                row["target_ms"] = TARGET_MS.get((log_n, batch))
                row["hlo_fusions"] = hlo_fusions(x, config)
                row["checked"] = spot_check(x, y, seed=log_n) if log_n <= CHECK_MAX_LOG_N else None
                del y
            except Exception as e:  # keep measuring the other implementations
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            bench.emit(rows, row)
            print(row, flush=True)
    return rows
