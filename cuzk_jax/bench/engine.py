"""``--op=engine``: sequential sector proving vs the pipelined engine, several sectors in one run, plus a timeline.

Sequential (what ``scripts/prove.py`` did before the engine, cuzk's baseline): for each sector, synthesize its
partitions one after another on the main thread, then prove them in one batch (``prover.prove``). Engine: all
sectors submitted at once to :class:`cuzk_jax.engine.Engine` (synthesis pool, cross-sector batches of
``max_batch`` partitions, synthesis overlapped with device work, host finishing overlapped with the next batch).
Every program shape is compiled and every worker started before the clock starts (warm-up), both runs prove the
same sectors (partition ``p`` of sector ``k`` = ``sample_inputs(p, seed=k)``), and all proofs are verified
(arkworks pairing) after timing.

Rows: ``mode=sequential``, ``mode=engine`` (one per ``max_batch``; ``speedup`` = sequential wall / engine wall),
``mode=synth_thread`` / ``mode=synth_process`` (synthesis-only throughput of the two pool kinds, when asked: the
GIL measurement behind the default ``synthesis="process"``) and ``mode=compile`` (warm-up seconds per shape).
:func:`compare` also writes ``<out_dir>/<name>.json`` (rows + timeline events) and ``<name>.png`` (one Gantt panel
per run: synthesis workers, collector, device phases, finisher). ``cuzk-bench --op=engine`` drives it.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import time

from . import environment, write_json


def _say(msg: str) -> None:
    print(msg, flush=True)


def _key(circuit, r1cs, key_dir):
    try:
        from cuzk_jax import keycache
    except ImportError:  # the key cache is optional for this bench
        keycache = None
    if keycache is not None:
        return keycache.load_or_setup(circuit, r1cs, directory=key_dir, progress=_say)
    from cuzk_jax.groth16 import generator

    return generator.setup(r1cs)


def _verify(pk, publics, proofs) -> bool:
    from cuzk_jax.groth16 import verifier

    return bool(verifier.verify_batch(pk.vk, publics, proofs))


def sequential(circuit, r1cs, pk, sectors, partitions, prover_config=None):
    """Prove ``sectors`` one after another (serial synthesis, one batch per sector). Returns (row, events,
    per-sector (publics, proofs))."""
    from cuzk_jax.engine.timeline import Timeline
    from cuzk_jax.groth16 import prover

    t_start = time.perf_counter()
    tl = Timeline(t_start)
    out, phase_tot = [], {}
    for k in sectors:
        ws, publics = [], []
        for p in range(partitions):
            t0 = time.perf_counter()
            inputs = circuit.sample_inputs(p, k)
            ws.append(circuit.witness(inputs))
            publics.append(circuit.public_inputs(inputs))
            tl.add("main", "synthesis", t0, time.perf_counter(), job=k)
        t0 = time.perf_counter()
        proofs, timings = prover.prove(pk, r1cs, ws, config=prover_config)
        # phases ran back to back (each ends with block_until_ready): lay them out from the prove start
        t = t0
        for name, sec in timings.phases.items():
            tl.add("finish" if name == "finish" else "device", name, t, t + sec, batch=k)
            t += sec
            phase_tot[name] = phase_tot.get(name, 0.0) + sec
        out.append((publics, proofs))
    wall = time.perf_counter() - t_start
    events = tl.events()
    synth = sum(e.end - e.start for e in events if e.name == "synthesis")
    device = sum(e.end - e.start for e in events if e.lane == "device")
    n = len(sectors) * partitions
    row = {"mode": "sequential", "sectors": len(sectors), "partitions": partitions, "max_batch": partitions,
           "wall_s": wall, "proofs_per_min": 60 * n / wall, "synthesis_s": synth, "device_s": device,
           "device_busy": device / wall, **{f"{k}_s": v for k, v in phase_tot.items()}}
    return row, events, out


def engine_run(circuit, pk, sectors, partitions, max_batch, *, synthesis="process", workers=None,
               max_wait_s=1.0, prover_config=None, devices=None, fill="predict"):
    """Warm the engine (workers, the ``max_batch`` shape), then submit every sector at once and wait.

    Returns (row, events shifted to the measurement start, per-sector (publics, proofs), warm-up seconds).
    """
    from cuzk_jax.engine import Engine

    with Engine(max_batch=max_batch, max_wait_s=max_wait_s, synthesis=synthesis, synthesis_workers=workers,
                prover=prover_config, devices=devices, fill=fill) as eng:
        eng.preload(circuit, pk)
        t0 = time.perf_counter()
        eng.warm_up([circuit])
        # one full batch of the measured shape (sector seed -1 is never measured): compiles, warms caches
        eng.submit(circuit, sector=-1 - max_batch, partitions=eng.max_batch).result()
        warm = time.perf_counter() - t0
        before = eng.status()
        t_start = time.perf_counter()
        futs = [eng.submit_sector(circuit, sector=k, partitions=partitions) for k in sectors]
        results = [f.result() for f in futs]
        wall = time.perf_counter() - t_start
        after = eng.status()
        off = t_start - eng.t0
        events = [e for e in eng.events() if e.end > off]
    from cuzk_jax.engine.timeline import Event

    events = [Event(e.lane, e.name, max(0.0, e.start - off), e.end - off, e.batch, e.job) for e in events]
    device = sum(e.end - e.start for e in events if e.lane == "device")
    synth = sum(e.end - e.start for e in events if e.name == "synthesis")
    batches = {k: after["batch_sizes"].get(k, 0) - before["batch_sizes"].get(k, 0) for k in after["batch_sizes"]}
    n = len(sectors) * partitions
    row = {"mode": "engine", "sectors": len(sectors), "partitions": partitions, "max_batch": eng.max_batch,
           "synthesis": synthesis, "workers": after["synthesis"]["workers"], "devices": after["backend"]["devices"],
           "wall_s": wall, "proofs_per_min": 60 * n / wall, "synthesis_s": synth, "device_s": device,
           "device_busy": device / wall, "batches": ",".join(f"{k}x{v}" for k, v in batches.items() if v),
           "padded_slots": after["padded_slots"] - before["padded_slots"], "fill": fill, "max_wait_s": max_wait_s,
           "key_loads": after["keys"]["loads"]}
    return row, events, [(r.public_inputs, r.proofs) for r in results], warm


def synth_throughput(circuit, n: int, kind: str, workers: int) -> dict:
    """Partitions synthesized per second by a ``kind`` pool of ``workers`` (pool started beforehand)."""
    from cuzk_jax.engine import synthesis

    pool = synthesis.make_pool(kind, workers)
    try:
        synthesis.warm_pool(pool, workers, [circuit])
        portable = synthesis.portable_circuit(circuit)
        t0 = time.perf_counter()
        cf.wait([pool.submit(synthesis.synthesize_partition, portable, ("sample", p, 10_001)) for p in range(n)])
        wall = time.perf_counter() - t0
    finally:
        pool.shutdown()
    return {"mode": f"synth_{kind}", "workers": workers, "partitions": n, "wall_s": wall,
            "partitions_per_s": n / wall}


def compare(circuit_name: str = "porep_like", preset: str = "small", sectors: int = 4, partitions: int = 10,
            max_batches=(20,), *, synthesis: str = "process", workers: int | None = None, max_wait_s: float = 30.0,
            prover_config: str | None = None, key_dir: str | None = None, out_dir: str | None = None,
            name: str | None = None, synth_compare: bool = False, first_sector: int = 0,
            fills=("predict",)) -> list[dict]:
    """Sequential vs engine (one run per ``max_batches`` x ``fills`` entry: the batch-forming rules of
    :class:`~cuzk_jax.engine.EngineConfig`, A/B); writes JSON + PNG under ``out_dir`` if given."""
    from cuzk_jax.circuits import base
    from cuzk_jax.engine import synthesis as synth_mod
    from cuzk_jax.groth16 import prover

    circuit = base.get_circuit(circuit_name, preset)
    r1cs = circuit.r1cs()
    _say(f"engine bench: {circuit}: {r1cs.num_constraints} constraints, {sectors} sectors x {partitions} partitions")
    pk = _key(circuit, r1cs, key_dir)
    ks = list(range(first_sector, first_sector + sectors))
    rows: list[dict] = []
    panels: list = []
    common = {"circuit": circuit_name, "preset": preset, "constraints": r1cs.num_constraints}
    env = environment()
    name = name or f"engine-{circuit_name}-{preset}-{env['backend']}"

    def save(plot: bool):
        if not out_dir:
            return
        os.makedirs(out_dir, exist_ok=True)
        write_json(os.path.join(out_dir, f"{name}.json"), {
            "environment": env, "rows": [{**common, **r} for r in rows], "complete": plot,
            "timeline": {label: [e.as_dict() for e in evs] for label, evs in panels}})
        if not plot:
            return
        from cuzk_jax.engine import timeline

        try:
            png = timeline.plot(panels, os.path.join(out_dir, f"{name}.png"),
                                f"{circuit_name}/{preset}: {sectors} sectors x {partitions} partitions on "
                                f"{env['device']}")
            _say(f"  wrote {png}")
        except ImportError:
            _say("  matplotlib not installed (pip install cuzk_jax[plot]): no PNG")
        _say(f"  wrote {os.path.join(out_dir, name + '.json')}")

    # warm-up: the sequential shape (P = partitions); the engine shapes are warmed inside engine_run
    t0 = time.perf_counter()
    ws = [circuit.witness(circuit.sample_inputs(p, -1)) for p in range(partitions)]
    prover.prove(pk, r1cs, ws, config=prover_config)
    rows.append({"mode": "compile", "max_batch": partitions, "wall_s": time.perf_counter() - t0})
    _say(f"  warm-up P={partitions}: {rows[-1]['wall_s']:.1f}s")

    seq_row, seq_events, seq_out = sequential(circuit, r1cs, pk, ks, partitions, prover_config)
    seq_row["verified"] = all(_verify(pk, pub, prf) for pub, prf in seq_out)
    rows.append(seq_row)
    _say(f"  sequential: {seq_row['wall_s']:.2f}s, {seq_row['proofs_per_min']:.1f} proofs/min")
    panels.append((f"sequential: {seq_row['wall_s']:.2f} s", seq_events))
    save(plot=False)  # a run stopped by a time limit keeps what it measured

    for mb, fill in [(mb, fill) for mb in max_batches for fill in fills]:
        row, events, out, warm = engine_run(circuit, pk, ks, partitions, mb, synthesis=synthesis, workers=workers,
                                            max_wait_s=max_wait_s, prover_config=prover_config, fill=fill)
        rows.append({"mode": "compile", "max_batch": row["max_batch"], "wall_s": warm})
        row["speedup"] = seq_row["wall_s"] / row["wall_s"]
        row["verified"] = all(_verify(pk, pub, prf) for pub, prf in out)
        rows.append(row)
        _say(f"  engine max_batch={row['max_batch']} fill={fill}: {row['wall_s']:.2f}s, {row['proofs_per_min']:.1f} "
             f"proofs/min, speedup {row['speedup']:.2f}x, batches {row['batches']}, padded {row['padded_slots']}")
        panels.append((f"engine, max_batch={row['max_batch']}, fill={fill}, {row['synthesis']} x{row['workers']}: "
                       f"{row['wall_s']:.2f} s ({row['speedup']:.2f}x)", events))
        save(plot=False)

    if synth_compare:
        w = workers or synth_mod.default_workers()
        for kind in ("thread", "process"):
            rows.append(synth_throughput(circuit, max(2 * w, partitions), kind, w))
            _say(f"  synthesis {kind} x{w}: {rows[-1]['partitions_per_s']:.2f} partitions/s")

    save(plot=True)
    rows = [{**common, **r} for r in rows]
    return rows


def run(cfg) -> list[dict]:
    """``cuzk-bench --op=engine``: :func:`compare` with ``--circuit --preset --sectors --partitions --max_batch
    (default 2 x partitions) --synthesis --workers --max_wait_s --prover --synth_compare --key_dir
    --first_sector`` and, where scripts/bench.py defines it, ``--fill`` (a list: predict, wait); the timeline JSON
    and PNG go beside ``--out``."""
    partitions = int(cfg.partitions)
    max_batch = tuple(int(x) for x in cfg.max_batch) or (2 * partitions,)
    out = cfg.out or ""
    return compare(cfg.circuit, cfg.preset or "tiny", int(cfg.sectors), partitions, max_batch,
                   synthesis=cfg.synthesis, workers=cfg.workers or None, max_wait_s=cfg.max_wait_s,
                   prover_config=cfg.prover or None, key_dir=cfg.key_dir or None,
                   out_dir=os.path.dirname(out) or os.path.join("bench", "results"),
                   name=os.path.splitext(os.path.basename(out))[0] + "-timeline" if out else None,
                   synth_compare=cfg.synth_compare, first_sector=cfg.first_sector,
                   fills=tuple(getattr(cfg, "fill", None) or ("predict",)))
