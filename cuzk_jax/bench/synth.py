"""``--op=synth``: circuit structure and per-partition witness synthesis, then device evaluation of A.z, B.z, C.z.

One row per preset (``--preset`` takes a comma-separated list, e.g. ``--preset=medium,domain24``): the scalar
results of :func:`cuzk_jax.circuits.bench.run` (what is timed is documented there) -- structure and witness
constraints/s, builder vs batched witness on the same inputs where the preset is small enough, peak host memory,
worker count (``--workers``, 0 = one per CPU); the per-partition lists go to the JSON only.

``--impl=worker``: instead, what one engine synthesis worker costs per partition (:func:`worker`): no structure,
no device -- the figure that decides whether a sector stream is synthesis- or device-bound. ``--impl=split``: a
partition synthesized by one pool task against the same partition split over ``--workers`` tasks
(:func:`split`, the engine's ``SplitSynthesis``), A/B per partition.
"""

from __future__ import annotations

import numpy as np

DEFAULTS = {"reps": 5, "warmup": 1}


def run(cfg) -> list[dict]:
    from cuzk_jax.bench import emit
    from cuzk_jax.circuits import bench as synth_bench
    from cuzk_jax.circuits import get_circuit

    presets = [p for p in (cfg.preset or "").split(",") if p] or [get_circuit(cfg.circuit).preset]
    rows: list[dict] = []
    impl = list(getattr(cfg, "impl", None) or [])
    if not set(impl) <= {"worker", "split"}:
        from cuzk_jax.errors import BadInput

        raise BadInput(f"--op=synth: --impl takes worker, split or nothing, got {','.join(impl)!r}")
    if impl:
        for preset in presets:
            circuit = get_circuit(cfg.circuit, preset)
            if "worker" in impl:
                emit(rows, worker(circuit, cfg.partitions, cfg.seed, cfg.warmup))
            if "split" in impl:
                emit(rows, split(circuit, cfg.partitions, cfg.seed, cfg.warmup, getattr(cfg, "workers", 0) or 2))
        return rows
    for preset in presets:
        result = synth_bench.run(cfg.circuit, preset, cfg.partitions, cfg.seed, cfg.reps, cfg.warmup,
                                 cfg.device_eval, cfg.reference_check_max, cfg.partition_chunk or None,
                                 workers=getattr(cfg, "workers", 0) or None)
        emit(rows, {"circuit": cfg.circuit, "preset": preset, **result})
    return rows


def worker(circuit, partitions: int, seed: int, warmup: int) -> dict:
    """Per partition, in this process, what an engine synthesis worker does for ``("sample", p, seed)``
    (:func:`cuzk_jax.engine.synthesis.synthesize_partition` with a shared output file): ``sample_s`` (the inputs),
    ``witness_s`` (the witness, built in or written to the file), ``claim_s`` (the engine's mapping of it); medians
    over partitions ``0 .. partitions - 1`` after ``warmup`` untimed ones and the circuit's ``warm_worker``, and
    the lists. ``partition_gib``: the file's size; peak RSS of this process."""
    import statistics
    import time

    from cuzk_jax.bench import host_peak
    from cuzk_jax.engine import synthesis

    from cuzk_jax.circuits import porep_like

    num_vars = (porep_like.block_counts(circuit)["num_vars"] if isinstance(circuit, porep_like.PorepLike)
                else circuit.r1cs().num_vars)  # porep_like's counting run: no structure at sector scale
    t = time.perf_counter()
    if hasattr(circuit, "warm_worker"):
        circuit.warm_worker()
    warm_s = time.perf_counter() - t
    times = {"sample_s": [], "witness_s": [], "claim_s": []}
    for k in range(max(0, warmup) + max(1, partitions)):
        p = k - max(0, warmup)
        t0 = time.perf_counter()
        inputs = circuit.sample_inputs(max(p, 0), seed + (1 if p < 0 else 0))
        t1 = time.perf_counter()
        path = synthesis.new_shared_file(num_vars)
        try:
            out = synthesis.synthesize_partition(circuit, ("inputs", inputs), out=path)
            t2 = time.perf_counter()
            z = synthesis.claim_shared(out).z
        finally:
            synthesis.drop_shared(path)
        t3 = time.perf_counter()
        del z
        if p >= 0:
            for name, sec in (("sample_s", t1 - t0), ("witness_s", t2 - t1), ("claim_s", t3 - t2)):
                times[name].append(round(sec, 3))
    row = {"circuit": circuit.name, "preset": circuit.preset, "impl": "worker", "partitions": max(1, partitions),
           "num_vars": num_vars, "partition_gib": round(32 * num_vars / 2**30, 3), "warm_worker_s": round(warm_s, 3)}
    row.update({name: statistics.median(v) for name, v in times.items()})
    row["total_s"] = round(row["sample_s"] + row["witness_s"] + row["claim_s"], 3)
    row.update({f"{name}_list": v for name, v in times.items()}, **host_peak())
    return row


def split(circuit, partitions: int, seed: int, warmup: int, workers: int) -> dict:
    """A/B of the engine's split synthesis on a process pool of ``workers`` warmed workers: per partition ``p`` of
    sector ``seed``, submission to claimed witness for one task (``synthesize_partition`` of ``("sample", p,
    seed)``: ``unsplit_s``) and for :class:`~cuzk_jax.engine.synthesis.SplitSynthesis` over ``workers`` span
    tasks (``split_s``), alternately, after ``warmup`` untimed pairs; the two witnesses are compared limb for limb
    (``equal``). Medians, ``speedup`` = unsplit / split, and the lists. No structure, no device."""
    import statistics
    import time

    from cuzk_jax import bench
    from cuzk_jax.circuits import porep_like
    from cuzk_jax.engine import synthesis
    from cuzk_jax.errors import BadInput

    units = circuit.span_units() if hasattr(circuit, "span_units") else 0
    if units < 2 or workers < 2:
        raise BadInput(f"--impl=split needs a circuit with challenge spans (porep_like, >= 2 challenges) and "
                       f"--workers >= 2; got {circuit.name}/{circuit.preset} ({units} spans), {workers} workers")
    num_vars = porep_like.block_counts(circuit)["num_vars"]
    portable = synthesis.portable_circuit(circuit)
    pool = synthesis.make_pool("process", workers)
    times: dict[str, list] = {"unsplit_s": [], "split_s": []}
    equal = True
    try:
        synthesis.warm_pool(pool, workers, [circuit])
        for k in range(max(0, warmup) + max(1, partitions)):
            p = k - max(0, warmup)
            spec = ("sample", max(p, 0), seed + (1 if p < 0 else 0))
            got = {}
            for name in ("unsplit_s", "split_s"):
                path = synthesis.new_shared_file(num_vars)
                try:
                    t0 = time.perf_counter()
                    fut = (pool.submit(synthesis.synthesize_partition, portable, spec, path) if name == "unsplit_s"
                           else synthesis.SplitSynthesis(pool.submit, portable, spec, path, workers).start())
                    got[name] = synthesis.claim_shared(fut.result()).z
                    sec = time.perf_counter() - t0
                finally:
                    synthesis.drop_shared(path)
                if p >= 0:
                    times[name].append(round(sec, 3))
            equal = equal and bool(np.array_equal(got["unsplit_s"], got["split_s"]))
            del got
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    row = {"circuit": circuit.name, "preset": circuit.preset, "impl": "split", "partitions": max(1, partitions),
           "workers": workers, "ways": min(workers, units), "num_vars": num_vars, "equal": equal}
    row.update({name: statistics.median(v) for name, v in times.items()})
    row["speedup"] = round(row["unsplit_s"] / row["split_s"], 3)
    row.update({f"{name}_list": v for name, v in times.items()}, **bench.host_peak())
    return row
