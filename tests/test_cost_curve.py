"""``bench --op=cost-curve`` (cuzk_jax/bench/cost_curve.py): the fastest proved rep per preset from sector JSON
files, the growth between sizes, the PNG, and one clear usage error (exit 2) for every bad input."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuzk_jax.bench import cost_curve
from cuzk_jax.errors import BadInput

ROOT = Path(__file__).resolve().parents[1]


def _sector_file(path, preset, constraints, domain, prove_times, device="NVIDIA H200", ok=True, commit="abc1234"):
    rows = [{"op": "sector", "rep": "prepare", "preset": preset, "circuit": "porep_like", "constraints": constraints}]
    for rep, t in enumerate(prove_times):
        rows.append({"op": "sector", "rep": rep, "variant": "default", "circuit": "porep_like", "preset": preset,
                     "constraints": constraints, "domain": domain, "proofs": 10, "ok": ok, "prove_s": t,
                     "device_peak_gib": 100.0, "host_peak_gib": 50.0})
    path.write_text(json.dumps({"environment": {"device": device, "commit": commit, "date": "2026-12-04T00:00"},
                                "rows": rows, "complete": True}))
    return str(path)


def test_curve_takes_the_fastest_rep_and_the_growth(tmp_path):
    a = _sector_file(tmp_path / "a.json", "domain26", 65_000_000, 1 << 26, [40.0, 21.0, 22.0])
    b = _sector_file(tmp_path / "b.json", "sector32g", 130_000_000, 1 << 27, [60.0, 44.0])
    c = _sector_file(tmp_path / "c.json", "domain24", 16_000_000, 1 << 24, [3.0], ok=False)  # not proved: ignored
    rows = cost_curve.curve([b, a, c])
    assert [r["preset"] for r in rows] == ["domain26", "sector32g"]
    small, big = rows
    assert small["per_partition_s"] == 2.1 and small["rep"] == 1 and small["log_domain"] == 26
    assert small["ns_per_constraint"] == round(2.1 / 65e6 * 1e9, 2) and "exponent" not in small
    assert big["constraints_ratio"] == 2.0 and big["time_ratio"] == round(4.4 / 2.1, 3)
    assert big["exponent"] == round(math.log(4.4 / 2.1) / math.log(2.0), 3) and big["exponent"] > 1
    assert big["source"] == "b.json" and big["commit"] == "abc1234" and big["date"] == "2026-12-04"


def test_curves_of_two_devices_stay_apart(tmp_path):
    a = _sector_file(tmp_path / "a.json", "domain26", 65_000_000, 1 << 26, [20.0], device="GPU A")
    b = _sector_file(tmp_path / "b.json", "sector32g", 130_000_000, 1 << 27, [30.0], device="GPU B")
    rows = cost_curve.curve([a, b])
    assert [r["device"] for r in rows] == ["GPU A", "GPU B"]
    assert all("exponent" not in r for r in rows)  # no growth across devices


def test_cli_writes_rows_and_png(tmp_path):
    pytest.importorskip("matplotlib")
    _sector_file(tmp_path / "s26.json", "domain26", 65_000_000, 1 << 26, [21.7])
    _sector_file(tmp_path / "s27.json", "sector32g", 130_000_000, 1 << 27, [43.8])
    out, png = tmp_path / "curve.json", tmp_path / "curve.png"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench.py"), "--op=cost-curve",
                        f"--inputs={tmp_path / 's2*.json'}", f"--plot={png}", f"--out={out}", "--cache_dir="],
                       env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(row["op"], row["preset"]) for row in rows] == [("cost-curve", "domain26"), ("cost-curve", "sector32g")]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("case", ["no inputs", "no match", "not json", "no sector rows"])
def test_bad_inputs_are_one_usage_error(tmp_path, case):
    bad = tmp_path / "bad.json"
    if case == "not json":
        bad.write_text("{not json")
    elif case == "no sector rows":
        bad.write_text(json.dumps({"environment": {}, "rows": [{"op": "msm", "median_ms": 1.0}]}))
    inputs = {"no inputs": [], "no match": [str(tmp_path / "nothing*.json")]}.get(case, [str(bad)])
    with pytest.raises(BadInput):
        cost_curve.curve(cost_curve._paths(inputs))
    out = tmp_path / "out.json"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench.py"), "--op=cost-curve",
                        f"--inputs={','.join(inputs)}", f"--out={out}", "--cache_dir="],
                       env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--inputs" in r.stderr + r.stdout
    assert not out.exists() or json.loads(out.read_text())["rows"] == []
