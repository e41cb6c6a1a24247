"""NTT over Fr (forward, natural order in and out, data resident on the device) per configuration and size.

  python scripts/bench.py --op=ntt --log_n=16,20,24,26,27,20x10        # sizes; LOGNxB = a batch of B transforms
  python scripts/bench.py --op=ntt --log_n=20 --impl=xla,pallas,pallas:sub=6:block=512   # NttConfig strings

Every (impl, case) runs in a **fresh Python process** without the persistent compilation cache, so
``first_call_s`` is what a new process pays: table generation + compile + one run (``compile_s`` is the part
reported by JAX's backend-compile events: wall time, so on a CPU it also counts the table generation that runs
concurrently under asynchronous dispatch -- at 2^20 the two programs compile in ~3 s when nothing else runs, as at
2^10). Then the warm median of ``--reps`` runs after ``--warmup``.

Rows: impl, log_n, batch, first_call_s, compile_s, median_ms (whole batch), min_ms, per_ntt_ms, sppark_ms (the
reference point times the batch), ratio (median / sppark; 1.0 = parity), target_ms (issue 20's target, where one is
set), passes (kernel passes of the plan), peak_gib (device memory high-water mark of the process, where the backend
reports one), checked (outputs 0 and one random index of batch entry 0 compared with Python-int evaluation, for
log_n <= 20), error (a configuration that failed to build or run -- e.g. a Pallas lowering problem -- is reported
instead of aborting the run).

Reference: supraseal's GPU NTT (sppark, BLS12-381 Fr, data resident, natural order in and out, median of 7),
measured on an H200 (issue 20).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

SPPARK_MS = {16: 0.034, 18: 0.078, 20: 0.276, 22: 1.12, 24: 4.74, 26: 23.8}
TARGET_MS = {(20, 1): 0.25, (24, 1): 4.0, (20, 10): 2.5, (27, 1): 40.0}
CHECK_MAX_LOG_N = 20
WORKER_TIMEOUT_S = 300  # one (impl, case): a stuck compile must not eat a device session


def parse_cases(values) -> list[tuple[int, int | None]]:
    """``["20", "24", "20x10"]`` -> ``[(20, None), (24, None), (20, 10)]`` (None: the ``--batch`` flag)."""
    out = []
    for v in values:
        v = str(v).strip()
        log_n, _, b = v.partition("x")
        if not log_n.isdigit() or (b and not b.isdigit()):
            raise ValueError(f"bad --log_n entry {v!r}: expected LOGN or LOGNxBATCH, e.g. 20 or 20x10")
        out.append((int(log_n), int(b) if b else None))
    return out


def random_fr(shape, seed: int):
    """Uniform-ish valid Montgomery-form Fr limbs: the top limb is kept below 2^30, so every value is < 2^254 < r."""
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 1 << 32, size=(8,) + tuple(shape), dtype=np.uint64).astype(np.uint32)
    x[-1] &= np.uint32(0x3FFFFFFF)
    return jnp.asarray(x)


def default_impls() -> list[str]:
    import jax

    from cuzk_jax.ops.config import NttConfig

    if jax.default_backend() == "gpu":
        return [str(NttConfig.default("gpu")), "xla"]
    return [str(NttConfig.default())]  # the Pallas interpreter on CPU measures nothing useful


def spot_check(x, y, seed: int) -> bool:
    """Compare outputs 0 and one random index of batch entry 0 with the definition (Python ints)."""
    import numpy as np

    from cuzk_jax import encoding
    from cuzk_jax.reference import ntt as RN

    n = x.shape[-1]
    x0 = np.asarray(x).reshape(8, -1, n)[:, 0]
    y0 = np.asarray(y).reshape(8, -1, n)[:, 0]
    xs = encoding.limbs_to_ints(x0, "fr", montgomery=True)
    w = RN.root_of_unity(n)
    i = random.Random(seed).randrange(n)
    ok = True
    for idx in (0, i):
        got = encoding.limbs_to_ints(y0[:, idx: idx + 1], "fr", montgomery=True)[0]
        ok &= got == RN.poly_eval(xs, pow(w, idx, RN.R))
    return bool(ok)


class _CompileClock:
    """Sums JAX's backend-compile durations while installed (jax.monitoring; JAX 0.10 / 0.11 event name)."""

    def __init__(self):
        import jax

        self.total = 0.0

        def listener(event, duration, **_):
            if event == "/jax/core/compile/backend_compile_duration":
                self.total += duration

        jax.monitoring.register_event_duration_secs_listener(listener)


def _peak_gib():
    import jax

    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # backends without memory statistics
        return None
    peak = stats.get("peak_bytes_in_use")
    return round(peak / 2**30, 3) if peak else None


def _fn(op: str, config):
    from cuzk_jax.ops import ntt as N
    from cuzk_jax.ops import qap

    if op == "ntt":
        return lambda x: N.ntt(x, config=config)
    if op == "h":
        return lambda a, b, c: qap.compute_h(a, b, c, config=config)
    if op == "h_snarkjs":
        return lambda a, b, c: qap.compute_h_snarkjs(a, b, c, config=config)
    if op == "h_lagrange":
        return lambda a, b, c: qap.compute_h_lagrange(a, b, c, config=config)
    raise ValueError(op)


def measure(op: str, impl: str, log_n: int, batch: int, reps: int, warmup: int) -> dict:
    """One row, in THIS process (the worker side of :func:`measure_fresh`)."""
    from cuzk_jax import bench
    from cuzk_jax.ops import ntt as N
    from cuzk_jax.ops.config import NttConfig

    clock = _CompileClock()
    config = NttConfig.coerce(impl)
    n = 1 << log_n
    shape = (batch, n) if batch > 1 or op != "ntt" else (n,)
    nargs = 1 if op == "ntt" else 3
    args = tuple(random_fr(shape, seed=10 * log_n + k) for k in range(nargs))
    bench.block(args)
    fn = _fn(op, config)
    row = {"passes": len(N.plan(log_n, config.sub_log()))}
    t0 = time.perf_counter()
    y = bench.block(fn(*args))
    row["first_call_s"] = round(time.perf_counter() - t0, 3)
    row["compile_s"] = round(clock.total, 3)
    t = bench.time_runs(fn, args, reps=reps, warmup=warmup)
    row["median_ms"] = t["median_s"] * 1e3
    row["min_ms"] = t["min_s"] * 1e3
    row["peak_gib"] = _peak_gib()
    row.update(bench.profile_of(t))
    if op == "ntt":
        row["checked"] = spot_check(args[0], y, seed=log_n) if log_n <= CHECK_MAX_LOG_N else None
    return row


def measure_fresh(op: str, impl: str, log_n: int, batch: int, reps: int, warmup: int) -> dict:
    """:func:`measure` in a fresh Python process with no persistent compilation cache (a cold first call)."""
    from cuzk_jax import bench

    spec = json.dumps({"op": op, "impl": impl, "log_n": log_n, "batch": batch, "reps": reps, "warmup": warmup,
                       "profile": bench.profiling()})
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "CUZK_JAX_CACHE_DIR")}
    try:
        proc = subprocess.run([sys.executable, "-m", "cuzk_jax.bench.ntt", spec], capture_output=True, text=True,
                              timeout=WORKER_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"worker timed out after {WORKER_TIMEOUT_S} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"worker exit {proc.returncode}: {(proc.stderr or proc.stdout)[-600:]}"}
    return json.loads(lines[-1])


def run(cfg) -> list[dict]:
    from cuzk_jax import bench

    from cuzk_jax.errors import BadInput
    from cuzk_jax.ops.config import NttConfig

    impls = list(cfg.impl) or default_impls()
    for impl in impls:  # a malformed --impl is a usage error before any measurement (exit 2), not a row
        try:
            NttConfig.coerce(impl)
        except ValueError as e:
            raise BadInput(f"--impl={impl}: {e}") from None
    rows = []
    for log_n, b in parse_cases(cfg.log_n):
        batch = b or int(cfg.batch)
        for impl in impls:
            row = {"impl": impl, "log_n": log_n, "batch": batch}
            row.update(measure_fresh("ntt", impl, log_n, batch, cfg.reps, cfg.warmup))
            if "median_ms" in row:
                med = row["median_ms"]
                row["per_ntt_ms"] = med / batch
                ref = SPPARK_MS.get(log_n)
                row["sppark_ms"] = ref * batch if ref else None
                row["ratio"] = med / (ref * batch) if ref else None
                row["target_ms"] = TARGET_MS.get((log_n, batch))
            bench.emit(rows, row)
            print(bench.brief(row), flush=True)
    return rows


def _worker(argv) -> int:
    from cuzk_jax import bench

    spec = json.loads(argv[1])
    bench.set_profiling(spec.get("profile", False))  # --profile of the parent: trace one more run here
    try:
        row = measure(spec["op"], spec["impl"], spec["log_n"], spec["batch"], spec["reps"], spec["warmup"])
    except Exception as e:  # reported as the row's error by the parent
        row = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv))
