"""The command-line entry points: ``--help`` lists each command's own flags and exits 0; bad flags and bad input end
with one clear line on stderr and exit status 2 (no traceback); ``python -m cuzk_jax <command>`` runs the same mains.
No test here proves (the proving CLI test is tests/test_snarkjs.py::test_cli_scripts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, JAX_PLATFORMS="cpu")
COMMANDS = ("prove", "setup", "verify", "bench")


def _run(script, *args, cwd=None):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], env=ENV, capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def _module(*args):
    return subprocess.run([sys.executable, "-m", "cuzk_jax", *args], env=ENV, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def _one_error_line(r, text):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], r.stderr


@pytest.mark.parametrize("command,own_flag", [("prove", "--zkey"), ("setup", "--preset"), ("verify", "--proofs"),
                                              ("bench", "--op")])
def test_help_lists_own_flags(command, own_flag):
    r = _run(f"{command}.py", "--help")
    assert r.returncode == 0 and f"{own_flag}:" in r.stdout, r.stdout + r.stderr
    assert "--verbosity" not in r.stdout  # absl's own flags stay under --helpfull


def test_python_m_cuzk_jax():
    r = _module("verify", "--help")
    assert r.returncode == 0 and "--proofs" in r.stdout and "--vk" in r.stdout, r.stderr
    r = _module("--help")
    assert r.returncode == 0 and all(c in r.stdout for c in COMMANDS)
    _one_error_line(_module("nope"), "unknown command 'nope'")
    _one_error_line(_module("bench", "--nope"), "Unknown command line flag 'nope'")


def test_unknown_flag_and_bad_flag_value():
    for command in COMMANDS:
        _one_error_line(_run(f"{command}.py", "--no_such_flag=1"), "no_such_flag")
    _one_error_line(_run("prove.py", "--sectors=many"), "sectors")
    _one_error_line(_run("bench.py", "--op=nope"), "unknown --op nope")
    _one_error_line(_run("setup.py", "stray"), "unexpected arguments")


def test_prove_unknown_circuit_and_preset():
    _one_error_line(_run("prove.py", "--circuit=nope"), "unknown circuit 'nope'")
    _one_error_line(_run("prove.py", "--circuit=cube", "--preset=zzz"), "unknown preset 'zzz'")


def test_prove_bad_prover_config():
    _one_error_line(_run("prove.py", "--circuit=cube", "--prover=tables=on,window=99"), "window must be in 2..")
    _one_error_line(_run("prove.py", "--circuit=cube", "--prover=msm=cuda"), "unknown MsmConfig kernel 'cuda'")


def test_bench_keyload_without_cached_key(tmp_path):
    _one_error_line(_run("bench.py", "--op=keyload", "--circuit=cube", "--preset=default", f"--key_dir={tmp_path}",
                         f"--out={tmp_path / 'k.json'}", "--cache_dir="), "no cached key")


def test_prove_missing_zkey(tmp_path):
    r = _run("prove.py", f"--zkey={tmp_path / 'none.zkey'}", f"--wtns={tmp_path / 'none.wtns'}", cwd=tmp_path)
    _one_error_line(r, "cannot read file")
    assert not (tmp_path / "proof.json").exists()


def test_paths_expand_home(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "verify.py"), "--vk=~/none.vk", "--public=y",
                        "--proofs=z"], env=dict(ENV, HOME=str(tmp_path)), capture_output=True, text=True, timeout=300)
    _one_error_line(r, str(tmp_path / "none.vk"))


def test_verify_needs_exactly_one_proof_kind(tmp_path):
    _one_error_line(_run("verify.py", "--vk=x", "--public=y"), "exactly one of --proofs")
    r = _run("verify.py", f"--vk={tmp_path / 'none.vk'}", "--public=y", "--proofs=z")
    assert r.returncode == 2 and r.stderr.startswith("error:")


def test_node_modules_lookup_without_source_checkout(tmp_path, monkeypatch):
    """As from an installed wheel (``__file__`` under site-packages): $CUZK_JAX_NODE_MODULES, else the working
    directory or a parent of it; never site-packages; a clear install hint when there is none."""
    from cuzk_jax.errors import ToolchainMissing
    from cuzk_jax.snarkjs import toolchain

    site = tmp_path / "venv" / "lib" / "site-packages"
    (site / "node_modules" / "snarkjs").mkdir(parents=True)  # a stray one in site-packages is not used
    monkeypatch.setattr(toolchain, "__file__", str(site / "cuzk_jax" / "snarkjs" / "toolchain.py"))
    monkeypatch.delenv("CUZK_JAX_NODE_MODULES", raising=False)
    assert toolchain.source_checkout() is None
    project = tmp_path / "project"
    (project / "node_modules" / "snarkjs").mkdir(parents=True)
    (project / "sub" / "dir").mkdir(parents=True)
    monkeypatch.chdir(project / "sub" / "dir")
    assert toolchain.node_modules() == project / "node_modules" and toolchain.root() == project.resolve()
    monkeypatch.setenv("CUZK_JAX_NODE_MODULES", "~/nm")
    assert toolchain.node_modules() == Path(os.path.expanduser("~/nm"))
    monkeypatch.delenv("CUZK_JAX_NODE_MODULES")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(ToolchainMissing, match="npm install snarkjs@0.7.6 circom2@0.2.23 circomlib@2.0.5"):
        toolchain.node_modules()


def test_node_modules_from_the_source_checkout(tmp_path, monkeypatch):
    from cuzk_jax.snarkjs import toolchain

    monkeypatch.delenv("CUZK_JAX_NODE_MODULES", raising=False)
    monkeypatch.chdir(tmp_path)
    assert toolchain.source_checkout() == ROOT  # this test runs from the source tree
    if (ROOT / "node_modules" / "snarkjs").is_dir():
        assert toolchain.node_modules() == ROOT / "node_modules"


def test_console_scripts_name_the_mains():
    """pyproject's cuzk-<command> entry points and ``python -m cuzk_jax <command>`` reach the same ``run``; the
    daemon has ``cuzk-serve`` and ``cuzk-jax serve`` (the dispatcher itself)."""
    import importlib.util
    import tomllib

    from cuzk_jax import __main__ as dispatch

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    mains = {f"cuzk-{c}": f"cuzk_jax.scripts.{c}:run" for c in COMMANDS}
    service = {"cuzk-serve": "cuzk_jax.scripts.serve:run", "cuzk-jax": "cuzk_jax.__main__:main"}
    assert scripts == {**mains, **service} and set(dispatch.COMMANDS) == set(COMMANDS)
    assert set(dispatch.SERVICE_COMMANDS) == {"serve", "client"}
    for c in COMMANDS:  # the modules define flags: check the attribute without importing them into this process
        assert "\ndef run():" in (ROOT / "scripts" / f"{c}.py").read_text()
    assert importlib.util.find_spec("cuzk_jax.scripts.prove") is not None


def test_bench_refuses_unknown_kernel(tmp_path):
    _one_error_line(_run("bench.py", "--op=kernel-compile", "--kernel=nope", f"--out={tmp_path / 'k.json'}",
                         "--cache_dir="), "unknown --kernel nope")


# ---------------------------------------------------------------------------------------------------------------
# Exit codes (issue 21): 0 ok, 1 a proof did not verify, 2 bad usage or bad input -- one line, no traceback
# ---------------------------------------------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000  # json.loads -> RecursionError


def _not_a_proof_files(tmp_path):
    """A well-formed key and proof (generator points: valid, in the subgroup) that do not verify, in both formats."""
    import json

    from cuzk_jax.groth16.data_structures import Proof, VerifyingKey
    from cuzk_jax.reference.curve import g1, g2
    from cuzk_jax.snarkjs import jsonio

    G1, G2 = g1.generator, g2.generator
    ic = [g1.mul(G1, 3), g1.mul(G1, 2)]
    (tmp_path / "vk.json").write_text(json.dumps(jsonio.vk_to_json(jsonio.VerificationKey(
        n_public=1, alpha1=G1, beta2=G2, gamma2=G2, delta2=G2, ic=ic))))
    proof = Proof(g1.mul(G1, 5), G2, g1.mul(G1, 7))
    (tmp_path / "proof.json").write_text(json.dumps(jsonio.proof_to_json(proof)))
    (tmp_path / "sector.vk").write_bytes(VerifyingKey(G1, G2, G2, G2, ic).to_bytes())
    (tmp_path / "sector.proofs").write_bytes(proof.to_bytes())


def _verify_status(r, status, invalid_text, error_text):
    """verify.py's contract: 1 with the invalid-proof line on stdout and nothing on stderr, else 2 with one line."""
    if status == 1:
        assert r.returncode == 1 and invalid_text in r.stdout and not r.stderr.strip(), r.stdout + r.stderr
    else:
        _one_error_line(r, error_text)


@pytest.mark.parametrize("public,status,text", [
    ('["5"]', 1, None),  # well-formed, does not verify
    ('["52435875175126190479447740508185965837690552500527637822603658699938581184513"]', 2, "public.json"),  # r
    ("null", 2, "public.json"),
    (DEEP, 2, "public.json"),
    ('["1", "2"]', 2, "public"),  # more inputs than the key has
    ("[35.9]", 2, "public.json"),
], ids=["invalid", "ge_r", "null", "deep", "too_many", "float"])
def test_verify_snarkjs_exit_codes(tmp_path, public, status, text):
    _not_a_proof_files(tmp_path)
    (tmp_path / "public.json").write_text(public)
    r = _run("verify.py", f"--vk={tmp_path / 'vk.json'}", f"--public={tmp_path / 'public.json'}",
             f"--proof={tmp_path / 'proof.json'}")
    _verify_status(r, status, "Invalid proof", text)


@pytest.mark.parametrize("which", ["vk.json", "proof.json"])
def test_verify_snarkjs_malformed_key_or_proof(tmp_path, which):
    _not_a_proof_files(tmp_path)
    (tmp_path / "public.json").write_text('["5"]')
    (tmp_path / which).write_text("null")
    r = _run("verify.py", f"--vk={tmp_path / 'vk.json'}", f"--public={tmp_path / 'public.json'}",
             f"--proof={tmp_path / 'proof.json'}")
    _one_error_line(r, which)
    (tmp_path / which).write_text(DEEP)
    _one_error_line(_run("verify.py", f"--vk={tmp_path / 'vk.json'}", f"--public={tmp_path / 'public.json'}",
                         f"--proof={tmp_path / 'proof.json'}"), which)


@pytest.mark.parametrize("public,status", [
    ('{"public_inputs": [["5"]]}', 1),
    ('{"public_inputs": [["52435875175126190479447740508185965837690552500527637822603658699938581184513"]]}', 2),
    ("null", 2),
    (DEEP, 2),
    ('{"public_inputs": [["1", "2"]]}', 2),
], ids=["invalid", "ge_r", "null", "deep", "too_many"])
def test_verify_sector_exit_codes(tmp_path, public, status):
    _not_a_proof_files(tmp_path)
    (tmp_path / "s.public.json").write_text(public)
    r = _run("verify.py", f"--vk={tmp_path / 'sector.vk'}", f"--public={tmp_path / 's.public.json'}",
             f"--proofs={tmp_path / 'sector.proofs'}")
    _verify_status(r, status, "partition 0: INVALID", "s.public.json")


def test_output_paths_checked_before_any_work(tmp_path):
    """An unwritable output path fails at once (exit 2, one line naming the flag), before synthesis, setup, reading
    the inputs or measuring."""
    r = _run("prove.py", "--circuit=cube", "--out=/proc/cuzk-nope/out", f"--key_dir={tmp_path}", "--cache_dir=")
    _one_error_line(r, "--out=/proc/cuzk-nope/out: cannot write there")
    assert "synthesizing" not in r.stdout and not list(tmp_path.iterdir())
    _one_error_line(_run("prove.py", "--circuit=cube", "--out=", "--timings_json=/proc/version/t.json",
                         "--cache_dir="), "--timings_json=/proc/version/t.json")
    # snarkjs mode: the output is checked before the (missing) zkey is read
    _one_error_line(_run("prove.py", f"--zkey={tmp_path / 'none.zkey'}", f"--wtns={tmp_path / 'none.wtns'}",
                         "--proof=/proc/cuzk-nope/proof.json", "--cache_dir="), "--proof=/proc/cuzk-nope/proof.json")
    _one_error_line(_run("prove.py", f"--zkey={tmp_path / 'none.zkey'}", f"--wtns={tmp_path / 'none.wtns'}",
                         f"--proof={tmp_path}", "--cache_dir="), "is a directory")
    _one_error_line(_run("setup.py", "--circuit=cube", "--key_dir=/proc/cuzk-nope/keys", "--cache_dir="),
                    "--key_dir=/proc/cuzk-nope/keys")
    _one_error_line(_run("bench.py", "--op=field", "--out=/proc/cuzk-nope/b.json", "--cache_dir="),
                    "--out=/proc/cuzk-nope/b.json")


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    """A write that fails (a full disk: ENOSPC at fsync) leaves neither a temporary file nor a changed target, and
    says which file in one line; a write that succeeds replaces the target."""
    import errno

    from cuzk_jax import cli, fileio

    target = tmp_path / "proof.json"
    fileio.atomic_write(str(target), "old")
    mask = os.umask(0)
    os.umask(mask)
    assert target.read_text() == "old" and target.stat().st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's 0600

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio.os, "fsync", full)
    with pytest.raises(OSError) as info:
        fileio.atomic_write(str(target), "new" * 1000)
    assert info.value.filename == str(target) and "No space left" in cli._os_error(info.value)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["proof.json"]
    monkeypatch.undo()
    fileio.atomic_write(str(target), b"new")
    assert target.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["proof.json"]


def test_prove_fullprove_flags_go_together(tmp_path):
    _one_error_line(_run("prove.py", f"--zkey={tmp_path / 'c.zkey'}", f"--wasm={tmp_path / 'c.wasm'}"),
                    "--zkey, --wasm and --input go together")
    _one_error_line(_run("prove.py", f"--zkey={tmp_path / 'c.zkey'}", f"--wasm={tmp_path / 'c.wasm'}",
                         f"--input={tmp_path / 'i.json'}", f"--wtns={tmp_path / 'w.wtns'}"), "without --wtns")
    _one_error_line(_run("prove.py", f"--zkey={tmp_path / 'c.zkey'}", f"--wasm={tmp_path / 'c.wasm'}",
                         f"--input={tmp_path / 'i.json'}", f"--proof={tmp_path / 'p.json'}",
                         f"--public={tmp_path / 'pub.json'}"), "cannot read file")


@pytest.mark.parametrize("op,impl,text", [("msm", "pallas:bogus=1", "unknown MsmConfig option 'bogus'"),
                                          ("msm", "split:pallas:dist=uniform", "bad dist"),
                                          ("ntt", "pallas:lookahead=1", "unknown NttConfig option 'lookahead'")])
def test_bench_malformed_impl_is_a_usage_error(tmp_path, op, impl, text):
    """A malformed ``--impl`` of the MSM and NTT benchmarks: one error line naming it, exit 2, no JSON file (not a
    row with an error and exit 0)."""
    out = tmp_path / "bad.json"
    _one_error_line(_run("bench.py", f"--op={op}", "--log_n=8", f"--impl={impl}", f"--out={out}", "--cache_dir="),
                    text)
    assert not out.exists()


def test_bench_stage_rows_equal_and_bad_impl(tmp_path):
    """``bench --op=stage``: the threaded rows give the same device array as the rows one after another; an unknown
    way is one usage error before any work."""
    import json

    out = tmp_path / "stage.json"
    r = _run("bench.py", "--op=stage", "--log_n=10", "--batch=2", "--reps=1", "--warmup=0", "--impl=rows,rows4",
             f"--out={out}", "--cache_dir=")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [row["impl"] for row in rows] == ["rows", "rows4"] and all(row["equal"] for row in rows)
    _one_error_line(_run("bench.py", "--op=stage", "--impl=packed", f"--out={tmp_path / 'bad.json'}",
                         "--cache_dir="), "unknown --impl packed")
