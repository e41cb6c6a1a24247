"""The engine's host-memory side at sector scale, at test size: witnesses handed back through shared-memory files
(no file left behind, whatever becomes of the task), the host witness budget (never exceeded; without it the same
load holds more; a partition larger than the budget is refused at submit), batches that cannot fill under the
budget go short instead of waiting, and a placed key adopted as it is.

The host backend proves (Python-int Groth16, real proofs checked by pairing); the cube circuit's witness is a few
wires, so ``shared_z_min_bytes=0`` forces the shared-file path and the budget is counted in cube partitions.
"""

import os
import time
import types

import pytest

from cuzk_jax import encoding
from cuzk_jax.circuits import base
from cuzk_jax.circuits import porep_like as pl
from cuzk_jax.circuits.r1cs import PackedWitness
from cuzk_jax.engine import Engine, HostBackend
from cuzk_jax.engine import synthesis
from cuzk_jax.engine.faults import FaultyCube
from cuzk_jax.errors import BadInput
from cuzk_jax.groth16 import prover, verifier


@pytest.fixture
def cube(cube_key):
    return cube_key


def _verified(pk, fut, timeout=180):
    res = fut.result(timeout=timeout)
    assert res.verified
    assert all(verifier.verify(pk.vk, x, p) for x, p in zip(res.public_inputs, res.proofs))
    return res


def test_shared_memory_hand_off_proves_the_same_and_leaves_no_file(cube, shm):
    """Process workers write each witness into a shared file; the proofs equal those of witnesses returned
    through the pool's pipe (same randomness) and verify; no file is left. Twin: a task that raises and a worker
    that dies leave no file either, and their jobs fail alone."""
    from cuzk_jax.engine import WorkerDied

    circuit, r1cs, pk = cube
    inputs = [circuit.sample_inputs(p, 3) for p in range(4)]
    rs = prover.insecure_randomness_for_tests(9, 4)
    results = {}
    for shared in (0, 1 << 40):  # every witness through a file / none
        with Engine(backend=HostBackend(), max_batch=2, max_wait_s=0.05, synthesis="process",
                    synthesis_workers=2, shared_z_min_bytes=shared) as eng:
            eng.preload(circuit, pk)
            results[shared] = _verified(pk, eng.submit(circuit, inputs, randomness=rs))
            if shared == 0:
                faulty = FaultyCube()
                raises = eng.submit(faulty, [dict(inputs[0], fault=("raise", "boom"))])
                dies = eng.submit(faulty, [dict(inputs[1], fault=("exit", None))])
                after = eng.submit(circuit, inputs[2:], randomness=rs[2:])
                with pytest.raises(RuntimeError, match="boom"):
                    raises.result(timeout=180)
                with pytest.raises(WorkerDied):
                    dies.result(timeout=180)
                _verified(pk, after)
        assert not os.listdir(shm), os.listdir(shm)
    a, b = results[0].proofs, results[1 << 40].proofs
    assert [(p.a, p.b, p.c) for p in a] == [(p.a, p.b, p.c) for p in b]


def test_claim_maps_the_file_and_removes_it(shm):
    """The two halves of the hand-off directly: a worker-side write of a witness (Python ints; packed limbs) into a
    file sized by the parent, claimed as the same limbs; a witness of another size is refused (nothing written)
    and its file dropped."""
    circuit = base.get_circuit("cube")
    w = circuit.witness(circuit.sample_inputs(0, 1))
    path = synthesis.new_shared_file(w.num_vars)
    out = synthesis.synthesize_partition(circuit, ("witness", w), out=path)
    assert out.z is None and out.shared == path
    claimed = synthesis.claim_shared(out)
    assert not os.path.exists(path) and claimed.shared is None
    inband = synthesis.synthesize_partition(circuit, ("witness", w))
    assert claimed.montgomery == inband.montgomery and (claimed.z == inband.z).all()
    # a packed witness (the porep_like batched path) goes in as its own limbs, written row by row (pwrite)
    packed = PackedWitness(encoding.ints_to_limbs(w.z, "fr", montgomery=True), len(w.inputs), w.num_constraints)
    path = synthesis.new_shared_file(w.num_vars)
    got = synthesis.claim_shared(synthesis.synthesize_partition(circuit, ("witness", packed), out=path))
    assert got.montgomery and (got.z == packed.limbs).all() and not os.path.exists(path)
    wrong = synthesis.new_shared_file(w.num_vars + 1)
    with pytest.raises(ValueError, match="shared output file"):
        synthesis.synthesize_partition(circuit, ("witness", w), out=wrong)
    synthesis.drop_shared(wrong)
    assert not os.listdir(shm)


def _held_while_paused(cube, budget_partitions):
    """12 partitions (one job each) submitted to a paused engine (no batch forms, so every synthesized partition
    stays on the host), synthesized by 3 threads: how many partitions it holds once synthesis stops, and its peak;
    then resumed, every proof verifies and every byte is given back."""
    circuit, r1cs, pk = cube
    zb = 32 * r1cs.num_vars
    budget = None if budget_partitions is None else budget_partitions * zb
    with Engine(backend=HostBackend(), max_batch=2, synthesis="thread", synthesis_workers=3,
                host_budget_bytes=budget) as eng:
        eng.preload(circuit, pk)
        eng.pause()
        futs = [eng.submit(circuit, [circuit.sample_inputs(p, 11)]) for p in range(12)]
        want = 12 if budget_partitions is None else budget_partitions
        t0 = time.time()
        while eng.status()["queue"]["ready"] < want:
            assert time.time() - t0 < 60, eng.status()
            time.sleep(0.02)
        time.sleep(0.3)  # nothing more may start: the budget is full (or every partition is done)
        st = eng.status()
        held = (st["queue"]["ready"], st["host_witness"]["bytes"] / zb)
        eng.resume()
        for f in futs:
            _verified(pk, f)
        end = eng.status()["host_witness"]
    assert end["bytes"] == 0  # every token given back
    return held, end["peak_bytes"] / zb


def test_host_budget_bounds_the_witnesses_held(cube):
    """With a budget of 3 partitions a paused engine synthesizes 3 and holds no more (peak 3 after all 12 proved
    and verified); without a budget it holds all 12."""
    assert _held_while_paused(cube, 3) == ((3, 3), 3)
    assert _held_while_paused(cube, None) == ((12, 12), 12)


def test_cancelled_job_gives_its_budget_back_at_once(cube):
    """A cancelled job's ready partitions leave the ready queue and free their budget at once: the next job's
    partition is synthesized while the engine is still paused (no batch ever formed), and it then proves."""
    circuit, r1cs, pk = cube
    with Engine(backend=HostBackend(), max_batch=2, synthesis="thread", synthesis_workers=2,
                host_budget_bytes=2 * 32 * r1cs.num_vars) as eng:
        eng.preload(circuit, pk)
        eng.pause()
        first = eng.submit(circuit, sector=1, partitions=2)
        _wait(lambda: eng.status()["queue"]["ready"] == 2)
        second = eng.submit(circuit, sector=2, partitions=1)
        time.sleep(0.3)
        assert eng.status()["queue"]["ready"] == 2  # the budget is full: the second job waits
        assert first.cancel()
        one = 32 * r1cs.num_vars
        _wait(lambda: eng.status()["queue"]["ready"] == 1 and eng.status()["host_witness"]["bytes"] == one)
        eng.resume()
        _verified(pk, second)


def _wait(cond, timeout=60):
    t0 = time.time()
    while not cond():
        assert time.time() - t0 < timeout
        time.sleep(0.02)


def test_batches_go_short_when_the_budget_cannot_fill_them(cube):
    """max_batch 4 but room for 2 partitions: once 2 are ready nothing more can come, so the batch goes (short,
    padded) at once rather than after max_wait_s (60 s here)."""
    circuit, r1cs, pk = cube
    t0 = time.perf_counter()
    with Engine(backend=HostBackend(), max_batch=4, max_wait_s=60, synthesis="thread", synthesis_workers=2,
                host_budget_bytes=2 * 32 * r1cs.num_vars) as eng:
        eng.preload(circuit, pk)
        _verified(pk, eng.submit(circuit, sector=4, partitions=6))
        hist = eng.status()["batch_sizes"]
    assert time.perf_counter() - t0 < 30
    assert sum(int(k.split("/")[0]) * n for k, n in hist.items()) == 6 and "4/4" not in hist, hist


def test_partition_larger_than_the_budget_is_refused(cube):
    circuit, r1cs, pk = cube
    with Engine(backend=HostBackend(), max_batch=2, synthesis="thread", synthesis_workers=1,
                host_budget_bytes=32 * r1cs.num_vars - 1) as eng:
        eng.preload(circuit, pk)
        with pytest.raises(BadInput, match="host budget"):
            eng.submit(circuit, sector=0, partitions=1)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="host_budget_bytes"):
            Engine(backend=HostBackend(), host_budget_bytes=bad)


def test_preload_adopts_a_placed_key(cube):
    """A key placed by the backend beforehand is used as it is (proofs verify); one made for another circuit is
    refused."""
    circuit, r1cs, pk = cube
    backend = HostBackend()
    placed = backend.place(pk, r1cs)
    with Engine(backend=backend, max_batch=2, max_wait_s=0.05, synthesis="thread", synthesis_workers=1) as eng:
        eng.preload(circuit, resident=placed)
        _verified(pk, eng.submit(circuit, sector=1, partitions=2))
        assert eng.status()["keys"]["loads"] == 0
        with pytest.raises(ValueError, match="different circuit"):
            eng.preload(base.get_circuit("porep_like", "tiny"), resident=placed)
        with pytest.raises(ValueError, match="not both"):
            eng.preload(circuit, pk, resident=placed)


def test_porep_worker_builds_its_witness_in_the_shared_file(shm, monkeypatch):
    """A porep_like partition on the batched path (>= 4 challenges) is built straight in the shared file (the
    worker keeps no private copy): the claimed limbs equal the in-band witness; a file of another size is
    refused."""
    circuit = base.get_circuit("porep_like", "mini", challenges=4, depth=3)
    n = pl.block_counts(circuit)["num_vars"]
    inband = synthesis.synthesize_partition(circuit, ("sample", 1, 5))
    path = synthesis.new_shared_file(n)

    def copied(*a, **kw):
        raise AssertionError("the witness was copied into the file, not built in it")

    with monkeypatch.context() as m:
        m.setattr(synthesis, "_write_shared", copied)
        out = synthesis.synthesize_partition(circuit, ("sample", 1, 5), out=path)
    got = synthesis.claim_shared(out)
    assert got.montgomery and inband.montgomery and (got.z == inband.z).all()
    assert got.public_inputs == inband.public_inputs
    wrong = synthesis.new_shared_file(n - 1)
    with pytest.raises(ValueError, match="porep_like witness: out must be"):
        synthesis.synthesize_partition(circuit, ("sample", 1, 5), out=wrong)
    synthesis.drop_shared(wrong)
    assert not os.listdir(shm)


def test_worker_warm_up_builds_one_challenge_not_a_partition(monkeypatch):
    """An engine warms a porep_like worker with its header and one challenge (``warm_worker``), never a whole
    partition's witness (~4 GiB per worker at sector scale)."""
    batched = base.get_circuit("porep_like", "mini", challenges=4, depth=3)
    calls = []
    monkeypatch.setattr(type(batched), "witness", lambda self, *a, **kw: calls.append("witness"))
    real = pl.synthesize_batch

    def counted(c, inputs, instances=None):
        calls.append(instances)
        return real(c, inputs, instances)

    monkeypatch.setattr(pl, "synthesize_batch", counted)
    synthesis._warm([batched])
    assert calls == [([0], [0])]


def test_synth_worker_bench_row(shm):
    """``bench --op=synth --impl=worker``: per partition, an engine worker's sample / witness / claim seconds (the
    batched porep_like path into a shared file), and nothing left in the shared directory."""
    from cuzk_jax.bench import synth as synth_bench

    circuit = base.get_circuit("porep_like", "mini", challenges=4, depth=3)
    row = synth_bench.worker(circuit, partitions=2, seed=3, warmup=1)
    assert row["impl"] == "worker" and row["partitions"] == 2 and len(row["witness_s_list"]) == 2
    assert row["num_vars"] == pl.block_counts(circuit)["num_vars"] and row["witness_s"] > 0 and row["sample_s"] > 0
    assert row["total_s"] >= row["witness_s"] and not os.listdir(shm)
    cfg = types.SimpleNamespace(impl=["bogus"], preset="mini", circuit="porep_like")
    with pytest.raises(BadInput, match="--impl takes worker, split or nothing"):
        synth_bench.run(cfg)
