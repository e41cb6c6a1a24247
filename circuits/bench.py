"""Synthesis-only benchmark (the logic behind ``bench --op=synth``; cuzk's "synth-only bench").

Phases, each timed separately (wall seconds; synthesis also in process CPU seconds):

0. warm-up: sample and synthesize partition 0 once (Poseidon parameters and programs are generated on first use);
1. structure synthesis (``ConstraintSystem("structure")``, once per circuit: setup's view);
1b. the compiled form (:mod:`.compiled`, unless ``compiled=False``): save the structure to a compiled file in
   ``compiled_dir`` (default: a temporary directory, removed afterwards) -- ``compiled_compile_s`` = structure
   synthesis + save, what a first run pays -- then ``Circuit.r1cs(cache_dir=...)`` of a fresh circuit instance,
   which maps the file (header checks, streamed SHA-256, range checks; the page cache is warm from the save):
   ``compiled_load_s``, what every later run pays instead of ``structure_s``; also the load without the checksum,
   the file's bytes and bytes per constraint;
2. input sampling per partition (native hashing of the sparse trees -- not synthesis, reported apart);
3. witnesses. porep_like: the Python builder (``Circuit.witness``, one process) on the first ``builder_partitions``
   partitions when the preset has at most ``builder_max`` constraints (``builder_constraints_per_s``), then the
   batched witnesses of ALL partitions on the same inputs (:func:`.porep_like.witness_batch` with ``workers``
   processes, pool started and warmed first: ``pool_warmup_s``) straight into ``(8, P, n_vars)`` Montgomery limbs
   (``witness_constraints_per_s`` = constraints x partitions / wall time; ``batched_equals_builder`` compares the
   two), with the peak host memory in use during it (``peak_host_used_bytes``); other circuits: the builder per
   partition, then
4. host packing of ``z`` into ``(8, P, n_vars)`` Montgomery limbs;
5. device: R1CS upload, ``z`` upload, compile of the evaluator, then the median of ``reps`` evaluations of
   ``A z, B z, C z`` for all partitions at once, and the satisfaction check (must pass).
"""

from __future__ import annotations

import os
import resource
import tempfile
import threading
import time

import numpy as np

from . import compiled as compiled_form
from .base import Circuit, get_circuit
from .porep_like import PorepLike, block_counts, sector_witnesses, warm_pool, witness_batch
from .r1cs import PackedWitness, stack_z


def _workers(workers: int | None) -> int:
    return workers if workers and workers > 0 else (os.cpu_count() or 1)


class PeakMemory:
    """Peak host memory in use (``MemTotal - MemAvailable`` of /proc/meminfo, so worker processes and shared
    files count) above its value on entry (``base``), sampled every 50 ms by a thread while the ``with`` block runs;
    0 where /proc/meminfo is missing."""

    def __init__(self, period: float = 0.05):
        self.period, self.peak, self._stop = period, 0, threading.Event()

    @staticmethod
    def used() -> int:
        try:
            with open("/proc/meminfo") as fh:
                info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in fh}
            return info["MemTotal"] - info["MemAvailable"]
        except (OSError, KeyError, ValueError, IndexError):
            return 0

    def _loop(self):
        while not self._stop.wait(self.period):
            self.peak = max(self.peak, self.used() - self.base)

    def __enter__(self):
        self.base = self.used()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.used() - self.base)


def _timed(fn, *args):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - w0, time.process_time() - c0


def run(circuit_name: str, preset: str, partitions: int = 10, seed: int = 0, reps: int = 5, warmup: int = 1,
        device_eval: bool = True, reference_check_max: int = 0,
        partition_chunk: int | None = None, log=print, compiled: bool = True,
        compiled_dir: str | None = None, workers: int | None = None, builder_max: int = 1 << 22,
        builder_partitions: int = 2) -> dict:
    """Run the benchmark; returns a flat-ish dict of results (see the module docstring)."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    circuit = get_circuit(circuit_name, preset)
    res: dict = {"circuit": circuit_name, "preset": preset, "params": dict(circuit.params), "partitions": partitions,
                 "seed": seed}

    # one-time costs kept out of the synthesis figures: Poseidon parameters (Grain LFSR, MDS checks) and the
    # symbolic Poseidon programs are generated on first use and cached per process (porep_like: a counting run of
    # one challenge block, which witness_batch needs anyway; else one builder witness)
    first_inputs, wall, _ = _timed(circuit.sample_inputs, 0, seed)
    if isinstance(circuit, PorepLike):
        _, wall2, _ = _timed(block_counts, circuit)
    else:
        _, wall2, _ = _timed(circuit.witness, first_inputs, False)
    res["warmup_s"] = wall + wall2

    r1cs, wall, cpu = _timed(circuit.r1cs, None, False)
    m = r1cs.num_constraints
    res.update({"constraints": m, "log2_constraints": round(float(np.log2(max(m, 1))), 3),
                "public_inputs": r1cs.num_public, "private_vars": r1cs.num_aux, "nnz": list(r1cs.nnz),
                "coeff_table": len(r1cs.coeffs), "digest": r1cs.digest(),
                "structure_s": wall, "structure_cpu_s": cpu, "structure_constraints_per_s": m / wall,
                "structure_mode": "tiled" if isinstance(circuit, PorepLike) and circuit.params["challenges"] > 1
                else "builder", "bytes_per_constraint": compiled_form.bytes_per_constraint(r1cs),
                "domain_log2": int(m + r1cs.num_inputs - 1).bit_length()})
    log(f"[synth] {circuit_name}/{preset}: {m} constraints (2^{res['log2_constraints']}), structure {wall:.2f}s")
    if compiled:
        res.update(_compiled_phase(circuit_name, preset, r1cs, res["structure_s"], compiled_dir))
        log(f"[synth] compiled file: {res['compiled_bytes'] / 2**20:.1f} MiB "
            f"({res['compiled_bytes_per_constraint']:.1f} B/constraint), save {res['compiled_save_s']:.2f}s, "
            f"load {res['compiled_load_s']:.3f}s ({res['structure_s'] / res['compiled_load_s']:.0f}x faster than "
            f"structure synthesis)")

    if not device_eval and not reference_check_max:  # the structure is not needed past this point: free it
        r1cs = None
        circuit._r1cs = None
    batched = getattr(circuit, "name", "") == "porep_like" and type(circuit).synthesize is PorepLike.synthesize
    res["workers"] = _workers(workers)
    inputs_list, sample_s = [], []
    for p in range(partitions):
        inputs, w_s, _ = _timed(circuit.sample_inputs, p, seed)
        inputs_list.append(inputs)
        sample_s.append(w_s)
    res["sample_s"] = sample_s
    nb = partitions if not batched else (min(partitions, builder_partitions) if m <= builder_max else 0)
    builder_s, witnesses = [], []
    for p in range(nb):  # the Python builder (Circuit.witness: one Python call per gate)
        w, wall, _ = _timed(Circuit.witness, circuit, inputs_list[p])
        builder_s.append(wall)
        witnesses.append(w)
    if nb:
        res.update({"builder_partitions": nb, "builder_witness_s": builder_s,
                    "builder_constraints_per_s": m * nb / sum(builder_s)})
        log(f"[synth] builder witness: {sum(builder_s):.2f}s for {nb} partitions "
            f"({res['builder_constraints_per_s']:,.0f} constraints/s, 1 process)")
    if batched:
        if res["workers"] > 1 and partitions > 1:  # start and warm the worker pool (a service keeps it warm)
            started, wall, _ = _timed(warm_pool, circuit, min(res["workers"], partitions))
            res.update({"pool_warmup_s": wall, "pool_workers_started": started})
        with PeakMemory() as mem:
            (z, _), wall, cpu = _timed(witness_batch, circuit, inputs_list, min(res["workers"], partitions))
        res.update({"witness_mode": "batched", "witness_total_s": wall, "witness_parent_cpu_s": cpu,
                    "witness_constraints_per_s": m * partitions / wall, "peak_host_used_bytes": mem.peak,
                    "witness_z_bytes": int(z.nbytes)})
        if witnesses:
            res["batched_equals_builder"] = bool(np.array_equal(z[:, :nb, :], stack_z(witnesses)))
            if not res["batched_equals_builder"]:
                raise AssertionError("batched witness differs from the builder's")
        log(f"[synth] batched witness: {wall:.2f}s for {partitions} partitions "
            f"({m * partitions / wall:,.0f} constraints/s, {res['workers']} workers, "
            f"peak host memory +{mem.peak / 2**30:.2f} GiB)")
        if not device_eval and not reference_check_max:
            # the sector path as groth16.sector.synthesize runs it: each worker samples its partitions too
            del z
            with PeakMemory() as mem2:
                (ws, _), wall2, _ = _timed(sector_witnesses, circuit, partitions, seed,
                                           min(res["workers"], partitions))
            del ws
            res.update({"sector_sample_and_witness_s": wall2, "sector_peak_host_used_bytes": mem2.peak})
            log(f"[synth] sector path (sampling in the workers): {wall2:.2f}s for {partitions} partitions, peak "
                f"host memory +{mem2.peak / 2**30:.2f} GiB")
            z = None
    else:
        total = sum(builder_s)
        res.update({"witness_mode": "builder", "witness_s": builder_s, "witness_total_s": total,
                    "witness_constraints_per_s": m * partitions / total})
        z, wall, _ = _timed(stack_z, witnesses)
        res["pack_z_s"] = wall
    res["peak_rss_self_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    res["peak_rss_child_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024

    if reference_check_max and m <= reference_check_max:
        w0 = witnesses[0] if witnesses else PackedWitness(np.ascontiguousarray(z[:, 0, :]), r1cs.num_inputs)
        _, wall, _ = _timed(r1cs.check, w0)
        res["reference_check_s"] = wall

    if not device_eval:
        return res

    import jax
    import jax.numpy as jnp

    from cuzk_jax.ops import r1cs as ops_r1cs

    res["device"] = str(jax.devices()[0])
    res["partition_chunk"] = partition_chunk
    dr, wall, _ = _timed(lambda: jax.block_until_ready(ops_r1cs.to_device(r1cs)))
    res["upload_r1cs_s"] = wall
    zd, wall, _ = _timed(lambda: jax.block_until_ready(jnp.asarray(z)))
    res["upload_z_s"] = wall
    with jax.enable_x64(True):
        t0 = time.perf_counter()
        ev = ops_r1cs.evaluate_program.lower(dr, zd, chunk=partition_chunk).compile()
        res["compile_evaluate_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ck = ops_r1cs.check_program.lower(dr, zd, chunk=partition_chunk).compile()
        res["compile_check_s"] = time.perf_counter() - t0
    for _ in range(warmup):
        jax.block_until_ready(ev(dr, zd))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(ev(dr, zd))
        times.append(time.perf_counter() - t0)
    med = float(np.median(times))
    res.update({"evaluate_s": med, "evaluate_min_s": min(times), "evaluate_max_s": max(times), "reps": reps,
                "evaluate_constraints_per_s": m * partitions / med,
                "evaluate_nnz_per_s": sum(r1cs.nnz) * partitions / med})
    (ok, first), wall, _ = _timed(lambda: jax.block_until_ready(ck(dr, zd)))
    res["check_s"] = wall
    res["all_satisfied"] = bool(np.asarray(ok).all())
    if not res["all_satisfied"]:
        bad = int(np.argmin(np.asarray(ok)))
        res["first_unsatisfied"] = {"partition": bad, "constraint": int(np.asarray(first)[bad]),
                                    "name": r1cs.constraint_name(int(np.asarray(first)[bad]))}
    log(f"[device] evaluate A.z, B.z, C.z for {partitions} partitions: {med * 1e3:.2f} ms "
        f"(compile {res['compile_evaluate_s']:.1f}s), satisfied={res['all_satisfied']}")
    return res


def _compiled_phase(circuit_name: str, preset: str, r1cs, structure_s: float, compiled_dir: str | None) -> dict:
    """Save ``r1cs`` as a compiled file and load it back as a later run would (phase 1b of the module docstring)."""
    with tempfile.TemporaryDirectory(dir=compiled_dir, prefix="synth-bench-") as d:
        circuit = get_circuit(circuit_name, preset)
        path = circuit.compiled_path(d)
        hdr, save_s, _ = _timed(compiled_form.save, r1cs, path, circuit.compiled_meta())
        fresh = get_circuit(circuit_name, preset)
        loaded, load_s, load_cpu = _timed(fresh.r1cs, d)
        ok = loaded.digest() == r1cs.digest() and fresh.r1cs(cache=False) is loaded
        loaded2, nocheck_s, _ = _timed(compiled_form.load, path, False)
        size = os.path.getsize(path)
        del loaded, loaded2, fresh  # release the mapping before the directory goes
    return {"compiled_bytes": size, "compiled_bytes_per_constraint": size / max(r1cs.num_constraints, 1),
            "compiled_indptr_bytes": hdr.ptr_width, "compiled_save_s": save_s,
            "compiled_compile_s": structure_s + save_s, "compiled_load_s": load_s, "compiled_load_cpu_s": load_cpu,
            "compiled_load_nocheck_s": nocheck_s, "compiled_digest_ok": ok}
