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
3. witness synthesis per partition (``ConstraintSystem("witness")``): constraints/s = constraints / time;
4. host packing of ``z`` into ``(8, P, n_vars)`` Montgomery limbs;
5. device: R1CS upload, ``z`` upload, compile of the evaluator, then the median of ``reps`` evaluations of
   ``A z, B z, C z`` for all partitions at once, and the satisfaction check (must pass).
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np

from . import compiled as compiled_form
from .base import get_circuit
from .r1cs import stack_z


def _timed(fn, *args):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - w0, time.process_time() - c0


def run(circuit_name: str, preset: str, partitions: int = 10, seed: int = 0, reps: int = 5, warmup: int = 1,
        device_eval: bool = True, method: str = "scatter", reference_check_max: int = 0,
        partition_chunk: int | None = None, log=print, compiled: bool = True,
        compiled_dir: str | None = None) -> dict:
    """Run the benchmark; returns a flat-ish dict of results (see the module docstring)."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    circuit = get_circuit(circuit_name, preset)
    res: dict = {"circuit": circuit_name, "preset": preset, "params": dict(circuit.params), "partitions": partitions,
                 "seed": seed}

    # one-time costs kept out of the synthesis figures: Poseidon parameters (Grain LFSR, MDS checks) and the
    # symbolic Poseidon programs are generated on first use and cached per process
    first_inputs, wall, _ = _timed(circuit.sample_inputs, 0, seed)
    _, wall2, _ = _timed(circuit.witness, first_inputs, False)
    res["warmup_s"] = wall + wall2

    r1cs, wall, cpu = _timed(circuit.r1cs)
    m = r1cs.num_constraints
    res.update({"constraints": m, "log2_constraints": round(float(np.log2(max(m, 1))), 3),
                "public_inputs": r1cs.num_public, "private_vars": r1cs.num_aux, "nnz": list(r1cs.nnz),
                "coeff_table": len(r1cs.coeffs), "digest": r1cs.digest(),
                "structure_s": wall, "structure_cpu_s": cpu, "structure_constraints_per_s": m / wall})
    log(f"[synth] {circuit_name}/{preset}: {m} constraints (2^{res['log2_constraints']}), structure {wall:.2f}s")
    if compiled:
        res.update(_compiled_phase(circuit_name, preset, r1cs, res["structure_s"], compiled_dir))
        log(f"[synth] compiled file: {res['compiled_bytes'] / 2**20:.1f} MiB "
            f"({res['compiled_bytes_per_constraint']:.1f} B/constraint), save {res['compiled_save_s']:.2f}s, "
            f"load {res['compiled_load_s']:.3f}s ({res['structure_s'] / res['compiled_load_s']:.0f}x faster than "
            f"structure synthesis)")

    sample_s, witness_s, witness_cpu_s, witnesses = [], [], [], []
    for p in range(partitions):
        inputs, w_s, _ = _timed(circuit.sample_inputs, p, seed)
        w, wall, cpu = _timed(circuit.witness, inputs)
        sample_s.append(w_s)
        witness_s.append(wall)
        witness_cpu_s.append(cpu)
        witnesses.append(w)
    total = sum(witness_s)
    res.update({"sample_s": sample_s, "witness_s": witness_s, "witness_cpu_s": witness_cpu_s,
                "witness_total_s": total, "witness_constraints_per_s": m * partitions / total})
    log(f"[synth] witness: {total:.2f}s for {partitions} partitions ({m * partitions / total:,.0f} constraints/s)")

    if reference_check_max and m <= reference_check_max:
        _, wall, _ = _timed(r1cs.check, witnesses[0])
        res["reference_check_s"] = wall

    z, wall, _ = _timed(stack_z, witnesses)
    res["pack_z_s"] = wall
    if not device_eval:
        return res

    import jax
    import jax.numpy as jnp

    from cuzk_jax.ops import r1cs as ops_r1cs

    res["device"] = str(jax.devices()[0])
    res["method"] = method
    res["partition_chunk"] = partition_chunk
    dr, wall, _ = _timed(lambda: jax.block_until_ready(ops_r1cs.to_device(r1cs)))
    res["upload_r1cs_s"] = wall
    zd, wall, _ = _timed(lambda: jax.block_until_ready(jnp.asarray(z)))
    res["upload_z_s"] = wall
    with jax.enable_x64(True):
        t0 = time.perf_counter()
        ev = ops_r1cs.evaluate_program.lower(dr, zd, method=method, chunk=partition_chunk).compile()
        res["compile_evaluate_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ck = ops_r1cs.check_program.lower(dr, zd, method=method, chunk=partition_chunk).compile()
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
