"""``--op=sector``: one sector of ``--partitions`` partitions of a ``porep_like`` preset, end to end, under the
memory plan (issue 19's sector benchmark).

Per run (one row each):

1. **structure** -- the compiled R1CS of the preset (``Circuit.r1cs(cache=True)``: tiled from one challenge block
   for the large presets, memory-mapped from the cache when it exists);
2. **setup** -- :func:`cuzk_jax.groth16.generator.development_setup` (a DEVELOPMENT key made on the device, toxic
   waste from the OS CSPRNG; ``--fixed_base`` picks its fixed-base method). With ``--key_dir``, the key is read
   from ``<key_dir>/sector-<preset>-<digest>.key`` (:mod:`cuzk_jax.groth16.keyfile`, checksums verified) when that
   file exists, else made and written there (``key_source``: ``"file"`` or ``"setup"``; ``key_file_gib``; ``h_form``:
   the key's H query form, which decides the H step, see docs/keys.md): a second
   run in a fresh process then measures the device peak of proving without the setup's (JAX cannot reset the
   peak counter). Only for keys that fit the disk (a 2^27 key does not fit the H200 machine's 64 GiB);
3. **resident** -- :func:`cuzk_jax.groth16.pipeline.make_resident` under ``--prover``'s budgets: the plan is
   logged and stored in the row; each of the setup's full-size device queries is freed as soon as the resident
   key holds its infinity-free copy (``make_resident(consume=True)``; the plan counts the copies only);
4. **witnesses** -- :func:`cuzk_jax.circuits.porep_like.sampled_witness_batch` with ``--workers`` processes (0:
   one per core), started after the structure and made while the device runs steps 2 and 3 (the CPU and the device
   work at once, as in the engine); ``witness_s`` is their own time, ``witness_wait_s`` what was left after step 3.
   Meanwhile the prove programs whose shapes do not depend on the witness values compile in a thread
   (:func:`cuzk_jax.groth16.pipeline.precompile` for each step size the planned batches run: ``precompiled``,
   ``precompile_s``; ``precompile_wait_s`` is what was left of it after the witnesses);
5. **prove** -- :func:`cuzk_jax.groth16.pipeline.prove_batch` over the planned batches, every proof verified by
   pairing before it is returned (a proof that does not verify fails the row); ``--reps`` times (the first one
   compiles), each with its per-phase times (``prefetch_mode``: how the later steps were staged); with
   ``prefetch=on`` or ``prefetch=late`` in ``--prover`` each rep also runs with
   ``prefetch=off``, over the same resident key (column ``variant``: the switch as set for that run), and then
   each ``--variants`` override (column ``variant``: its text), over the same resident key and memory plan (an
   override that changes what the plan sized -- ``max_pairs``, ``batch`` -- runs with the plan made for the
   base). With ``--profile`` the last rep of the first variant runs under JAX's profiler (``traced``; its times
   carry the tracer's overhead) and its row gets ``profile``: the kernels per program and HLO op
   (:mod:`cuzk_jax.bench.profile`).

With ``--stream``, steps 4 and 5 are replaced by a stream through the engine (:func:`stream`): ``--sectors``
sectors submitted at once to a :class:`~cuzk_jax.engine.Engine` over the resident key, each partition synthesized
by one of ``--workers`` processes and handed back through shared memory, batches of the plan's size proved while
the next partitions are synthesized, the host's witnesses bounded by what ``host_budget`` leaves (rows
``mode="stream"``; issue 19's end-to-end figure).

The row records per-phase seconds, the plan, the shares of zero / one / other scalars per MSM (what the split MSM
earns on), the device's peak memory (``memory_stats()['peak_bytes_in_use']``, where the device reports it) and
the peak host RSS of this process and of the witness workers (``getrusage``); ``device_memory_gib``: bytes in use
and the peak so far after the setup, the resident key and each rep (where the lifetime peak was reached).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import time

import jax

from cuzk_jax.errors import CuzkError

DEFAULTS = {"preset": "domain20", "reps": 2, "warmup": 0, "circuit": "porep_like", "sectors": 3}
#: Host memory left aside beside the engine's witness budget in a stream (the process's own growth, staging).
STREAM_HOST_MARGIN = 4 << 30
log = logging.getLogger(__name__)


def _say(text: str) -> None:
    """A progress line on stdout (the phases of one row take minutes at sector scale; a run stopped by a time limit
    still shows how far it got)."""
    print(f"sector: {text}", flush=True)


def _peak_device_bytes() -> int | None:
    stats = jax.local_devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def _recheck(key, z, error) -> str | None:
    """After an :class:`~cuzk_jax.errors.Unsatisfied` partition: prove that partition alone again, staged the plain
    way (``prefetch=off``). ``"fails again"`` says its witness is wrong; ``"passes"`` says the first
    failure came from how the batch was staged or run (the witness is right)."""
    from cuzk_jax.groth16 import pipeline

    p = getattr(error, "partition", None)
    if p is None:
        return None
    plain = dataclasses.replace(key.config, prefetch="off")
    try:
        pipeline.prove_batch(dataclasses.replace(key, config=plain), z[:, p:p + 1])
    except CuzkError as e:
        return f"fails again: {type(e).__name__}: {e}"[:300]
    return "passes"


def _key(cfg, r1cs, row: dict):
    """``(proving key, "file" | "setup")``: read from ``--key_dir`` when the preset's key file is there, else a
    development setup (written there when ``--key_dir`` is given; the file's size goes into ``row``)."""
    import os

    from cuzk_jax.groth16 import generator, keyfile

    path = None
    if cfg.key_dir:
        path = os.path.join(os.path.expanduser(cfg.key_dir), f"sector-{cfg.preset}-{r1cs.digest()[:16]}.key")
        if os.path.exists(path):
            pk = keyfile.load(path, check=False)  # checksums verified; a file this bench wrote
            row["key_file_gib"] = round(os.path.getsize(path) / 2**30, 3)
            return pk, "file"
    points = None if cfg.fixed_base == "auto" else cfg.fixed_base
    phases: dict = {}
    pk = generator.development_setup(r1cs, progress=_say, points=points, timings=phases)
    row["setup_phases"] = phases
    if path is not None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        row["key_file_gib"] = round(keyfile.save(pk, path) / 2**30, 3)
    return pk, "setup"


def _device_gib() -> dict:
    """Device bytes in use now and the process's peak so far, in GiB (empty where the device reports nothing):
    recorded after every stage, so a peak can be placed (JAX cannot reset the peak counter)."""
    stats = jax.local_devices()[0].memory_stats() or {}
    return {k: round(stats[k] / 2**30, 3) for k in ("bytes_in_use", "peak_bytes_in_use") if k in stats}


def override(base, text: str):
    """``base`` (a resolved :class:`~cuzk_jax.groth16.pipeline.ProverConfig`) with the keys of ``text``
    (``key=value`` joined by ``+``, the ``--prover`` syntax otherwise) replaced; BadInput names a bad token."""
    from cuzk_jax.groth16 import pipeline

    parts = [p.strip() for p in text.split("+") if p.strip()]
    over = pipeline.ProverConfig.parse(",".join(parts))
    keys = [p.partition("=")[0] for p in parts]
    return dataclasses.replace(base, **{k: getattr(over, k) for k in keys}).resolved()


def run(cfg) -> list[dict]:
    from cuzk_jax import bench
    from cuzk_jax.bench import profile as bench_profile
    from cuzk_jax.circuits import get_circuit
    from cuzk_jax.circuits import porep_like
    from cuzk_jax.engine import backends
    from cuzk_jax.errors import BadInput
    from cuzk_jax.groth16 import pipeline

    if cfg.circuit != "porep_like":
        raise BadInput("--op=sector proves porep_like presets (its witness generation is the batched one)")
    circuit = get_circuit("porep_like", cfg.preset)
    config = pipeline.as_config(cfg.prover or None)
    for text in getattr(cfg, "variants", None) or []:  # a bad override is a usage error before any work
        override(config.resolved(), text)
    P = int(cfg.partitions)
    row: dict = {"circuit": "porep_like", "preset": cfg.preset, "partitions": P, "prover": str(config)}
    t = time.perf_counter()
    r1cs = circuit.r1cs(cache=True)
    row.update(structure_s=round(time.perf_counter() - t, 3), constraints=r1cs.num_constraints,
               num_vars=r1cs.num_vars)
    # the witnesses (CPU worker processes) are made while the device sets up the key and uploads it

    def make_witnesses():
        t0 = time.perf_counter()
        # sampled in the workers too (a sector32g partition's stand-in sealing data is seconds of native hashing)
        z, _publics = porep_like.sampled_witness_batch(circuit, P, cfg.seed, workers=cfg.workers or None)
        return z, round(time.perf_counter() - t0, 3)

    streaming = bool(getattr(cfg, "stream", False))
    if streaming and (int(cfg.sectors) < 1 or P < 1):  # a usage error before minutes of setup
        raise BadInput(f"--stream needs --sectors >= 1 and --partitions >= 1, got {cfg.sectors} and {P}")
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="witnesses")
    witnesses = None if streaming else pool.submit(make_witnesses)
    t = time.perf_counter()
    pk, source = _key(cfg, r1cs, row)
    jax.block_until_ready((pk.a_query, pk.b_g1_query, pk.b_g2_query, pk.l_query, pk.h_query))
    row.update(setup_s=round(time.perf_counter() - t, 3), domain=pk.domain_size, key_source=source,
               h_form=pk.h_form)
    memory = {"setup": _device_gib()}
    _say(f"structure {row['structure_s']} s ({row['constraints']} constraints), key ({source}) {row['setup_s']} s")
    t = time.perf_counter()
    # the resident key holds its own (infinity-free) copies: each of the setup's queries is freed once its copy
    # exists (at a 2^27 domain both whole keys at once would be ~115 GiB)
    rk = pipeline.make_resident(pk, r1cs, config, partitions=P, consume=True)
    row.update(resident_s=round(time.perf_counter() - t, 3), key_device_gib=round(rk.nbytes / 2**30, 3),
               plan=rk.plan.as_dict() if rk.plan is not None else None,
               plan_text=rk.plan.describe() if rk.plan is not None else "no plan (host MSM)")
    memory["resident"] = _device_gib()
    _say(f"resident key {row['resident_s']} s, {row['key_device_gib']} GiB; {row['plan_text']}")
    if streaming:
        pool.shutdown()
        return stream(cfg, circuit, rk, dict(row, device_memory_gib=memory))
    # the prove programs compile while the witnesses are still being made, for every step size prove_batch runs
    # the sector in (the plan's batch and the remainder: 10 partitions in batches of 3 run 3, 3, 3, 1) -- as the
    # engine does when it loads a key
    ahead = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="prove-compile")
    t_ahead = time.perf_counter()
    compiled = ahead.submit(lambda: (backends.DeviceBackend.precompile(rk, [P]), time.perf_counter() - t_ahead))
    t = time.perf_counter()
    z, witness_s = witnesses.result()  # raises the workers' error, if any
    row.update(witness_wait_s=round(time.perf_counter() - t, 3), witness_s=witness_s,
               witness_gib=round(z.nbytes / 2**30, 3))
    pool.shutdown()
    _say(f"witnesses {row['witness_s']} s ({row['witness_gib']} GiB), {row['witness_wait_s']} s waited for after "
         f"the resident key")
    t = time.perf_counter()
    try:
        names, precompile_s = compiled.result()
        row.update(precompiled=names, precompile_s=round(precompile_s, 3))
    except Exception as e:  # noqa: BLE001  (a failed ahead-of-time compile only costs the first prove its compile)
        row.update(precompile_error=f"{type(e).__name__}: {e}"[:300])
    ahead.shutdown()
    row.update(precompile_wait_s=round(time.perf_counter() - t, 3))
    _say(f"precompiled {row.get('precompiled', row.get('precompile_error'))} in {row.get('precompile_s')} s, "
         f"{row['precompile_wait_s']} s waited for after the witnesses")
    # the split MSMs' programs depend on the witnesses (how many scalars are neither 0 nor 1): compiled from the
    # first partitions' witnesses for each step size the reps run (at 2^27 they were ~14 s of the first rep)
    t = time.perf_counter()
    try:
        row.update(precompiled_split=[f"{name}@{size}" for size in pipeline.step_sizes(rk, P)
                                      for name in pipeline.precompile_split(rk, z[:, :size])])
    except Exception as e:  # noqa: BLE001  (as above: the first prove compiles them instead)
        row.update(precompile_split_error=f"{type(e).__name__}: {e}"[:300])
    row.update(precompile_split_s=round(time.perf_counter() - t, 3))
    _say(f"precompiled split MSMs {row.get('precompiled_split', row.get('precompile_split_error'))} in "
         f"{row['precompile_split_s']} s")
    rows: list[dict] = []
    # a row for the stages so far (rep "prepare"): a run killed in its first (compiling) prove keeps them
    bench.emit(rows, dict(row, rep="prepare", device_memory_gib=dict(memory), **bench.host_peak()))
    # prefetch=on / late: every rep also runs without it over the same resident key (A/Bs in one process);
    # a variant is named by the switches that differ from the defaults
    base = rk.config
    switches = [("prefetch", "off")] if base.prefetch in ("on", "late") else []
    variants = [(",".join(f"{k}={getattr(base, k)}" for k, _ in switches) or "default", rk)]
    for k, v in switches:
        cfg_k = dataclasses.replace(base, **{k: v})
        name = ",".join(f"{kk}={getattr(cfg_k, kk)}" for kk, _ in switches)
        variants.append((name, dataclasses.replace(rk, config=cfg_k)))
    for text in getattr(cfg, "variants", None) or []:  # --variants: the same key and plan, other switches
        variants.append((text, dataclasses.replace(rk, config=override(base, text))))
    runs = [(r, v) for r in range(max(1, cfg.reps)) for v in variants]
    for rep, (variant, key) in runs:
        timings = pipeline.Timings()
        # --profile: the last rep of the first variant runs traced (its times carry the tracer's overhead)
        traced = bench.profiling() and rep == runs[-1][0] and variant == variants[0][0]
        trace = bench_profile.device_trace() if traced else contextlib.nullcontext()
        t = time.perf_counter()
        try:
            with trace as tr:
                proofs = pipeline.prove_batch(key, z, timings=timings)  # verified before it returns (raises otherwise)
        except CuzkError as e:
            # one variant's failure (an unsatisfied check, a rejected proof, an out-of-memory) is its row; the other
            # variants still run over the same key and witnesses (the failure's variant is the A/B's answer)
            _say(f"rep {rep} ({variant}): FAILED: {type(e).__name__}: {e}")
            bench.emit(rows, dict(row, rep=rep, variant=variant, prefetch=key.config.prefetch,
                                  ok=False, error=f"{type(e).__name__}: {e}"[:500],
                                  recheck=_recheck(key, z, e),
                                  phases={k: round(v, 4) for k, v in timings.phases.items()}))
            continue
        wall = time.perf_counter() - t
        memory[f"rep{rep}" + (f"-{variant}" if len(variants) > 1 else "")] = _device_gib()
        out = dict(row, rep=rep, variant=variant, prefetch=key.config.prefetch,
                   prefetch_planned=None if key.plan is None else key.plan.prefetch,
                   prefetch_mode=pipeline.prefetch_mode(key), prover=str(key.config),
                   device_memory_gib=dict(memory), prove_s=round(wall, 3),
                   per_partition_s=round(wall / P, 3),
                   batches=timings.batches, proofs=len(proofs), ok=len(proofs) == P,
                   phases={k: round(v, 4) for k, v in timings.phases.items()}, scalar_kinds=timings.scalar_kinds)
        peak = _peak_device_bytes()
        out.update(device_peak_gib=None if peak is None else round(peak / 2**30, 3), **bench.host_peak())
        if traced:
            out.update(traced=True, profile=tr.summary)
            _say(bench_profile.table(tr.summary, rows=20))
        seen = f"; device GiB after each stage {memory}" if any(memory.values()) else ""
        _say(f"rep {rep} ({variant}): {out['prove_s']} s, phases {out['phases']}{seen}")
        bench.emit(rows, out)
    return rows


def _timeline(eng, off: float, keep) -> list[list]:
    """The engine's timeline events ``e`` with ``keep(e, off)``, as ``[lane, name, start, end, batch, job]`` in
    seconds since ``off`` (seconds on the engine's clock, which starts with the engine)."""
    return [[e.lane, e.name, round(e.start - off, 4), round(e.end - off, 4), e.batch, e.job]
            for e in eng.events() if keep(e, off)]


def _rss() -> int:
    """This process's resident bytes now (``/proc/self/statm``; 0 where it is missing)."""
    import os

    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def sample_inputs(circuit, seed: int, partitions: int, workers: int) -> list[dict]:
    """``circuit.sample_inputs(p, seed)`` for every partition ``p`` -- the stand-in for what PoRep's C1 hands to
    C2 -- sampled in up to ``workers`` fresh processes (a ``sector32g`` partition's sealing data is seconds of
    native hashing), in partition order."""
    import multiprocessing

    from cuzk_jax.engine.synthesis import sample_task

    slim = circuit.without_r1cs() if hasattr(circuit, "without_r1cs") else circuit  # the matrices stay here
    n = max(1, min(int(workers), partitions))
    specs = [("sample", p, seed) for p in range(partitions)]
    with concurrent.futures.ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
        return [inputs for inputs, _ in pool.map(sample_task, [slim] * partitions, specs)]


def _lone(eng, name: str, submit) -> dict:
    """One job submitted by ``submit()`` to the warm, idle engine ``eng`` and waited for (its proofs verified):
    ``<name>_latency_s`` (submission to verified proofs), ``<name>_first_batch_s`` (when its first device phase
    began), ``<name>_split_partitions`` (partitions split over idle workers) and ``<name>_events`` (its timeline,
    seconds since the submission)."""
    split0 = eng.status()["synthesis"]["split_partitions"]
    t = time.perf_counter()
    submit().result()
    out = {f"{name}_latency_s": round(time.perf_counter() - t, 3)}
    events = _timeline(eng, t - eng.t0, lambda e, off: e.start >= off)
    out.update({f"{name}_first_batch_s": min((e[2] for e in events if e[0] == "device"), default=None),
                f"{name}_split_partitions": eng.status()["synthesis"]["split_partitions"] - split0,
                f"{name}_events": events})
    _say(f"stream: one sector alone through the warm engine ({name}): {out[f'{name}_latency_s']} s (first device "
         f"phase after {out[f'{name}_first_batch_s']} s; {out[f'{name}_split_partitions']} partition(s) split "
         f"over idle workers)")
    return out


def stream(cfg, circuit, rk, row: dict) -> list[dict]:
    """``--stream``: ``--sectors`` sectors of ``--partitions`` partitions (sector ``k`` is seed ``--seed + k``)
    through one :class:`~cuzk_jax.engine.Engine` over the resident key ``rk``: batches of the memory plan's size,
    ``--workers`` synthesis processes (one partition each, handed back through shared memory), one batch staged
    while the next runs (the plan's prefetch), every job's proofs pairing-checked before it completes.

    The host's witnesses are bounded by ``host_budget`` less this process's resident memory at the start and
    :data:`STREAM_HOST_MARGIN`, and by two sectors' witnesses (``host_witness_budget_gib``; no bound without a host
    budget). Every worker is started and warmed first (``warm_workers_s``), then one partition is proved, untimed
    (``warm_s``: it compiles what the witnesses decide, the split MSMs), then one sector alone (``lone_latency_s``:
    a sector end to end, submission to verified proofs, through a warm, idle engine, its partitions' inputs sampled
    by the workers inside that time; ``lone_first_batch_s``: when its first device phase began, after the first
    partition's synthesis -- split over idle workers, ``lone_split_partitions``; ``lone_events``: its timeline, as
    ``events`` below, in seconds since its submission), then one sector alone again from inputs sampled before
    its submission (``lone_inputs_*``, the same figures; ``lone_inputs_sample_s``: the sampling, untimed): PoRep's
    C2 proper, which starts from what C1 hands over, as cuzk's sector time does; then every sector at once:
    ``latency_s`` (per sector, submission to its verified proofs), ``completed_s`` (from the submission),
    ``interval_s`` (the mean time between completions after the first: seconds per sector in a continuous
    stream); from the events that began after the submissions, the device's busy fraction and the mean seconds
    of each device phase and of a partition's synthesis; the engine's peak of host witness bytes; the machine's
    memory in use at its peak (``/proc/meminfo``, every process and the shared files); and the engine's timeline
    from the submissions on (``events``: ``[lane, name, start, end, batch, job]``, seconds since the submissions;
    :mod:`cuzk_jax.engine.timeline`)."""
    from cuzk_jax import bench
    from cuzk_jax.engine import Engine

    from cuzk_jax.errors import BadInput

    P = int(cfg.partitions)
    sectors = int(cfg.sectors)
    if sectors < 1 or P < 1:
        raise BadInput(f"--stream needs --sectors >= 1 and --partitions >= 1, got {sectors} and {P}")
    batch = P if rk.plan is None else max(1, min(P, rk.plan.batch))
    host = rk.config.host_budget
    # at most two sectors' witnesses: one being proved while the next is synthesized keeps the device fed, and more
    # in flight only adds the workers' own memory beside them
    budget = None if host is None else max(32 * rk.num_vars, min(host - _rss() - STREAM_HOST_MARGIN,
                                                                 2 * P * 32 * rk.num_vars))
    row.update(mode="stream", sectors=sectors, batch=batch, workers=cfg.workers or None,
               host_witness_budget_gib=None if budget is None else round(budget / 2**30, 3),
               host_witness_budget_bytes=budget)
    rows: list[dict] = []
    from cuzk_jax.circuits.bench import PeakMemory

    with PeakMemory() as memory:
        with Engine(max_batch=batch, synthesis="process", synthesis_workers=cfg.workers or None, prefetch=1,
                    prover=rk.config, host_budget_bytes=budget, max_wait_s=None) as eng:
            eng.preload(circuit, resident=rk)
            t = time.perf_counter()
            eng.warm_up([circuit])  # every worker started and warmed (porep_like: a header and one challenge)
            row.update(warm_workers_s=round(time.perf_counter() - t, 3))
            t = time.perf_counter()
            eng.submit(circuit, sector=cfg.seed + sectors, partitions=1).result()  # verified, or it raises
            row.update(warm_s=round(time.perf_counter() - t, 3))
            _say(f"stream: warm-up partition {row['warm_s']} s; {sectors} sectors of {P} partitions, batches of "
                 f"{batch}, host witness budget {row['host_witness_budget_gib']} GiB")
            row.update(_lone(eng, "lone", lambda: eng.submit(circuit, sector=cfg.seed + sectors + 1, partitions=P)))
            # C2 proper: the partitions' inputs (what C1 hands over) in hand before the clock starts
            t = time.perf_counter()
            inputs = sample_inputs(circuit, cfg.seed + sectors + 2, P, cfg.workers or os.cpu_count() or 1)
            row.update(lone_inputs_sample_s=round(time.perf_counter() - t, 3))
            row.update(_lone(eng, "lone_inputs", lambda: eng.submit(circuit, inputs=inputs)))
            t0 = time.perf_counter()
            done: dict[int, float] = {}
            futs = []
            for k in range(sectors):
                fut = eng.submit(circuit, sector=cfg.seed + k, partitions=P)
                fut.add_done_callback(lambda f, k=k: done.setdefault(k, time.perf_counter() - t0))
                futs.append(fut)
            results = [f.result() for f in futs]  # raises the first failure (a proof that does not verify, ...)
            wall = time.perf_counter() - t0
            st = eng.status()
            events = _timeline(eng, t0 - eng.t0, lambda e, off: e.end > off)
    completed = [round(done[k], 3) for k in range(sectors)]
    order = sorted(completed)
    # the stream's own figures, from the events that began after the submissions (the engine's status also counts
    # the warm-up partition, whose batch compiled, and the lone sector)
    mine = [e for e in events if e[2] >= 0]
    busy = sum(min(e[3], wall) - e[2] for e in mine if e[0] == "device")
    by_phase: dict[str, list] = {}
    for e in mine:
        if e[0] == "device" or e[1] == "synthesis":
            by_phase.setdefault(e[1], []).append(e[3] - e[2])
    latency = [round(r.timings.total, 3) for r in results]
    out = dict(row, rep=0, ok=all(r.verified for r in results), proofs=sum(len(r.proofs) for r in results),
               wall_s=round(wall, 3), latency_s=latency, completed_s=completed,
               interval_s=round((order[-1] - order[0]) / (sectors - 1), 3) if sectors > 1 else None,
               per_partition_s=round(wall / (sectors * P), 3),
               device_busy_fraction=round(busy / wall, 4), batch_sizes=st["batch_sizes"],
               phase_mean_s={k: round(sum(v) / len(v), 4) for k, v in by_phase.items()},
               synthesis_mean_s=round(sum(by_phase.get("synthesis", [0.0])) / len(by_phase.get("synthesis", [1])), 3),
               host_witness_peak_gib=round(st["host_witness"]["peak_bytes"] / 2**30, 3), events=events,
               machine_memory_gib=None if not memory.base else {
                   "start": round(memory.base / 2**30, 3), "peak": round((memory.base + memory.peak) / 2**30, 3)})
    peak = _peak_device_bytes()
    out.update(device_peak_gib=None if peak is None else round(peak / 2**30, 3), **bench.host_peak())
    _say(f"stream: {sectors} sectors in {out['wall_s']} s; latency {latency} s; interval {out['interval_s']} s; "
         f"device busy {out['device_busy_fraction']:.0%}; host witnesses peak {out['host_witness_peak_gib']} GiB")
    bench.emit(rows, out)
    return rows
