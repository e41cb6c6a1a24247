"""cuzk_jax.bench.profile: a traced run's kernels summed per program and HLO op (CPU: the host plane's XLA thunks),
control-flow thunks not counted twice, and the --profile flag of scripts/bench.py putting the summary in a row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import lax

from cuzk_jax import bench
from cuzk_jax.bench import profile

ROOT = Path(__file__).resolve().parents[1]


def test_trace_names_the_programs_and_counts_loop_bodies_once():
    @jax.jit
    def looped(x):
        return lax.fori_loop(0, 50, lambda i, v: jnp.sin(v) * 1.0001 + i, x)

    @jax.jit
    def other(x):
        return jnp.cos(x) @ x.T

    x = jnp.ones((64, 64), jnp.float32)
    jax.block_until_ready((looped(x), other(x)))  # compiled outside the trace
    with profile.device_trace() as tr:
        jax.block_until_ready((looped(x), other(x)))
    s = tr.summary
    mods = {m["module"] for m in s["modules"]}
    assert {"jit_looped", "jit_other"} <= mods, s["modules"]
    assert s["events"] > 0 and s["kernel_ms"] > 0 and s["ops"]
    # the loop body ran 50 times: its leaf thunks are counted per iteration, the enclosing `while` not at all
    body = [o for o in s["ops"] if o["module"] == "jit_looped"]
    assert max(o["count"] for o in body) >= 50 and not any(o["op"].startswith("while") for o in body), body
    # two small single-threaded programs: leaf thunks in sequence cannot sum past the traced span
    assert s["kernel_ms"] <= s["span_ms"] * 1.01 + 0.01, s
    assert sum(m["ms"] for m in s["modules"]) <= s["kernel_ms"] + 0.001 * len(s["modules"])  # rounded to us
    lines = profile.table(s).splitlines()
    assert lines[0].startswith("profile (") and len(lines) > 1


def test_empty_trace_summary():
    with profile.device_trace() as tr:
        pass
    s = tr.summary
    assert s["events"] == 0 and s["kernel_ms"] == 0 and s["modules"] == [] or "error" in s


def test_time_runs_profiles_one_more_run_only_when_asked():
    f = jax.jit(lambda a: a * 2 + 1)
    x = jnp.arange(1024, dtype=jnp.float32)
    assert "profile" not in bench.time_runs(f, (x,), reps=1, warmup=0)
    bench.set_profiling(True)
    try:
        t = bench.time_runs(f, (x,), reps=1, warmup=0)
    finally:
        bench.set_profiling(False)
    assert t["profile"]["events"] >= 1 and t["profile"]["modules"][0]["module"].startswith("jit_")


def test_bench_flag_writes_the_profile(tmp_path):
    out = tmp_path / "f.json"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench.py"), "--op=field", "--field=fr", "--log_n=8",
                        "--reps=1", "--warmup=0", "--profile", f"--out={out}", "--cache_dir="],
                       env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert rows and all(row.get("profile", {}).get("events", 0) > 0 for row in rows if "median_ms" in row), rows


def test_ntt_bench_profiles_in_its_fresh_worker(tmp_path):
    """``--op=ntt`` measures every row in a fresh process: ``--profile`` reaches it (the row gets the traced run's
    summary), and without the flag no row has one."""
    rows = {}
    for flag in ("--profile", "--noprofile"):
        out = tmp_path / f"ntt{flag}.json"
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench.py"), "--op=ntt", "--log_n=8", "--impl=xla",
                            "--reps=1", "--warmup=0", flag, f"--out={out}", "--cache_dir="],
                           env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        rows[flag] = json.loads(out.read_text())["rows"]
        assert rows[flag] and all("median_ms" in row for row in rows[flag]), rows[flag]
    assert all(row["profile"]["events"] > 0 for row in rows["--profile"])
    assert not any("profile" in row for row in rows["--noprofile"])
