"""A partition split over several synthesis workers (``EngineConfig.split_synthesis``, ``synthesis.SplitSynthesis``):
porep_like's spans of challenges written by several workers into one shared file equal the unsplit witness limb
for limb; the engine splits only when workers would otherwise sit idle; a span that raises fails its job alone, a
span whose worker dies is retried unsplit, and no shared file is left behind.

The backend here records the staged limbs instead of proving (what is checked is the witness that reaches the
device; the proofs of the engine's witnesses are checked by pairing in test_engine*.py)."""

import os
import time

import numpy as np
import pytest

from cuzk_jax.circuits import get_circuit
from cuzk_jax.engine import Engine
from cuzk_jax.engine import synthesis
from cuzk_jax.engine.faults import FaultySpans
from cuzk_jax.groth16.pipeline import BatchOutput

SHAPE = {"challenges": 6, "depth": 3}  # porep_like "tiny" (Poseidon everywhere) with six challenges


class _Recording:
    """A backend whose "proof" of a slot is its staged ``(8, num_vars)`` limbs and their form."""

    name = "recording"
    num_devices = 1

    def place(self, pk, r1cs, headroom=None):
        return "resident"

    @staticmethod
    def size(resident):
        return 1

    def stage(self, resident, z, montgomery=True):
        return np.array(z), montgomery

    def run(self, resident, staged, phase):
        z, montgomery = staged
        n = z.shape[1]
        return BatchOutput(ok=np.ones(n, bool), first=np.full(n, -1), points={}, host={"z": z, "m": montgomery})

    def finish(self, resident, out, i, r, s):
        return out.host["z"][:, i, :].copy(), out.host["m"]


def _engine(circuits, workers=3, **kw):
    kw.setdefault("max_batch", 1)
    eng = Engine(backend=_Recording(), synthesis="process", synthesis_workers=workers,
                 shared_z_min_bytes=0, verify=False, **kw)
    for c in circuits:
        eng.preload(c, resident="resident")
    return eng


def _idle(eng):
    """Wait until the engine's pool holds no task (the last job's futures may resolve before its tasks' own
    bookkeeping has run), so the next submission sees idle workers."""
    t0 = time.time()
    while eng.status()["synthesis"]["in_pool"]:
        assert time.time() - t0 < 60, eng.status()["synthesis"]
        time.sleep(0.01)


def _limbs(circuit, inputs):
    return circuit.witness(inputs).z_limbs(True)


def _check(circuit, res, inputs_list):
    for (z, montgomery), inputs in zip(res.proofs, inputs_list):
        assert montgomery and np.array_equal(z, _limbs(circuit, inputs))


def test_span_bounds():
    assert synthesis.span_bounds(18, 6) == [(0, 3), (3, 6), (6, 9), (9, 12), (12, 15), (15, 18)]
    assert synthesis.span_bounds(7, 3) == [(0, 3), (3, 5), (5, 7)]
    assert synthesis.span_bounds(2, 5) == [(0, 1), (1, 2)]  # no more spans than units
    assert synthesis.span_bounds(4, 0) == [(0, 4)]


def test_witness_spans_equal_the_witness(shm):
    """Spans written into one file in any order equal the batched witness; a bad span or a file of another size
    is refused before anything is written. A one-challenge circuit has no spans."""
    c = get_circuit("porep_like", "tiny", **SHAPE)
    assert c.span_units() == 6 and get_circuit("porep_like", "tiny").span_units() == 0
    inputs = c.sample_inputs(1, 4)
    n = c.r1cs().num_vars
    path = synthesis.new_shared_file(n)
    try:
        for lo, hi in [(3, 6), (0, 1), (1, 3)]:
            counts = c.witness_span(inputs, lo, hi, path)
        assert counts["num_vars"] == n
        with open(path, "rb") as f:
            got = np.frombuffer(f.read(), np.uint32).reshape(8, n)
        assert np.array_equal(got, _limbs(c, inputs))
        for lo, hi in [(2, 2), (0, 7), (-1, 2)]:
            with pytest.raises(ValueError, match="not a span"):
                c.witness_span(inputs, lo, hi, path)
    finally:
        synthesis.drop_shared(path)
    wrong = synthesis.new_shared_file(n + 1)
    with pytest.raises(ValueError, match="wires"):
        c.witness_span(inputs, 0, 2, wrong)
    synthesis.drop_shared(wrong)
    assert not os.listdir(shm)


def test_split_ways_rule():
    """The rule itself (``core.split_ways``): the workers the backlog leaves idle, balanced; never more than the
    spans or the free workers, never below one."""
    from cuzk_jax.engine.core import split_ways

    assert split_ways(18, 15, 9) == 6  # 15 free less 9 waiting: three rounds of spans on 6 workers
    assert split_ways(18, 15, 0) == 9  # a lone partition: two rounds either way, on 9 workers (6 stay free)
    assert split_ways(18, 15, 20) == 1 and split_ways(18, 1, 0) == 1 and split_ways(1, 15, 0) == 1
    assert split_ways(6, 4, 0) == 3 and split_ways(6, 3, 0) == 3 and split_ways(7, 4, 0) == 4
    assert split_ways(6, 4, 1) == 3 and split_ways(6, 4, 2) == 2 and split_ways(6, 4, 3) == 1
    assert split_ways(4, 64, 0) == 4  # no more ways than spans


def test_engine_splits_with_idle_workers(shm):
    """Three workers, batches of one. A job of two partitions splits its first (one worker would idle), witness
    equal to the unsplit one, synthesis recorded on two workers; a sector job too (sampled first); a job of five
    fills the pool and splits nothing. Twin: split_synthesis=False never splits, same witnesses."""
    c = get_circuit("porep_like", "tiny", **SHAPE)
    two = [c.sample_inputs(p, 7) for p in range(2)]
    five = [c.sample_inputs(p, 8) for p in range(5)]
    with _engine([c]) as eng:
        res = eng.submit(c, two).result(timeout=300)
        assert eng.status()["synthesis"]["split_partitions"] == 1
        _check(c, res, two)
        workers = {e.lane for e in eng.events() if e.name == "synthesis" and e.job == res.job_id}
        assert len(workers) >= 2, workers
        _idle(eng)
        sec = eng.submit(c, sector=5, partitions=2).result(timeout=300)
        assert eng.status()["synthesis"]["split_partitions"] == 2
        _check(c, sec, [c.sample_inputs(p, 5) for p in range(2)])
        full = eng.submit(c, five).result(timeout=300)
        assert eng.status()["synthesis"]["split_partitions"] == 2
        _check(c, full, five)
    with _engine([c], split_synthesis=False) as eng:
        res = eng.submit(c, two).result(timeout=300)
        assert eng.status()["synthesis"]["split_partitions"] == 0
        _check(c, res, two)
    assert not os.listdir(shm)


def test_split_faults(shm, tmp_path):
    """A later span that raises fails its job with that error (the next job completes); one whose worker dies is
    retried alone, unsplit (the span faults are not taken there), and its witness is right. No file is left."""
    c = FaultySpans("tiny", **SHAPE)
    inputs = [c.sample_inputs(p, 9) for p in range(2)]
    with _engine([c]) as eng:
        bad = eng.submit(c, [dict(inputs[0], fault=("raise", "span boom")), inputs[1]])
        with pytest.raises(RuntimeError, match="span boom"):
            bad.result(timeout=300)
        good = eng.submit(c, inputs).result(timeout=300)
        _check(c, good, inputs)
        _idle(eng)
        once = [dict(inputs[0], fault=("exit_once", str(tmp_path / "died"))), inputs[1]]
        res = eng.submit(c, once).result(timeout=300)
        st = eng.status()["synthesis"]
        assert (tmp_path / "died").exists() and st["resynthesized"] >= 1 and st["pool_restarts"] >= 1
        _check(c, res, inputs)  # (the marker and the "span boom" show the faulty partitions were split)
    assert not os.listdir(shm)


def test_split_bench_row(shm):
    """``bench --op=synth --impl=split``: one partition as one task and split over the pool's workers, the two
    witnesses equal; a circuit without spans (one challenge) is a usage error before any pool starts."""
    from cuzk_jax.bench import synth as synth_bench
    from cuzk_jax.errors import BadInput

    c = get_circuit("porep_like", "tiny", **SHAPE)
    row = synth_bench.split(c, partitions=1, seed=3, warmup=0, workers=2)
    assert row["impl"] == "split" and row["ways"] == 2 and row["equal"] is True
    assert row["unsplit_s"] > 0 and row["split_s"] > 0 and row["speedup"] > 0 and not os.listdir(shm)
    with pytest.raises(BadInput, match="challenge spans"):
        synth_bench.split(get_circuit("porep_like", "tiny"), partitions=1, seed=3, warmup=0, workers=2)


def test_cancelled_split_partition_leaves_nothing(shm):
    """A job cancelled while its split partition is sampling or writing: the job ends cancelled, its tasks'
    results are dropped (the file goes with them), and the next job's split partition is right."""
    c = get_circuit("porep_like", "tiny", **SHAPE)
    inputs = [c.sample_inputs(p, 12) for p in range(2)]
    with _engine([c]) as eng:
        eng.pause()  # nothing reaches a batch: the cancel finds the job in synthesis or ready
        fut = eng.submit(c, sector=12, partitions=2)
        assert eng.cancel(fut)
        eng.resume()
        _idle(eng)
        res = eng.submit(c, inputs).result(timeout=300)
        _check(c, res, inputs)
        assert eng.status()["synthesis"]["split_partitions"] == 2 and fut.cancelled()
    assert not os.listdir(shm)


def test_split_in_transit_holds_the_pool(shm, monkeypatch):
    """A partition split over every worker is counted in flight before its tasks are submitted; a job submitted
    from another thread in that window must not queue a one-worker task its spans would wait behind: it waits
    for the workers and is split in turn. Three workers and jobs of one partition, so each partition, entering an
    idle pool with nothing else waiting, takes all three: two split partitions (without the hold, one: the second
    job's partition would enter the full pool as one task)."""
    import threading

    c = get_circuit("porep_like", "tiny", **SHAPE)
    first = [c.sample_inputs(0, 21)]
    second = [c.sample_inputs(0, 22)]
    real = synthesis.new_shared_file
    box = {}
    with _engine([c]) as eng:
        def racing(n):  # between the pump's reservation and its submission: another thread submits a job
            if "fut" not in box:
                box["fut"] = None
                t = threading.Thread(target=lambda: box.update(fut=eng.submit(c, second)))
                t.start()
                t.join()
            return real(n)

        monkeypatch.setattr(synthesis, "new_shared_file", racing)
        res = eng.submit(c, first).result(timeout=300)
        res2 = box["fut"].result(timeout=300)
        _check(c, res, first)
        _check(c, res2, second)
        assert eng.status()["synthesis"]["split_partitions"] == 2
    assert not os.listdir(shm)
