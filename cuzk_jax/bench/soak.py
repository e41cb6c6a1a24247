"""``--op=soak``: many small proofs through the engine with random (seeded) fault injection; nothing may be lost.

``--proofs`` proofs (default 10,000) of the ``cube`` circuit in jobs of 1..``--partitions`` partitions, through one
:class:`~cuzk_jax.engine.Engine` (``--soak_backend``: ``device``, the prove pipeline on the default JAX platform,
or ``host``, Python ints; process synthesis workers; batches of up to ``--batch``). At most ``--soak_inflight`` jobs
are outstanding at once (an operator's queue). Each job, drawn from ``random.Random(--seed)``, may carry one fault
(``--soak_faults``, probabilities per job):

* ``kill``   -- one partition's synthesis worker process exits at once (``os._exit``, as if OOM-killed), the first
  time only (:class:`~cuzk_jax.engine.faults.FaultyCube`): the engine replaces the pool and retries; the job and
  every bystander complete;
* ``crash``  -- the same, every time: the job must fail with :class:`~cuzk_jax.engine.WorkerDied` (its
  bystanders complete). A ``kill`` job may fail so too when its partition was first a bystander of another death
  (two deaths, the second alone: the engine's retry-once rule); a job without a fault must never;
* ``cancel`` -- ``future.cancel()`` a few submissions later (wherever the job then is);
* ``unsat``  -- one partition's witness does not satisfy the R1CS (``y`` off by one): the job must fail with
  :class:`~cuzk_jax.errors.Unsatisfied`.

Every returned proof is verified again here (arkworks, batched; each proof alone where a batch fails). The row
reports jobs submitted / done / cancelled / failed (by error class, and whether the failure was the injected
fault), proofs verified, **jobs lost** (a future not done when the engine has drained, or one failed with a
non-project error: must be 0) and **invalid proofs returned** (must be 0), pool restarts and wall time; ``ok`` is
false when either must-be-zero figure is not. ``outcomes_by_fault``: injected fault -> outcome -> jobs.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import random
import tempfile
import time

DEFAULT_FAULTS = "kill=0.01,crash=0.002,cancel=0.02,unsat=0.02"
DEFAULTS = {"batch": 50, "partitions": 2, "max_wait_s": 0.2, "workers": 1}
FAULT_KINDS = ("kill", "crash", "cancel", "unsat")


def parse_faults(text) -> dict[str, float]:
    """``"kill=0.01,crash=0.002,cancel=0.02,unsat=0.02"`` (or a list of ``k=v``) -> probabilities per job."""
    items = text if isinstance(text, (list, tuple)) else [t for t in str(text).split(",") if t.strip()]
    out = {k: 0.0 for k in FAULT_KINDS}
    for item in items:
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or key not in FAULT_KINDS:
            raise ValueError(f"--soak_faults: expected kind=probability with kind in {FAULT_KINDS}, got {item!r}")
        try:
            p = float(value)
        except ValueError:
            raise ValueError(f"--soak_faults: {key}: not a probability: {value!r}") from None
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"--soak_faults: {key}: probability must be in [0, 1], got {p}")
        out[key] = p
    if sum(out.values()) > 1.0:
        raise ValueError(f"--soak_faults: probabilities add up to more than 1: {out}")
    return out


def _draw_fault(rnd: random.Random, probs: dict) -> str | None:
    u, acc = rnd.random(), 0.0
    for kind in FAULT_KINDS:
        acc += probs[kind]
        if u < acc:
            return kind
    return None


def soak(num_proofs: int, *, backend: str = "device", max_batch: int = 50, max_partitions: int = 2,
         faults=None, seed: int = 0, workers: int = 1, max_wait_s: float = 0.2, inflight: int | None = None,
         prover=None, drain_timeout_s: float = 900.0, progress=None) -> dict:
    """Run the soak (see the module docstring); returns the figures as one flat dict."""
    from cuzk_jax.circuits import base
    from cuzk_jax.engine import Engine, HostBackend, WorkerDied
    from cuzk_jax.engine.faults import FaultyCube
    from cuzk_jax.errors import CuzkError
    from cuzk_jax.groth16 import generator, verifier
    from cuzk_jax.reference.constants import R

    if not isinstance(num_proofs, int) or num_proofs < 1:
        raise ValueError(f"--proofs must be a positive int, got {num_proofs!r}")
    if max_partitions < 1:
        raise ValueError(f"--partitions must be at least 1, got {max_partitions}")
    probs = parse_faults(faults if faults is not None else DEFAULT_FAULTS)
    inflight = inflight or 4 * max_batch
    rnd = random.Random(seed)
    circuit, faulty = base.get_circuit("cube"), FaultyCube()
    r1cs = circuit.r1cs()
    pk = generator.setup(r1cs)  # fresh toxic waste (OS CSPRNG)
    markers = tempfile.mkdtemp(prefix="cuzk-soak-")
    kw = dict(max_batch=max_batch, max_wait_s=max_wait_s, synthesis="process", synthesis_workers=workers)
    if backend == "host":
        kw["backend"] = HostBackend()
    elif backend == "device":
        kw["prover"] = prover or None
        kw["sync_phases"] = False
    else:
        raise ValueError(f"--soak_backend must be device or host, got {backend!r}")

    jobs = []  # dicts: future, fault, partitions, cancel_at, cancel_ok
    outstanding: set = set()
    pending_cancels: list = []
    t_start = time.perf_counter()
    with Engine(**kw) as eng:
        eng.preload(circuit, pk)
        eng.warm_up([circuit])
        t_warm = time.perf_counter()
        submitted_proofs, n = 0, 0
        while submitted_proofs < num_proofs:
            P = min(rnd.randint(1, max_partitions), num_proofs - submitted_proofs)
            fault = _draw_fault(rnd, probs)
            inputs = [circuit.sample_inputs(p, seed * 1_000_003 + n) for p in range(P)]
            target = rnd.randrange(P)
            job_circuit = circuit
            if fault == "kill":
                job_circuit = faulty
                inputs[target] = dict(inputs[target], fault=("exit_once", os.path.join(markers, f"job{n}")))
            elif fault == "crash":
                job_circuit = faulty
                inputs[target] = dict(inputs[target], fault=("exit", None))
            elif fault == "unsat":
                inputs[target] = dict(inputs[target], y=(inputs[target]["y"] + 1) % R)
            fut = eng.submit(job_circuit, inputs)
            job = {"future": fut, "fault": fault, "partitions": P, "cancel_ok": None}
            jobs.append(job)
            outstanding.add(fut)
            if fault == "cancel":
                pending_cancels.append((n + rnd.randint(0, 2 * max_batch), job))
            submitted_proofs += P
            n += 1
            for due, j in [c for c in pending_cancels if c[0] <= n]:
                j["cancel_ok"] = j["future"].cancel()
            pending_cancels = [c for c in pending_cancels if c[0] > n]
            while len(outstanding) >= inflight:
                _, outstanding = cf.wait(outstanding, return_when=cf.FIRST_COMPLETED)
                outstanding = set(outstanding)
            if progress and n % 500 == 0:
                progress(f"soak: {submitted_proofs} proofs submitted in {n} jobs, {len(outstanding)} outstanding")
        for _, j in pending_cancels:
            j["cancel_ok"] = j["future"].cancel()
        done, not_done = cf.wait([j["future"] for j in jobs], timeout=drain_timeout_s)
        t_end = time.perf_counter()
        st = eng.status()
        eng.shutdown(wait=False, cancel_pending=True)

    # -- accounting --------------------------------------------------------------------------------------------------
    counts = {"jobs_done": 0, "jobs_cancelled": 0, "jobs_failed": 0, "jobs_lost": 0}
    failed_by_cause: dict[str, int] = {}
    lost_by_cause: dict[str, int] = {}
    unexpected: dict[str, int] = {}
    faults_injected = {k: 0 for k in FAULT_KINDS}
    by_fault: dict[str, dict[str, int]] = {}  # injected fault (or "none") -> outcome -> jobs

    def outcome(j, what):
        d = by_fault.setdefault(j["fault"] or "none", {})
        d[what] = d.get(what, 0) + 1
    publics, proofs, engine_unverified = [], [], 0
    for j in jobs:
        fut = j["future"]
        if j["fault"]:
            faults_injected[j["fault"]] += 1
        if fut not in done:
            outcome(j, "lost")
            counts["jobs_lost"] += 1
            lost_by_cause["never completed"] = lost_by_cause.get("never completed", 0) + 1
            continue
        if fut.cancelled():
            outcome(j, "cancelled")
            counts["jobs_cancelled"] += 1
            continue
        exc = fut.exception()
        outcome(j, "done" if exc is None else type(exc).__name__)
        if exc is None:
            res = fut.result()
            counts["jobs_done"] += 1
            engine_unverified += res.verified is not True
            publics += res.public_inputs
            proofs += res.proofs
            continue
        cause = type(exc).__name__
        if not isinstance(exc, CuzkError):  # not a clear, project error (KeyError, RuntimeError, EngineShutdown...)
            counts["jobs_lost"] += 1
            lost_by_cause[cause] = lost_by_cause.get(cause, 0) + 1
            continue
        counts["jobs_failed"] += 1
        failed_by_cause[cause] = failed_by_cause.get(cause, 0) + 1
        # WorkerDied: expected for a partition that kills its worker every time ("crash"); allowed for one that
        # kills it once ("kill") if it was also a bystander of another death before (two deaths, the second alone)
        expected = ((j["fault"] == "unsat" and cause == "Unsatisfied")
                    or (j["fault"] in ("crash", "kill") and isinstance(exc, WorkerDied)))
        if not expected:
            unexpected[cause] = unexpected.get(cause, 0) + 1
    t_verify = time.perf_counter()
    invalid = 0
    for k in range(0, len(proofs), 500):
        chunk_p, chunk_x = proofs[k:k + 500], publics[k:k + 500]
        if not verifier.verify_batch(pk.vk, chunk_x, chunk_p):
            invalid += verifier.verify_each(pk.vk, chunk_x, chunk_p).count(False)
    t_verify = time.perf_counter() - t_verify
    wall = t_end - t_start
    row = {
        "backend": backend, "proofs_requested": num_proofs, "jobs_submitted": len(jobs),
        "proofs_submitted": sum(j["partitions"] for j in jobs), **counts,
        "proofs_returned": len(proofs), "proofs_verified": len(proofs) - invalid, "invalid_proofs_returned": invalid,
        "engine_verified_false": engine_unverified,
        "failed_by_cause": failed_by_cause, "outcomes_by_fault": by_fault, "unexpected_failures": unexpected, "lost_by_cause": lost_by_cause,
        "faults_injected": faults_injected,
        "cancels_accepted": sum(1 for j in jobs if j["cancel_ok"]),
        "pool_restarts": st["synthesis"]["pool_restarts"], "resynthesized": st["synthesis"]["resynthesized"],
        "batches": st["batches"], "batch_sizes": st["batch_sizes"],
        "phase_seconds": {k: round(v, 3) for k, v in st["phase_seconds"].items()},
        "wall_s": round(wall, 2), "warmup_s": round(t_warm - t_start, 2),
        "proofs_per_s": round(len(proofs) / (t_end - t_warm), 2) if t_end > t_warm else 0.0,
        "recheck_verify_s": round(t_verify, 2),
        "max_batch": max_batch, "max_partitions": max_partitions, "inflight": inflight, "workers": workers,
        "fault_probabilities": probs, "seed": seed,
    }
    row["ok"] = row["jobs_lost"] == 0 and invalid == 0 and engine_unverified == 0
    return row


def run(cfg) -> list[dict]:
    from cuzk_jax import bench

    row = soak(cfg.proofs, backend=cfg.soak_backend, max_batch=cfg.batch, max_partitions=cfg.partitions,
               faults=cfg.soak_faults, seed=cfg.seed, workers=cfg.workers or 1, max_wait_s=cfg.max_wait_s,
               inflight=cfg.soak_inflight or None, prover=cfg.prover or None, progress=lambda m: print(m, flush=True))
    if cfg.soak_note:
        row["note"] = cfg.soak_note
    rows: list[dict] = []
    bench.emit(rows, row)
    return rows
