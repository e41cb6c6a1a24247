"""``--op=kinds``: Filecoin's other proof kinds (WinningPoSt, WindowPoSt, SnapDeals) -- time per proof and device
memory per kind, and a WinningPoSt proof's latency while a PoRep sector is being proved through the engine.

``--impl`` lists what to run (default: the three kinds at ``--preset``, then the latency row):

* ``<kind>[:<preset>[:<partitions>]]`` with kind ``winning_post``, ``window_post`` or ``snap_update``: one row.
  Preset default ``--preset`` (else ``tiny``); partitions default the kind's own count where Filecoin fixes it
  (WinningPoSt: 1), else ``--partitions``. The sector bench's order, so that a full-size partition fits: the
  witnesses (native sampling + synthesis of all partitions, :mod:`cuzk_jax.circuits.block_witness` in
  ``--workers`` processes, 0 = one per CPU; ``synth_s`` their own time, ``synth_wait_s`` what was left after the
  key) are made while the key is set up in memory (``setup_s``, not cached on disk: full-size keys are tens of
  GiB) and made resident with the setup's queries consumed (``resident_s``; ``plan``: the memory plan,
  ``--prover`` sets its budgets). One untimed proof compiles every program; then ``--reps`` proofs of the same
  witnesses (one ready batch of canonical limbs) through the resident key: ``prove_s`` is their median,
  ``per_partition_s`` = prove_s / partitions. Proofs are
  verified (arkworks pairing) and a wrong public input must be rejected (``ok``). Device memory: JAX's
  ``memory_stats()`` of device 0 where the platform reports it (GPU): ``key_resident_gib`` (the resident key's own
  arrays), ``device_in_use_gib`` after proving, ``device_peak_gib`` the process peak so far (cumulative over the
  rows of one run: run one kind per invocation for a per-kind peak); ``host_peak_gib`` / ``workers_peak_gib``
  the host's resident peaks so far (this process / its largest finished worker), cumulative likewise.
* ``latency[:<porep preset>[:<winning preset>]]``: an :class:`~cuzk_jax.engine.Engine` with both keys resident
  (batch shapes 1 and the PoRep partitions, synthesis in ``--synthesis`` workers). Measured, after a warm-up of
  both circuits: a WinningPoSt job alone (``winning_alone_s``: submit to verified result), a ``porep_like``
  sector of ``--partitions`` partitions alone (``porep_alone_s``), then the sector again with a WinningPoSt job
  submitted half its alone-latency later (``winning_during_porep_s``, ``porep_with_winning_s``): the engine's
  priority classes let the WinningPoSt batch run at the next batch boundary, ahead of any queued PoRep batch.

The table prints last; rows go to the JSON (``--out``) as they finish.

  python scripts/bench.py --op=kinds --impl=winning_post:full,window_post:d20,snap_update:d20p,latency:domain20
"""

from __future__ import annotations

import concurrent.futures
import statistics
import time

from . import emit

KINDS = ("winning_post", "window_post", "snap_update")
DEFAULTS = {"reps": 3, "warmup": 1}


def _gib(x) -> float | None:
    return None if x is None else round(x / 2**30, 3)


def _memory() -> dict:
    import jax

    try:
        st = jax.devices()[0].memory_stats() or {}
    except Exception:  # noqa: BLE001 - platforms without memory stats (CPU) report nothing
        st = {}
    from cuzk_jax import bench

    return {"device_in_use_gib": _gib(st.get("bytes_in_use")), "device_peak_gib": _gib(st.get("peak_bytes_in_use")),
            **bench.host_peak()}


def _parse(cfg) -> list[tuple]:
    tokens = list(cfg.impl) or list(KINDS) + ["latency"]
    out = []
    for tok in tokens:
        parts = tok.split(":")
        if parts[0] in KINDS:
            if len(parts) > 3:
                raise ValueError(f"--impl {tok!r}: expected kind[:preset[:partitions]]")
            parts_n = int(parts[2]) if len(parts) > 2 else None
            out.append(("kind", parts[0], parts[1] if len(parts) > 1 and parts[1] else None, parts_n))
        elif parts[0] == "latency":
            out.append(("latency", parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else None))
        else:
            raise ValueError(f"--impl {tok!r}: expected one of {', '.join(KINDS)}, latency (with :preset)")
    return out


def _witnesses(circuit, P: int, seed: int, workers: int | None, num_vars: int) -> dict:
    """Sampling and witness synthesis of ``P`` partitions as canonical limbs (:mod:`cuzk_jax.circuits.block_witness`
    in ``workers`` processes): ``{"z", "publics", "synth_s"}``."""
    from cuzk_jax.circuits import block_witness

    t0 = time.perf_counter()
    try:
        z, publics = block_witness.witness_batch(circuit, P, seed, workers=workers, num_vars=num_vars)
    finally:
        block_witness.shutdown_pool()  # the workers' heaps (GiB at full size) go before the prove
    return {"z": z, "publics": publics, "synth_s": time.perf_counter() - t0}


def kind_row(name: str, preset: str, partitions: int | None, cfg) -> dict:
    """Setup, synthesis, compile, ``reps`` timed proofs and verification of one kind (see the module docstring).

    The sector bench's order, so that a full-size partition (~10^8 constraints, a key of tens of GiB) fits: the
    witnesses are made in worker processes while the device sets up the key; the resident key then takes the
    setup's queries over (``consume=True``: the two keys are never on the device together)."""
    from cuzk_jax.circuits import base
    from cuzk_jax.groth16 import generator, pipeline, prover, verifier
    from cuzk_jax.reference.constants import R

    circuit = base.get_circuit(name, preset)
    P = partitions or getattr(circuit, "PARTITIONS", None) or cfg.partitions
    config = pipeline.as_config(cfg.prover or None)
    t0 = time.perf_counter()
    r1cs = circuit.r1cs()
    structure_s = time.perf_counter() - t0
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="witnesses")
    made = pool.submit(_witnesses, circuit, P, cfg.seed, getattr(cfg, "workers", 0) or None, r1cs.num_vars)
    t0 = time.perf_counter()
    pk = generator.setup(r1cs)
    vk = pk.vk
    setup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rk = pipeline.make_resident(pk, r1cs, config, partitions=P, consume=True)
    resident_s = time.perf_counter() - t0
    del pk
    t0 = time.perf_counter()
    w = made.result()  # raises the workers' error, if any
    pool.shutdown()
    synth_wait_s = time.perf_counter() - t0
    z, publics = w["z"], w["publics"]
    t0 = time.perf_counter()
    for _ in range(max(1, cfg.warmup)):
        proofs, _ = prover.prove(rk, r1cs, z, montgomery=False)
    first_s = time.perf_counter() - t0
    times, phases = [], []
    for _ in range(cfg.reps):
        t0 = time.perf_counter()
        proofs, timings = prover.prove(rk, r1cs, z, montgomery=False)
        times.append(time.perf_counter() - t0)
        phases.append(timings.phases)
    ok = verifier.verify_batch(vk, publics, proofs)
    bad = [list(x) for x in publics]
    bad[0][0] = (bad[0][0] + 1) % R
    ok = bool(ok) and verifier.verify_each(vk, bad, proofs)[0] is False
    prove_s = statistics.median(times)
    return {"kind": name, "preset": preset, "priority": circuit.PRIORITY_CLASS, "partitions": P,
            "constraints": r1cs.num_constraints, "public_inputs": r1cs.num_public, "domain": rk.domain_size,
            "structure_s": structure_s, "setup_s": setup_s, "resident_s": resident_s, "synth_s": w["synth_s"],
            "synth_wait_s": synth_wait_s, "witness_gib": _gib(z.nbytes), "first_prove_s": first_s,
            "prove_s": prove_s, "per_partition_s": prove_s / P, "proof_bytes": 192 * P,
            "phases_s": {k: statistics.median(p[k] for p in phases) for k in phases[0]} if phases else {},
            "plan": rk.plan.describe() if rk.plan is not None else "no plan (host MSM)",
            "key_resident_gib": _gib(rk.nbytes), **_memory(), "ok": ok}


def latency_row(porep_preset: str, winning_preset: str, cfg) -> dict:
    """WinningPoSt latency alone and while a PoRep sector is proved through the engine (module docstring)."""
    from cuzk_jax.circuits import base
    from cuzk_jax.engine import Engine

    porep = base.get_circuit(cfg.circuit if cfg.circuit not in KINDS else "porep_like", porep_preset)
    winning = base.get_circuit("winning_post", winning_preset)
    P = cfg.partitions
    pks = {}
    for c in (porep, winning):
        pks[c.name], _ = _setup(c.r1cs())
    with Engine(max_batch=P, batch_sizes=(1, P), synthesis=cfg.synthesis, synthesis_workers=cfg.workers or None,
                prover=cfg.prover or None) as eng:
        for c in (porep, winning):
            eng.preload(c, pks[c.name])
        eng.warm_up([porep, winning])
        # compile both shapes (batch of P PoRep partitions, batch of 1 WinningPoSt partition) before timing
        eng.submit_sector(porep, sector=cfg.seed + 100, partitions=P).result()
        eng.submit_sector(winning, sector=cfg.seed + 100, partitions=1).result()

        def latency(fut, t0):
            res = fut.result()
            return time.perf_counter() - t0, res

        t0 = time.perf_counter()
        winning_alone, _ = latency(eng.submit_sector(winning, sector=cfg.seed, partitions=1), t0)
        t0 = time.perf_counter()
        porep_alone, _ = latency(eng.submit_sector(porep, sector=cfg.seed, partitions=P), t0)
        t0 = time.perf_counter()
        fut_porep = eng.submit_sector(porep, sector=cfg.seed + 1, partitions=P)
        time.sleep(porep_alone / 2)
        t1 = time.perf_counter()
        winning_during, res_w = latency(eng.submit_sector(winning, sector=cfg.seed + 1, partitions=1), t1)
        porep_with = fut_porep.result()
        porep_with_s = time.perf_counter() - t0
        status = eng.status()
    return {"kind": "latency", "preset": f"{porep.name}:{porep_preset} + winning_post:{winning_preset}",
            "partitions": P, "porep_constraints": porep.r1cs().num_constraints,
            "winning_constraints": winning.r1cs().num_constraints,
            "winning_alone_s": winning_alone, "porep_alone_s": porep_alone,
            "winning_during_porep_s": winning_during, "porep_with_winning_s": porep_with_s,
            "winning_submitted_after_s": porep_alone / 2, "batch_sizes": status["batch_sizes"], **_memory(),
            "ok": bool(res_w.verified) and bool(porep_with.verified)}


def run(cfg) -> list[dict]:
    rows: list[dict] = []
    default_preset = cfg.preset or "tiny"
    for item in _parse(cfg):
        if item[0] == "kind":
            _, name, preset, parts = item
            row = kind_row(name, preset or default_preset, parts, cfg)
        else:
            _, porep_preset, winning_preset = item
            row = latency_row(porep_preset or "tiny", winning_preset or default_preset, cfg)
        print(f"kinds: {row['kind']} {row['preset']}: done", flush=True)
        emit(rows, row)
    return rows
