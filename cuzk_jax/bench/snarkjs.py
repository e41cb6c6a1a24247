"""``--op=snarkjs``: ``snarkjs groth16 prove`` vs cuzk_jax on the same zkey and witness, per domain size.

Circuit: a chain of circomlib Poseidon(2) hashes compiled with ``--O2`` (~243 constraints per hash), sized to fill
a domain of 2^k (``n_hash = (2^k - 3) // 243``). Both provers read the same ``.zkey`` / ``.wtns`` files.

What is timed (median of ``reps`` after ``warmup`` runs, wall clock):

* ``snarkjs``: ``groth16.prove(zkeyFile, wtnsFile)`` in one Node process (the function behind the CLI; it reads
  both files on every call), so Node start-up and curve initialisation are excluded -- the kindest number for
  snarkjs. ``snarkjs_cli_s`` is one run of the CLI for reference.
* ``cuzk_jax``: ``prove(zkey, witness, sync_phases=False)`` with the key resident in memory (and, for
  ``device``, uploaded): ``median_s``; ``read_s`` is parsing the zkey (with curve checks) and witness once;
  ``first_s`` is the first call (includes jit compilation, or a hit in the persistent compilation cache); the
  ``*_s`` phase columns come from one extra phase-synchronised run.

Every cuzk_jax proof of a run is checked by ``snarkjs groth16 verify`` (when Node is available) or by our
verifier (``verified`` says which). Ratio = snarkjs median / cuzk_jax median.

On a machine without Node (the GPU host), pass prepared artifacts (``export_dir`` on the CPU host, then
``artifacts_dir`` on the GPU) and ``baseline`` = the CPU run's JSON to take the snarkjs figures from.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from pathlib import Path

from cuzk_jax import bench as _bench
from cuzk_jax.snarkjs import jsonio, prover, toolchain, verifier, wtns
from cuzk_jax.snarkjs.zkey import read_zkey

CONSTRAINTS_PER_HASH = 243  # circomlib Poseidon(2) with --O2 (measured: 16 hashes -> 3888 constraints)


def chain_source(n_hash: int) -> str:
    return f"""pragma circom 2.0.0;
include "circomlib/circuits/poseidon.circom";
// Benchmark circuit: a chain of {n_hash} Poseidon(2) hashes (circomlib; bn128 constants, valid on bls12381).
template Chain(n) {{
    signal input x;
    signal input y;
    signal output out;
    component h[n];
    signal acc[n + 1];
    acc[0] <== x;
    for (var i = 0; i < n; i++) {{
        h[i] = Poseidon(2);
        h[i].inputs[0] <== acc[i];
        h[i].inputs[1] <== y;
        acc[i + 1] <== h[i].out;
    }}
    out <== acc[n];
}}
component main {{public [x]}} = Chain({n_hash});
"""


CHAIN_INPUT = {"x": "1", "y": "2"}


def n_hash_for(log_n: int) -> int:
    return max(1, ((1 << log_n) - 3) // CONSTRAINTS_PER_HASH)


def prepare(log_n: int, setup: str = "auto", log=print) -> toolchain.CircuitArtifacts:
    """Build (or fetch from the cache) the chain circuit for a 2^log_n domain. ``setup="auto"``: the real
    ceremony if log_n <= 12 or a prepared ptau of that power is cached, else the insecure dev setup."""
    if setup == "auto":
        cached = (toolchain.cache_dir() / "ptau" / f"pot{log_n:02d}_{toolchain.PTAU_BEACON[:8]}.ptau").exists()
        setup = "ceremony" if (log_n <= 12 or cached) else "insecure"
    return toolchain.build_circuit(chain_source(n_hash_for(log_n)), CHAIN_INPUT, f"chain{log_n}", optimize="--O2",
                                   setup=setup, log=log)


def export(art: toolchain.CircuitArtifacts, dest: Path, with_zkey: bool = True) -> Path:
    """Copy the files a Node-less machine needs to ``dest/<dir name>``: witness, verification key, meta, and the
    zkey -- or, for an insecure-setup key with ``with_zkey=False``, the r1cs instead, from which
    :func:`load_artifacts` regenerates the byte-identical zkey there (smaller to carry, but the regeneration costs
    minutes of host CPU on the other machine)."""
    out = Path(dest) / art.dir.name
    out.mkdir(parents=True, exist_ok=True)
    meta = toolchain.meta(art)
    if not with_zkey and meta.get("setup") != "insecure":
        raise ValueError("only insecure-setup keys can be regenerated from the r1cs; export the zkey")
    files = [(art.wtns, "witness.wtns"), (art.vk, "verification_key.json"), (art.dir / "DONE", "meta.json")]
    files.append((art.zkey, "circuit.zkey") if with_zkey else (art.r1cs, "circuit.r1cs"))
    for src, name in files:
        shutil.copyfile(src, out / name)
    return out


def load_artifacts(d: Path, log=print) -> tuple[Path, Path, Path, dict]:
    """(zkey, wtns, vk, meta) of an exported directory; regenerates an insecure-setup zkey from the r1cs if needed
    and checks it against the exported verification key (so both machines prove with the same key)."""
    d = Path(d)
    meta = json.loads((d / "meta.json").read_text())
    zkey_p, vk_p = d / "circuit.zkey", d / "verification_key.json"
    if not zkey_p.exists():
        if meta.get("setup") != "insecure":
            raise FileNotFoundError(f"{zkey_p} missing (only insecure-setup keys can be regenerated)")
        from cuzk_jax.snarkjs.dev_setup import write_insecure_zkey

        t0 = time.perf_counter()
        write_insecure_zkey(d / "circuit.r1cs", zkey_p, seed=0)
        vk = jsonio.vk_to_json(verifier.verification_key_from_zkey(read_zkey(zkey_p, check_points=False)))
        if vk != json.loads(vk_p.read_text()):
            zkey_p.unlink()
            raise ValueError(f"regenerated zkey in {d} does not match the exported verification key")
        if log:
            log(f"regenerated {zkey_p} in {time.perf_counter() - t0:.1f} s (matches verification_key.json)")
    return zkey_p, d / "witness.wtns", vk_p, meta


_SNARKJS_TIMER = r"""
const snarkjs = await import(process.argv[2]);
const [zkey, wtns, warm, reps] = [process.argv[3], process.argv[4], +process.argv[5], +process.argv[6]];
const times = [];
for (let i = 0; i < warm + reps; i++) {
    const t0 = performance.now();
    await snarkjs.groth16.prove(zkey, wtns);
    if (i >= warm) times.push((performance.now() - t0) / 1000);
}
console.log(JSON.stringify(times));
process.exit(0);
"""


def time_snarkjs(zkey: Path, wtns_path: Path, reps: int, warmup: int) -> dict:
    import tempfile
    from urllib.request import pathname2url

    main = toolchain.node_modules() / "snarkjs" / "main.js"
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "timer.mjs"
        script.write_text(_SNARKJS_TIMER)
        proc = toolchain.run(["node", str(script), "file://" + pathname2url(str(main)), str(zkey), str(wtns_path),
                              str(warmup), str(reps)])
        times = json.loads(proc.stdout.strip().splitlines()[-1])
        cli = toolchain.snarkjs_prove(zkey, wtns_path, Path(d) / "p.json", Path(d) / "pub.json")
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "reps": len(times),
            "snarkjs_cli_s": cli}


def _backend(impl: str):
    if impl == "host":
        return prover.HostBackend()
    from cuzk_jax.snarkjs import device

    if impl == "device":
        return device.DeviceBackend()
    raise ValueError(f"unknown impl {impl!r}; expected snarkjs, host, device")


def time_cuzk(zkey_path: Path, wtns_path: Path, vk_path: Path, impl: str, reps: int, warmup: int,
              workdir: Path, node: bool) -> dict:
    t0 = time.perf_counter()
    zk = read_zkey(zkey_path)
    w = wtns.read_wtns(wtns_path)
    read_s = time.perf_counter() - t0
    be = _backend(impl)
    t0 = time.perf_counter()
    first = prover.prove(zk, w, backend=be)
    first_s = time.perf_counter() - t0
    for _ in range(max(0, warmup - 1)):
        prover.prove(zk, w, backend=be)
    times = []
    res = first
    for _ in range(reps):  # the timed runs are pipelined (one wait per proof)
        t0 = time.perf_counter()
        res = prover.prove(zk, w, backend=be, sync_phases=False)
        times.append(time.perf_counter() - t0)
    phases = [prover.prove(zk, w, backend=be).timings]  # one phase-synchronised run for the breakdown
    proof_p, pub_p = workdir / f"proof-{impl}.json", workdir / f"public-{impl}.json"
    jsonio.write_proof(proof_p, res.proof)
    jsonio.write_public(pub_p, res.public)
    if node:
        ok, _ = toolchain.snarkjs_verify(vk_path, pub_p, proof_p)
        how = "snarkjs"
    else:
        ok, how = verifier.verify(vk_path, pub_p, proof_p), "cuzk_jax"
    row = {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "reps": reps,
           "first_s": first_s, "read_s": read_s, "verified": bool(ok), "verified_by": how}
    for k in ("qap_evals", "h", "msm", "combine"):
        row[f"{k}_s"] = statistics.median(p[k] for p in phases)
    return row


def run_sizes(log_ns: list[int], impls: list[str], *, reps: int = 3, warmup: int = 1, setup: str = "auto",
        artifacts_dir: str = "", export_dir: str = "", export_zkey: bool = True, baseline: str = "",
        log=print) -> list[dict]:
    """Rows (one per size and implementation) for the JSON/table of ``cuzk-bench --op=snarkjs``."""
    import tempfile

    node = True
    try:
        toolchain.tool("snarkjs")
    except toolchain.ToolchainMissing:
        node = False
    base = {}
    for path in filter(None, baseline.split(",")):
        for r in json.loads(Path(path).read_text())["rows"]:
            if r["impl"] == "snarkjs":
                base[r["circuit"]] = r
    rows = []
    for log_n in log_ns:
        if artifacts_dir:
            matches = sorted(Path(artifacts_dir).glob(f"chain{log_n}-*"))
            if not matches:
                raise FileNotFoundError(f"no chain{log_n}-* artifacts under {artifacts_dir}")
            d = matches[-1]
            zkey_p, wtns_p, vk_p, meta = load_artifacts(d, log=log)
            circuit = d.name
        else:
            art = prepare(log_n, setup, log=log)
            if export_dir:
                export(art, Path(export_dir), with_zkey=export_zkey)
            zkey_p, wtns_p, vk_p = art.zkey, art.wtns, art.vk
            meta = toolchain.meta(art)
            circuit = art.dir.name
        common = {"loadavg_1m": round(os.getloadavg()[0], 2), "host_cpus": os.cpu_count(),
                  "circuit": circuit, "log_n": meta["power"], "constraints": meta["n_constraints"],
                  "wires": meta["n_wires"], "setup": meta.get("setup", "ceremony"),
                  "zkey_mb": round(os.path.getsize(zkey_p) / 2**20, 1)}
        snark = None
        for impl in impls:
            if impl == "snarkjs":
                if not node:
                    log("snarkjs: node not available here, skipped (use --baseline)")
                    continue
                r = time_snarkjs(zkey_p, wtns_p, reps, warmup)
                snark = r["median_s"]
            else:
                with tempfile.TemporaryDirectory() as wd:
                    r = time_cuzk(zkey_p, wtns_p, vk_p, impl, reps, warmup, Path(wd), node)
            row = {**common, "impl": impl, **r}
            rows.append(row)
            _bench.emit([], row)  # to the registered sinks (scripts write partial JSON)
            log(json.dumps(row))
        if snark is None and circuit in base:
            snark = base[circuit]["median_s"]
        for row in rows:
            if row["circuit"] == circuit and row["impl"] != "snarkjs" and snark:
                row["snarkjs_median_s"] = snark
                row["speedup_vs_snarkjs"] = snark / row["median_s"]
    return rows


DEFAULTS = {"log_n": ["12", "16"], "impl": ["snarkjs", "device"], "reps": 3, "warmup": 1}


def run(cfg) -> list[dict]:
    return run_sizes([int(k) for k in cfg.log_n], list(cfg.impl), reps=cfg.reps, warmup=cfg.warmup, setup=cfg.setup,
                      artifacts_dir=cfg.artifacts_dir, export_dir=cfg.export_dir, export_zkey=cfg.export_zkey,
                      baseline=cfg.baseline)
