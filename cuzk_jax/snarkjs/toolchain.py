"""Driving the Node toolchain (circom2, snarkjs) from Python, with an on-disk cache of trusted-setup outputs.

Used by tests/test_snarkjs.py and ``cuzk-bench --op=snarkjs``. The tools come from the repository's
``package.json`` (``npm ci`` at the repository root installs snarkjs 0.7.6, circom2 0.2.23, circomlib 2.0.5 into
``node_modules/``); they are run as ``node_modules/.bin/<tool>`` (no ``npx`` start-up cost). :func:`node_modules`
finds them without a source checkout: ``$CUZK_JAX_NODE_MODULES``, else the nearest ``node_modules/`` with snarkjs in
the working directory or one above it, else the source checkout this package was imported from (never
site-packages).

**Deterministic set-up.** ``powersoftau contribute`` / ``zkey contribute`` mix OS randomness into the supplied
entropy (snarkjs ``misc.getRandomRng``), so this module uses the *beacon* forms instead
(``powersoftau beacon`` / ``zkey beacon`` with a fixed beacon hash and 2^10 iterations): the same inputs give
byte-identical ptau / zkey files, which is what makes caching by content hash sound. These keys are for
tests and benchmarks only -- a public beacon string is not a secret.

**Cache.** ``cache_dir()`` (``$CUZK_JAX_SNARKJS_CACHE`` or ``~/.cache/cuzk_jax/snarkjs``) holds
``ptau/pot<power>.ptau`` (prepared for phase 2, shared by every circuit up to that power) and
``circuits/<sha256 of circuit source, input and toolchain versions>/`` with the compiled circuit, zkey,
verification key and witness. ``powersoftau prepare phase2`` dominates (it doubles per power; ~20 s at power 9,
~110 s at 12 on 2 cores), hence the cache. Files are written under a temporary name and renamed, so an
interrupted run never leaves a half-written file that a later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cuzk_jax.errors import ToolchainMissing  # noqa: F401  (re-exported: its old home)

NPM_PACKAGES = "snarkjs@0.7.6 circom2@0.2.23 circomlib@2.0.5"
PTAU_BEACON = hashlib.sha256(b"cuzk_jax powers of tau beacon v1").hexdigest()
ZKEY_BEACON = hashlib.sha256(b"cuzk_jax zkey beacon v1").hexdigest()
BEACON_ITERATIONS_EXP = 10
TOOL_VERSIONS = {"snarkjs": "0.7.6", "circom2": "0.2.23", "circomlib": "2.0.5"}


def source_checkout() -> Path | None:
    """The repository this module was imported from (an editable install or ``PYTHONPATH``), or None (a wheel)."""
    root = Path(__file__).resolve().parents[2]
    if (root / "package.json").is_file() and (root / "cuzk_jax").is_dir() and not {"site-packages",
                                                                                   "dist-packages"} & set(root.parts):
        return root
    return None


def _install_hint() -> str:
    src = source_checkout()
    where = f"run `npm ci` in {src}" if src else f"run `npm install {NPM_PACKAGES}` in this directory"
    return (f"{where}, or point CUZK_JAX_NODE_MODULES at an existing node_modules/ "
            f"(looked in $CUZK_JAX_NODE_MODULES, {Path.cwd()} and its parents" + (f", {src}" if src else "") + ")")


def node_modules() -> Path:
    """The ``node_modules/`` directory holding the toolchain (see the module docstring for the search order);
    ToolchainMissing, with how to install it, when there is none."""
    env = os.environ.get("CUZK_JAX_NODE_MODULES")
    if env:
        return Path(env).expanduser()
    cwd = Path.cwd()
    src = source_checkout()
    for d in (cwd, *cwd.parents, *([src] if src else [])):
        if (d / "node_modules" / "snarkjs").is_dir():
            return d / "node_modules"
    raise ToolchainMissing(f"no node_modules/ with snarkjs found: {_install_hint()}")


def root() -> Path:
    """The directory holding ``node_modules/`` (circom2 resolves ``-l`` include paths relative to its working
    directory, so it runs from here)."""
    return node_modules().resolve().parent


def tool(name: str) -> str:
    """Path of ``node_modules/.bin/<name>``; ToolchainMissing if node or the package is absent."""
    if shutil.which("node") is None:
        raise ToolchainMissing("node is not installed (the circom/snarkjs toolchain needs Node.js >= 18)")
    path = node_modules() / ".bin" / name
    if not path.exists():
        raise ToolchainMissing(f"{path} not found: {_install_hint()}")
    return str(path)


def check_versions() -> None:
    """ToolchainMissing unless the installed packages are the pinned versions."""
    for pkg, want in TOOL_VERSIONS.items():
        pj = node_modules() / pkg / "package.json"
        if not pj.exists():
            raise ToolchainMissing(f"{pkg} is not installed in {node_modules()}: {_install_hint()}")
        have = json.loads(pj.read_text())["version"]
        if have != want:
            raise ToolchainMissing(f"{pkg} {have} is installed, {want} is pinned: {_install_hint()}")


def cache_dir() -> Path:
    d = os.environ.get("CUZK_JAX_SNARKJS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cuzk_jax",
                                                                  "snarkjs")
    return Path(d)


def run(args: list[str], *, cwd=None, timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run a tool; on failure raise RuntimeError with its output."""
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def snarkjs(*args, **kw) -> subprocess.CompletedProcess:
    return run([tool("snarkjs"), *map(str, args)], **kw)


def _publish(tmp: Path, final: Path) -> Path:
    os.replace(tmp, final)
    return final


# ------------------------------------------------------------------------------------------------------------
# Powers of tau
# ------------------------------------------------------------------------------------------------------------


def ptau(power: int, log=print) -> Path:
    """A prepared (phase-2 ready) BLS12-381 powers-of-tau file for domains up to 2^power, cached."""
    d = cache_dir() / "ptau"
    d.mkdir(parents=True, exist_ok=True)
    final = d / f"pot{power:02d}_{PTAU_BEACON[:8]}.ptau"
    if final.exists():
        return final
    t0 = time.perf_counter()
    tag = f"{os.getpid()}"
    p0, p1, p2 = (d / f"tmp{tag}_{k}_{power}.ptau" for k in range(3))
    try:
        snarkjs("powersoftau", "new", "bls12381", power, p0)
        snarkjs("powersoftau", "beacon", p0, p1, PTAU_BEACON, BEACON_ITERATIONS_EXP, "-n=cuzk_jax test beacon")
        snarkjs("powersoftau", "prepare", "phase2", p1, p2)
        _publish(p2, final)
    finally:
        for p in (p0, p1, p2):
            p.unlink(missing_ok=True)
    if log:
        log(f"powers of tau 2^{power}: {time.perf_counter() - t0:.1f} s -> {final}")
    return final


# ------------------------------------------------------------------------------------------------------------
# Circuits
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CircuitArtifacts:
    """Everything generated for one circuit + input, in one cache directory."""

    dir: Path
    name: str
    power: int

    @property
    def r1cs(self) -> Path:
        return self.dir / f"{self.name}.r1cs"

    @property
    def wasm(self) -> Path:
        return self.dir / f"{self.name}_js" / f"{self.name}.wasm"

    @property
    def zkey(self) -> Path:
        return self.dir / f"{self.name}.zkey"

    @property
    def vk(self) -> Path:
        return self.dir / "verification_key.json"

    @property
    def input(self) -> Path:
        return self.dir / "input.json"

    @property
    def wtns(self) -> Path:
        return self.dir / "witness.wtns"


def circuit_key(source: str, input_json: str, extra: str = "") -> str:
    h = hashlib.sha256()
    for part in (source, input_json, json.dumps(TOOL_VERSIONS, sort_keys=True), PTAU_BEACON, ZKEY_BEACON, extra):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def domain_power(n_constraints: int, n_public: int) -> int:
    """snarkjs's domain: the smallest power of two > nConstraints + nPublic (``zkey_new.js`` ``cirPower``)."""
    return max(1, (n_constraints + n_public).bit_length())


def build_circuit(source: str, input_obj: dict, name: str = "circuit", *, optimize: str = "--O1",
                  setup: str = "ceremony", log=print) -> CircuitArtifacts:
    """Compile ``source`` (circom text; may ``include "circomlib/circuits/..."``) for bls12381, make the proving
    key, compute the witness for ``input_obj``; everything cached by content hash.

    ``setup="ceremony"``: a (cached) powers-of-tau with a beacon, ``snarkjs groth16 setup``, ``zkey beacon`` --
    the real snarkjs flow. ``setup="insecure"``: :func:`cuzk_jax.snarkjs.dev_setup.insecure_zkey` (known toxic
    waste, no ptau; for benchmarks at sizes where the ceremony takes hours).
    """
    from .r1cs import read_r1cs

    if setup not in ("ceremony", "insecure"):
        raise ValueError(f"setup must be 'ceremony' or 'insecure', got {setup!r}")
    input_json = json.dumps(input_obj, sort_keys=True)
    key = circuit_key(source, input_json, optimize + setup)
    d = cache_dir() / "circuits" / f"{name}-{setup}-{key}"
    done = d / "DONE"
    if done.exists():
        meta = json.loads(done.read_text())
        return CircuitArtifacts(d, name, meta["power"])
    tmpd = d.with_name(d.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmpd, ignore_errors=True)
    tmpd.mkdir(parents=True)
    try:
        t0 = time.perf_counter()
        art = CircuitArtifacts(tmpd, name, 0)
        (tmpd / f"{name}.circom").write_text(source)
        art.input.write_text(input_json)
        # circom2 runs in a WASI sandbox that resolves include paths relative to the working directory: run it
        # from the directory holding node_modules with -l node_modules (see /work/shared/notes/snarkjs-formats.md).
        run([tool("circom2"), str(tmpd / f"{name}.circom"), "--r1cs", "--wasm", "--sym", "--prime", "bls12381",
             optimize, "-l", str(node_modules()), "-o", str(tmpd)], cwd=root())
        t_compile = time.perf_counter() - t0
        r = read_r1cs(art.r1cs)
        power = domain_power(r.n_constraints, r.n_public)
        t1 = time.perf_counter()
        if setup == "ceremony":
            pt = ptau(power, log=log)
            t1 = time.perf_counter()
            z0 = tmpd / "c0.zkey"
            snarkjs("groth16", "setup", art.r1cs, pt, z0)
            snarkjs("zkey", "beacon", z0, art.zkey, ZKEY_BEACON, BEACON_ITERATIONS_EXP, "-n=cuzk_jax zkey beacon")
            z0.unlink()
        else:
            from .dev_setup import insecure_zkey

            art.zkey.write_bytes(insecure_zkey(r, seed=0))
        snarkjs("zkey", "export", "verificationkey", art.zkey, art.vk)
        t_setup = time.perf_counter() - t1
        snarkjs("wtns", "calculate", art.wasm, art.input, art.wtns)
        meta = {"power": power, "n_constraints": r.n_constraints, "n_wires": r.n_wires, "setup": setup,
                "compile_s": t_compile, "setup_s": t_setup}
        (tmpd / "DONE").write_text(json.dumps(meta))
        shutil.rmtree(d, ignore_errors=True)
        os.replace(tmpd, d)
    except BaseException:
        shutil.rmtree(tmpd, ignore_errors=True)
        raise
    if log:
        log(f"circuit {name} ({r.n_constraints} constraints, 2^{power}): compile {t_compile:.1f} s, "
            f"{setup} setup {t_setup:.1f} s -> {d}")
    return CircuitArtifacts(d, name, power)


def meta(art: CircuitArtifacts) -> dict:
    return json.loads((art.dir / "DONE").read_text())


def witness(art: CircuitArtifacts, input_obj: dict, out: Path) -> Path:
    """Compute a witness for another input of a built circuit."""
    tmp = Path(str(out) + ".in.json")
    tmp.write_text(json.dumps(input_obj))
    try:
        snarkjs("wtns", "calculate", art.wasm, tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def snarkjs_verify(vk, public, proof) -> tuple[bool, str]:
    """``snarkjs groth16 verify``: (True iff it printed OK and exited 0, its output)."""
    proc = snarkjs("groth16", "verify", vk, public, proof, check=False)
    out = proc.stdout + proc.stderr
    return proc.returncode == 0 and "OK!" in out, out


_VERIFY_MANY = r"""
const snarkjs = await import(process.argv[2]);
const fs = await import("fs");
const cases = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const out = [];
for (const [vk, pub, proof] of cases) {
    const read = (p) => JSON.parse(fs.readFileSync(p, "utf8"));
    let ok;
    try { ok = (await snarkjs.groth16.verify(read(vk), read(pub), read(proof))) === true; }
    catch (e) { ok = "error: " + e.message; }
    out.push(ok);
}
console.log(JSON.stringify(out));
process.exit(0);
"""


def snarkjs_verify_many(cases: list[tuple]) -> list[bool | str]:
    """snarkjs's ``groth16.verify`` (the function behind ``snarkjs groth16 verify``) on many
    ``(vk, public, proof)`` path triples in one Node process (one curve initialisation instead of one per case).
    Each result is True (verified), False (rejected) or ``"error: ..."`` (snarkjs threw, e.g. unreadable file)."""
    import tempfile
    from urllib.request import pathname2url

    tool("snarkjs")
    main = node_modules() / "snarkjs" / "main.js"
    with tempfile.TemporaryDirectory() as d:
        script, spec = Path(d) / "verify_many.mjs", Path(d) / "cases.json"
        script.write_text(_VERIFY_MANY)
        spec.write_text(json.dumps([[str(p) for p in c] for c in cases]))
        proc = run(["node", str(script), "file://" + pathname2url(str(main)), str(spec)])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def snarkjs_prove(zkey, wtns, proof, public) -> float:
    """``snarkjs groth16 prove``; returns its wall time in seconds (process start-up included)."""
    t0 = time.perf_counter()
    snarkjs("groth16", "prove", zkey, wtns, proof, public)
    return time.perf_counter() - t0
