"""The command-line scripts refuse bad input with one clear line and a non-zero status (no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, JAX_PLATFORMS="cpu")


def _run(script, *args):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], env=ENV, capture_output=True,
                          text=True, timeout=300)


def test_prove_unknown_circuit_and_preset():
    r = _run("prove.py", "--circuit=nope")
    assert r.returncode == 2 and "error: unknown circuit 'nope'" in r.stderr and "Traceback" not in r.stderr
    r = _run("prove.py", "--circuit=cube", "--preset=zzz")
    assert r.returncode == 2 and "unknown preset 'zzz'" in r.stderr and "Traceback" not in r.stderr


def test_prove_bad_msm_impl():
    r = _run("prove.py", "--circuit=cube", "--msm_impl=pre:c=99")
    assert r.returncode == 2 and "bad MSM impl 'pre:c=99'" in r.stderr and "Traceback" not in r.stderr


def test_key_bench_without_cached_key(tmp_path):
    r = _run("key_bench.py", "--circuit=cube", "--preset=default", f"--key_dir={tmp_path}")
    assert r.returncode == 2 and "error: no cached key" in r.stderr and "Traceback" not in r.stderr


def test_prove_missing_zkey(tmp_path):
    r = _run("prove.py", f"--zkey={tmp_path / 'none.zkey'}", f"--wtns={tmp_path / 'none.wtns'}")
    assert r.returncode == 2 and "cannot read file" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "proof.json").exists()


def test_verify_needs_exactly_one_proof_kind(tmp_path):
    r = _run("verify.py", "--vk=x", "--public=y")
    assert r.returncode != 0 and "exactly one of --proofs" in r.stderr
    r = _run("verify.py", f"--vk={tmp_path / 'none.vk'}", "--public=y", "--proofs=z")
    assert r.returncode == 2 and r.stderr.startswith("error:")
