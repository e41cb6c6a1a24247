"""Benchmark library behind ``scripts/bench.py`` (``cuzk-bench``): timing helpers, JSON/table output, one module per
op.

Each op module (``cuzk_jax.bench.<op>``) exposes ``run(cfg) -> list[dict]`` where ``cfg`` holds the flag values of
scripts/bench.py (an op's optional ``DEFAULTS`` dict replaces the defaults of flags not given). Rows are flat dicts;
the script prints them as a table and writes them as JSON.
Timing follows the device tool's method: compile separately (timed), warm up, then the median of ``reps`` runs,
each ended by ``block_until_ready`` so asynchronous dispatch is not mistaken for speed.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import time
from typing import Callable, Sequence

import jax

__all__ = ["add_row_sink", "block", "compile_timed", "emit", "environment", "format_table", "git_commit",
           "brief", "profile_of", "profiling", "set_profiling", "time_runs", "trace_once", "write_json"]

_PROFILE = False


def set_profiling(on: bool) -> None:
    """Trace one extra run in :func:`time_runs` (and the last rep of ``--op=sector``): ``--profile``."""
    global _PROFILE
    _PROFILE = bool(on)


def profiling() -> bool:
    return _PROFILE


def profile_of(timed: dict) -> dict:
    """``{"profile": ...}`` from a :func:`time_runs` result that traced one (else ``{}``): to merge into a row."""
    return {"profile": timed["profile"]} if "profile" in timed else {}


def trace_once(fn: Callable, *args, label: str = "") -> dict:
    """One more run of ``fn(*args)`` under :func:`cuzk_jax.bench.profile.device_trace`: its summary, whose table
    is printed (after ``label``)."""
    from cuzk_jax.bench import profile

    with profile.device_trace() as tr:
        block(fn(*args))
    print(label + profile.table(tr.summary), flush=True)
    return tr.summary


def brief(row: dict) -> dict:
    """``row`` without its ``profile`` (for the log line; the JSON keeps it)."""
    return {k: v for k, v in row.items() if k != "profile"}


def compile_timed(fn, *args):
    """``jax.jit(fn)`` lowered and compiled for ``args``: returns (compiled, seconds)."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def block(x):
    return jax.tree_util.tree_map(lambda a: a.block_until_ready() if hasattr(a, "block_until_ready") else a, x)


def time_runs(fn: Callable, args: Sequence, reps: int = 5, warmup: int = 2) -> dict:
    """Median / min / max wall time (seconds) of ``fn(*args)`` over ``reps`` runs after ``warmup`` runs; with
    :func:`set_profiling` on, also ``profile``: the kernels of one more, traced run
    (:mod:`cuzk_jax.bench.profile`)."""
    for _ in range(warmup):
        block(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        block(fn(*args))
        times.append(time.perf_counter() - t0)
    out = {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "reps": reps}
    if _PROFILE:
        out["profile"] = trace_once(fn, *args)
    return out


def host_peak() -> dict:
    """This process's and its finished worker processes' peak resident memory so far, in GiB (``getrusage``'s
    ``ru_maxrss``: KiB on Linux; the workers' figure is the largest single child, not a sum)."""
    import resource

    kib = 1 << 10
    return {"host_peak_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * kib / 2**30, 3),
            "workers_peak_gib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * kib / 2**30, 3)}


def git_commit() -> str:
    if os.environ.get("CUZK_BENCH_COMMIT"):
        return os.environ["CUZK_BENCH_COMMIT"]
    try:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def environment() -> dict:
    dev = jax.devices()[0]
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "backend": jax.default_backend(),
        "device": getattr(dev, "device_kind", str(dev)),
        "device_count": jax.device_count(),
        "jax": jax.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "commit": git_commit(),
    }


def format_table(rows: list[dict]) -> str:
    if not rows:
        return "(no rows)"
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[fmt(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


_row_sinks: list[Callable[[dict], None]] = []


def add_row_sink(sink: Callable[[dict], None]) -> None:
    """Register ``sink(row)``, called for every row an op module emits (scripts write partial JSON with it, so a
    run killed by a time limit still leaves the rows it finished)."""
    _row_sinks.append(sink)


def emit(rows: list, row: dict) -> None:
    """Append ``row`` to ``rows`` and pass it to the registered sinks."""
    rows.append(row)
    for sink in _row_sinks:
        sink(row)


def write_json(path: str, payload: dict) -> None:
    """Replace ``path`` atomically with ``payload`` as JSON (:func:`cuzk_jax.fileio.atomic_write`: a full disk
    never leaves a partial JSON); creates the folder."""
    from cuzk_jax import fileio

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fileio.atomic_write(path, json.dumps(payload, indent=2, sort_keys=False))
