"""The pipelined engine: proofs equal the sequential prover's and verify; cross-job batching; faults isolated;
cancel; shutdown never hangs; 50 queued jobs; key manager LRU; sharded over 4 host devices == unsharded.

Device proving on this CPU costs seconds per partition (the XLA MSM step machine), so device-backend tests use the
cube circuit in batches of P = 2 (the shape tests/test_groth16.py compiles too) and few partitions; the scheduling
tests with many jobs use the host backend (Python-int Groth16: real proofs, checked by arkworks and against the
device prover's proofs of the same partitions).
"""

import concurrent.futures as cf
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import threading
import time
import types

import jax
import numpy as np
import pytest

from cuzk_jax.circuits import base
from cuzk_jax.circuits.cs import Unsatisfied
from cuzk_jax.engine import Engine, EngineConfig, EngineShutdown, HostBackend, KeyManager
from cuzk_jax.engine import timeline as tl
from cuzk_jax.groth16 import generator, prover, verifier
from cuzk_jax.groth16.data_structures import Proof

P = 2  # device batch size in these tests (one compiled shape, shared with test_groth16)
SEED = 7


@pytest.fixture(scope="session")
def sequential(cube_key):
    """Four partitions proved by prover.prove (two batches of P) with fixed test randomness."""
    circuit, r1cs, pk = cube_key
    inputs = [circuit.sample_inputs(p, SEED) for p in range(4)]
    rs = prover.insecure_randomness_for_tests(3, 4)
    ws = [circuit.witness(x) for x in inputs]
    proofs = []
    for k in range(0, 4, P):
        proofs += prover.prove(pk, r1cs, ws[k:k + P], randomness=rs[k:k + P])[0]
    publics = [circuit.public_inputs(x) for x in inputs]
    return dict(inputs=inputs, rs=rs, proofs=proofs, publics=publics)


def wait_ready(engine, n, timeout=120):
    t0 = time.time()
    while engine.status()["queue"]["ready"] < n:
        assert time.time() - t0 < timeout, engine.status()
        time.sleep(0.02)


def same(p: Proof, q: Proof) -> bool:
    return (p.a, p.b, p.c) == (q.a, q.b, q.c)


# ---------------------------------------------------------------------------------------------------------------
# Device backend
# ---------------------------------------------------------------------------------------------------------------


def test_engine_equals_sequential_and_batches_across_jobs(cube_key, sequential):
    circuit, r1cs, pk = cube_key
    with Engine(max_batch=P, max_wait_s=30, synthesis="thread", synthesis_workers=2) as eng:
        eng.preload(circuit, pk)
        eng.pause()
        futs = [eng.submit(circuit, [x], randomness=[rs]) for x, rs in zip(sequential["inputs"], sequential["rs"])]
        wait_ready(eng, 4)
        eng.resume()
        results = [f.result(timeout=900) for f in futs]
        st = eng.status()
        events = eng.events()
    for res, expected, pub in zip(results, sequential["proofs"], sequential["publics"]):
        assert len(res.proofs) == 1 and same(res.proofs[0], expected)
        assert res.public_inputs == [pub]
        assert verifier.verify(pk.vk, pub, res.proofs[0])
        assert res.timings.total > 0 and res.timings.phases["msm_b2"] > 0
    # negative twin: a proof does not verify for another job's public input
    assert not verifier.verify(pk.vk, sequential["publics"][1], results[0].proofs[0])
    # four single-partition jobs -> two full batches of two (cross-job batching), no padding, key loaded once
    assert st["batch_sizes"] == {f"{P}/{P}": 2} and st["padded_slots"] == 0
    assert st["jobs"]["done"] == 4 and st["proofs"] == 4 and st["proofs_per_minute"] > 0
    assert st["keys"]["loads"] == 0 and st["keys"]["hits"] == 2
    lanes = {e.lane for e in events}
    names = {e.name for e in events}
    assert {"collector", "device", "finish"} <= lanes
    assert {"synthesis", "stage", "evaluate", "h", "msm_a", "msm_b2", "fetch", "finish"} <= names


def test_faults_are_isolated(cube_key, sequential):
    """Synthesis that raises and an unsatisfied witness fail their own jobs; batch-mates complete."""
    circuit, r1cs, pk = cube_key
    ins, rs = sequential["inputs"], sequential["rs"]
    bad_witness = {"x": 3, "y": 36}  # 3^3 + 3 + 5 = 35
    # sync_phases=False: one block per batch (the "device" event) -- same compiled programs, same proofs
    with Engine(max_batch=P, max_wait_s=30, synthesis="thread", synthesis_workers=2, sync_phases=False) as eng:
        eng.preload(circuit, pk)
        eng.pause()
        good_a = eng.submit(circuit, [ins[0]], randomness=[rs[0]])
        raises = eng.submit(circuit, [{"x": 3}])  # no "y": synthesis raises KeyError
        unsat = eng.submit(circuit, [ins[2], bad_witness], randomness=rs[2:4])
        good_b = eng.submit(circuit, [ins[1]], randomness=[rs[1]])
        wait_ready(eng, 4)
        eng.resume()
        a, b = good_a.result(timeout=900), good_b.result(timeout=900)
        with pytest.raises(KeyError):
            raises.result(timeout=60)
        with pytest.raises(Unsatisfied) as info:
            unsat.result(timeout=900)
        st = eng.status()
        names = {e.name for e in eng.events() if e.lane == "device"}
    assert names == {"device", "fetch"}
    assert info.value.partition == 1 and "x^3 + x + 5 = y" in info.value.name
    assert same(a.proofs[0], sequential["proofs"][0]) and same(b.proofs[0], sequential["proofs"][1])
    assert st["jobs"]["failed"] == 2 and st["jobs"]["done"] == 2


# ---------------------------------------------------------------------------------------------------------------
# Host backend: scheduling at scale
# ---------------------------------------------------------------------------------------------------------------


def test_fifty_queued_jobs_all_return(cube_key, sequential):
    """50 single-partition jobs through a process pool; the first four are the sequential fixture's partitions."""
    circuit, r1cs, pk = cube_key
    inputs = sequential["inputs"] + [circuit.sample_inputs(p, SEED + 1) for p in range(46)]
    rs = sequential["rs"] + prover.insecure_randomness_for_tests(4, 46)
    with Engine(backend=HostBackend(), max_batch=8, batch_sizes=(4, 8), max_wait_s=0.05, synthesis="process",
                synthesis_workers=2) as eng:
        eng.preload(circuit, pk)
        eng.warm_up([circuit])
        futs = [eng.submit(circuit, [x], randomness=[r]) for x, r in zip(inputs, rs)]
        done, not_done = cf.wait(futs, timeout=900)
        assert not not_done
        results = [f.result() for f in futs]
        st = eng.status()
    assert [r.job_id for r in results] == [f.job_id for f in futs]
    assert st["jobs"]["done"] == 50 and st["proofs"] == 50 and st["queue"]["ready"] == 0
    publics = [circuit.public_inputs(x) for x in inputs]
    proofs = [r.proofs[0] for r in results]
    assert all(r.public_inputs == [p] for r, p in zip(results, publics))
    for k in range(4):  # host backend == device prover, bit for bit
        assert same(proofs[k], sequential["proofs"][k])
    assert verifier.verify_batch(pk.vk, publics, proofs)
    assert not verifier.verify_batch(pk.vk, publics[1:] + publics[:1], proofs)  # negative twin
    assert sum(int(k.split("/")[0]) for k in st["batch_sizes"] for _ in range(st["batch_sizes"][k])) == 50


def test_cancel_and_shutdown_never_hang(cube_key):
    circuit, r1cs, pk = cube_key
    eng = Engine(backend=HostBackend(), max_batch=2, max_wait_s=0.05, synthesis="thread", synthesis_workers=1)
    eng.preload(circuit, pk)
    eng.pause()
    futs = [eng.submit(circuit, [circuit.sample_inputs(p, 9)]) for p in range(3)]
    wait_ready(eng, 3)
    assert futs[1].cancel()
    assert eng.cancel(futs[2].job_id)
    eng.resume()
    assert len(futs[0].result(timeout=300).proofs) == 1
    for f in futs[1:]:
        with pytest.raises(cf.CancelledError):
            f.result(timeout=10)
    assert not futs[0].cancel()  # completed jobs cannot be cancelled
    st = eng.status()
    assert st["jobs"]["cancelled"] == 2 and st["jobs"]["done"] == 1 and st["queue"]["ready"] == 0
    # jobs still queued at shutdown(wait=False) fail with EngineShutdown; every thread stops
    eng.pause()
    pending = [eng.submit(circuit, [circuit.sample_inputs(p, 10)]) for p in range(2)]
    t0 = time.time()
    eng.shutdown(wait=False)
    assert time.time() - t0 < 30
    for f in pending:
        with pytest.raises(EngineShutdown):
            f.result(timeout=10)
    assert not any(t.is_alive() for t in eng.threads)
    with pytest.raises(RuntimeError):
        eng.submit(circuit, [circuit.sample_inputs(0, 0)])


def test_key_loaded_once_evicted_and_reloaded(cube_key):
    circuit, r1cs, pk = cube_key
    calls = []

    def loader(c, r):
        calls.append(c.name)
        return pk

    with Engine(backend=HostBackend(), key_loader=loader, max_batch=1, synthesis="thread",
                synthesis_workers=1) as eng:
        for p in range(3):
            eng.submit(circuit, [circuit.sample_inputs(p, 11)]).result(timeout=300)
        assert calls == ["cube"]  # no reload between proofs
        assert eng.evict(circuit) and not eng.evict(circuit)
        eng.submit(circuit, [circuit.sample_inputs(0, 12)]).result(timeout=300)
        st = eng.status()
    assert calls == ["cube", "cube"] and st["keys"]["loads"] == 2 and st["keys"]["hits"] == 2


def test_missing_key_fails_its_jobs_only(cube_key):
    circuit, r1cs, pk = cube_key
    other = base.get_circuit("porep_like", "tiny")
    with Engine(backend=HostBackend(), max_batch=2, synthesis="thread", synthesis_workers=1) as eng:
        eng.preload(circuit, pk)
        f_other = eng.submit(other, sector=0, partitions=1)
        f_cube = eng.submit(circuit, [circuit.sample_inputs(0, 13)])
        with pytest.raises(KeyError, match="no proving key"):
            f_other.result(timeout=300)
        assert verifier.verify(pk.vk, f_cube.result(timeout=300).public_inputs[0], f_cube.result().proofs[0])
        # pre-synthesized witnesses: accepted for the right circuit, refused (ValueError) for another shape
        w = circuit.witness(circuit.sample_inputs(1, 13))
        res = eng.submit(circuit, witnesses=[w]).result(timeout=300)
        assert res.public_inputs == [w.public_inputs] and verifier.verify(pk.vk, w.public_inputs, res.proofs[0])
        w_other = other.witness(other.sample_inputs(0, 0))
        with pytest.raises(ValueError, match="does not match the R1CS"):
            eng.submit(circuit, witnesses=[w_other]).result(timeout=60)


# ---------------------------------------------------------------------------------------------------------------
# Key manager (pure logic)
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class FakeKey:
    circuit_digest: str
    size: int


def test_key_manager_lru_by_bytes():
    loads = []

    def loader(circuit, r1cs):
        loads.append(circuit)
        time.sleep(0.05)  # concurrent requests must still load once
        return FakeKey(circuit, {"a": 40, "b": 50, "c": 30, "huge": 500}[circuit])

    headrooms = {}

    def place(pk, r1cs, headroom):  # the budget left beside the other resident keys (window tables must fit it)
        headrooms[pk.circuit_digest] = headroom
        return pk

    km = KeyManager(place=place, size=lambda res: res.size, loader=loader, budget_bytes=100)
    threads = [threading.Thread(target=km.get, args=("a", "a")) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == ["a"] and km.stats.hits == 3
    km.get("b", "b")
    assert list(km.resident()) == ["a", "b"] and km.resident_bytes() == 90
    assert headrooms == {"a": 100, "b": 60}
    km.get("a", "a")  # a becomes most recently used
    km.get("c", "c")  # 120 > 100: evict the LRU (b)
    assert headrooms["c"] == 10
    assert list(km.resident()) == ["a", "c"] and km.stats.evictions == 1
    km.get("huge", "huge")  # larger than the budget: admitted alone
    assert list(km.resident()) == ["huge"]
    assert km.evict("huge") and not km.evict("huge") and km.resident() == {}
    with pytest.raises(ValueError):
        KeyManager(place=None, size=None, budget_bytes=0)
    bad = KeyManager(place=lambda pk, r, h: pk, size=lambda r: 1, loader=lambda c, r: FakeKey("zzz", 1))
    with pytest.raises(ValueError, match="another circuit"):
        bad.get("a", "a")
    with pytest.raises(KeyError):
        KeyManager(place=lambda pk, r, h: pk, size=lambda r: 1).get("a", "a")


# ---------------------------------------------------------------------------------------------------------------
# Validation, timeline plot
# ---------------------------------------------------------------------------------------------------------------


def test_bad_arguments_are_value_errors(cube_key):
    circuit, r1cs, pk = cube_key
    for kw in (dict(max_batch=0), dict(batch_sizes=(0,)), dict(max_wait_s=-1), dict(prefetch=-1)):
        with pytest.raises(ValueError):
            EngineConfig(**kw).sizes(1)
    assert EngineConfig(max_batch=3, batch_sizes=(2, 3)).sizes(4) == (4,)
    with pytest.raises(ValueError):
        Engine(backend=HostBackend(), synthesis="fork")
    with Engine(backend=HostBackend(), synthesis="thread", synthesis_workers=1) as eng:
        with pytest.raises(ValueError, match="exactly one"):
            eng.submit(circuit)
        with pytest.raises(ValueError, match="at least one"):
            eng.submit(circuit, [])
        with pytest.raises(ValueError, match="pairs"):
            eng.submit(circuit, [circuit.sample_inputs(0)], randomness=[(1, 2), (3, 4)])
        with pytest.raises(ValueError, match="Circuit"):
            eng.submit("cube", [{}])
        with pytest.raises(ValueError, match="partitions"):
            eng.submit(circuit, sector=0, partitions=0)


def test_timeline_plot(tmp_path):
    pytest.importorskip("matplotlib")
    t = tl.Timeline(t0=100.0)
    t.add("synth_0", "synthesis", 100.0, 100.5, job=0)
    t.add("collector", "stage", 100.5, 100.6, batch=0)
    t.add("device", "msm_a", 100.6, 101.5, batch=0)
    t.add("finish", "finish", 101.5, 101.7, batch=0)
    evs = t.events()
    assert [e.lane for e in evs] == ["synth_0", "collector", "device", "finish"] and evs[0].end == 0.5
    path = tl.plot([("sequential", evs), ("engine", [e.as_dict() for e in evs])], str(tmp_path / "t.png"), "test")
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def _forms(cube_key, sequential):
    """The four sequential witnesses as Python ints and as Montgomery PackedWitness objects."""
    from cuzk_jax.circuits.r1cs import PackedWitness

    circuit, r1cs, pk = cube_key
    ws = [circuit.witness(x) for x in sequential["inputs"]]
    packed = [PackedWitness(w.z_limbs(montgomery=True), len(w.inputs), w.num_constraints) for w in ws]
    return ws, packed


def test_synthesis_gives_canonical_z_for_int_witnesses(cube_key, sequential):
    """Python-int witnesses leave synthesis as canonical limbs (montgomery=False: no host Montgomery multiply), a
    Montgomery PackedWitness as a copy of its limbs (montgomery=True); convert_z goes either way on the host; a
    batch of mixed forms is stacked in the majority's form (canonical on a tie), the same limbs as stack_z."""
    from cuzk_jax.circuits.r1cs import stack_z
    from cuzk_jax.engine import synthesis
    from cuzk_jax.engine.core import _Slot, _stack_slots

    circuit, r1cs, pk = cube_key
    ws, packed = _forms(cube_key, sequential)
    outs = [synthesis.synthesize_partition(circuit, ("inputs", x)) for x in sequential["inputs"]]
    for o, w in zip(outs, ws):
        assert o.montgomery is False and np.array_equal(o.z, w.z_limbs(montgomery=False))
        assert np.array_equal(synthesis.convert_z(o.z, montgomery=False), w.z_limbs(montgomery=True))
    po = synthesis.synthesize_partition(circuit, ("witness", packed[0]))
    assert po.montgomery is True and np.array_equal(po.z, packed[0].limbs) and po.z is not packed[0].limbs
    assert np.array_equal(synthesis.convert_z(po.z, montgomery=True), ws[0].z_limbs(montgomery=False))
    assert po.public_inputs == outs[0].public_inputs == sequential["publics"][0]
    canon = [_Slot(None, i, outs[i].z, 0.0, False) for i in range(4)]
    mont = [_Slot(None, i, packed[i].limbs, 0.0, True) for i in range(4)]
    z, m = _stack_slots([canon[0], mont[1]], 3)  # a tie: canonical, the packed one converted on the host
    assert m is False and np.array_equal(z, stack_z([ws[0], ws[1], ws[0]], montgomery=False))
    z, m = _stack_slots([canon[0], mont[1], mont[2]], 4)  # Montgomery majority
    assert m is True and np.array_equal(z, stack_z([ws[0], ws[1], ws[2], ws[0]], montgomery=True))
    z, m = _stack_slots(mont[:2], 2)  # all packed: a plain stack of the limbs
    assert m is True and np.array_equal(z, stack_z(packed[:2], montgomery=True))


def test_engine_stages_canonical_batches_on_the_device(cube_key, sequential):
    """The device backend's staged array of a canonical batch (stage(montgomery=False): one device to_mont) equals
    the staged Montgomery batch bit for bit; engine batches of Python-int, mixed and packed witnesses give the
    sequential proofs, which verify."""
    from cuzk_jax.circuits.r1cs import stack_z
    from cuzk_jax.engine import DeviceBackend

    circuit, r1cs, pk = cube_key
    ws, packed = _forms(cube_key, sequential)
    backend = DeviceBackend()
    rk = backend.place(pk, r1cs)
    canon, mont = stack_z(ws[:P], montgomery=False), stack_z(ws[:P], montgomery=True)
    assert not np.array_equal(canon, mont)
    assert np.array_equal(np.asarray(backend.stage(rk, canon, montgomery=False)), np.asarray(backend.stage(rk, mont)))
    # batch 1: a Python-int witness and a packed one (a tie: staged canonical); batch 2: two packed (Montgomery)
    given = [ws[0], packed[1], packed[2], packed[3]]
    results, status = _prove_paused(Engine(backend=backend, max_batch=P, max_wait_s=30, synthesis="thread",
                                           synthesis_workers=2), circuit, pk, given, sequential["rs"])
    assert status["batch_sizes"] == {f"{P}/{P}": 2}
    for res, expected, pub in zip(results, sequential["proofs"], sequential["publics"]):
        assert same(res.proofs[0], expected) and res.public_inputs == [pub] and res.verified
        assert verifier.verify(pk.vk, pub, res.proofs[0])


def _prove_paused(engine, circuit, pk, witnesses, randomness):
    """Submit one job per witness to a paused ``engine`` (so they batch together), resume, and return the results
    and the engine's final status."""
    with engine as eng:
        eng.preload(circuit, pk)
        eng.pause()
        futs = [eng.submit(circuit, witnesses=[w], randomness=[rs]) for w, rs in zip(witnesses, randomness)]
        wait_ready(eng, len(futs))
        eng.resume()
        return [f.result(timeout=900) for f in futs], eng.status()


def test_oversized_canonical_batch_runs_in_planned_steps(cube_key, sequential):
    """A canonical batch larger than the key's plan allows stays on the host in its form (the _HostBatch carries
    the flag) and every sub-batch is converted on the device: the sequential proofs."""
    from cuzk_jax.circuits.r1cs import stack_z
    from cuzk_jax.engine import DeviceBackend
    from cuzk_jax.engine.backends import _HostBatch
    from cuzk_jax.groth16 import pipeline
    from cuzk_jax.groth16 import plan as memplan

    circuit, r1cs, pk = cube_key
    ws, _ = _forms(cube_key, sequential)
    free = pipeline.make_resident(pk, r1cs, "msm=xla,tables=off")
    # the plan's own peak of a batch of P, plus one byte
    budget = memplan.make_plan(free.plan.shape, 10, device_budget=None, max_batch=P).peak + 1
    backend = DeviceBackend(config=f"msm=xla,tables=off,device_budget={budget}")
    rk = backend.place(pk, r1cs)
    assert rk.plan.batch == P
    staged = backend.stage(rk, stack_z(ws, montgomery=False), montgomery=False)
    assert isinstance(staged, _HostBatch) and staged.montgomery is False
    out = backend.run(rk, staged, lambda name, fn: fn())
    got = [backend.finish(rk, out, i, r, s) for i, (r, s) in enumerate(sequential["rs"])]
    assert all(same(p, q) for p, q in zip(got, sequential["proofs"]))


class _MontgomeryOnlyHost(HostBackend):
    """A backend whose ``stage(resident, z)`` takes no form flag (Montgomery limbs only)."""

    def stage(self, resident, z):
        return super().stage(resident, z, montgomery=True)


def test_host_backend_decodes_both_forms(cube_key, sequential):
    """The host backend decodes canonical and Montgomery batches to the same values; engine proofs of Python-int,
    packed and mixed batches (and through a backend whose stage takes Montgomery limbs only) equal the sequential
    ones and verify."""
    from cuzk_jax.circuits.r1cs import stack_z

    circuit, r1cs, pk = cube_key
    ws, packed = _forms(cube_key, sequential)
    host = HostBackend()
    want = [w.z for w in ws]
    assert host.stage(None, stack_z(ws, montgomery=False), montgomery=False) == want
    assert host.stage(None, stack_z(ws, montgomery=True)) == want
    for backend, given in ((HostBackend(), [ws[0], packed[1], packed[2], ws[3]]),
                           (_MontgomeryOnlyHost(), [ws[0], ws[1], packed[2], ws[3]])):
        results, _ = _prove_paused(Engine(backend=backend, max_batch=4, max_wait_s=30, synthesis="thread",
                                          synthesis_workers=1), circuit, pk, given, sequential["rs"])
        for res, expected, pub in zip(results, sequential["proofs"], sequential["publics"]):
            assert same(res.proofs[0], expected) and res.verified
            assert verifier.verify(pk.vk, pub, res.proofs[0])


# ---------------------------------------------------------------------------------------------------------------
# Several devices: 4 host devices in a subprocess
# ---------------------------------------------------------------------------------------------------------------

_CHILD = r"""
import json, pickle, sys, time
import jax
jax.config.update("jax_compilation_cache_dir", sys.argv[2])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
from cuzk_jax.engine import DeviceBackend, Engine
with open(sys.argv[1], "rb") as fh:
    d = pickle.load(fh)
pk = jax.tree_util.tree_map(jax.numpy.asarray, d["pk"])
backend = DeviceBackend(jax.devices())
with Engine(backend=backend, max_batch=4, max_wait_s=60, synthesis="thread", synthesis_workers=2) as eng:
    eng.preload(d["circuit"], pk)
    eng.pause()
    futs = [eng.submit(d["circuit"], [x], randomness=[r]) for x, r in zip(d["inputs"], d["rs"])]
    while eng.status()["queue"]["ready"] < len(futs):
        time.sleep(0.02)
    eng.resume()
    res = [f.result(timeout=1800) for f in futs]
    st = eng.status()
# one engine on a single device that is not the default one: the key and every batch live there
one = DeviceBackend([jax.devices()[1]])
with Engine(backend=one, max_batch=4, max_wait_s=60, synthesis="thread", synthesis_workers=2) as eng:
    eng.preload(d["circuit"], pk)
    rk = eng.keys.get(next(iter(eng.keys.resident())))
    placed = sorted({str(dev) for dev in rk.queries["msm_a"].x.devices()})
    res1 = [f.result(timeout=1800) for f in [eng.submit(d["circuit"], [x], randomness=[r])
                                             for x, r in zip(d["inputs"], d["rs"])]]
print(json.dumps({"devices": len(jax.devices()), "mesh": backend.mesh.shape["p"],
                  "batch_sizes": st["batch_sizes"], "proofs": [r.proofs[0].to_bytes().hex() for r in res],
                  "one_device": placed, "target": str(jax.devices()[1]),
                  "proofs_one": [r.proofs[0].to_bytes().hex() for r in res1]}))
"""


def test_sharded_over_four_host_devices_equals_unsharded(cube_key, sequential, tmp_path):
    circuit, r1cs, pk = cube_key
    host_pk = jax.tree_util.tree_map(np.asarray, pk)
    host_pk = dataclasses.replace(host_pk, vk=dataclasses.replace(pk.vk))  # drop cached arkworks objects
    with open(tmp_path / "job.pkl", "wb") as fh:
        pickle.dump({"pk": host_pk, "circuit": circuit, "inputs": sequential["inputs"], "rs": sequential["rs"]}, fh)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    cache = jax.config.jax_compilation_cache_dir or ""
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "job.pkl"), cache], env=env,
                         capture_output=True, text=True, timeout=2400)
    assert out.returncode == 0, out.stderr[-4000:]
    d = json.loads(out.stdout.strip().splitlines()[-1])
    assert d["devices"] == 4 and d["mesh"] == 4 and d["batch_sizes"] == {"4/4": 1}
    proofs = [Proof.from_bytes(bytes.fromhex(h)) for h in d["proofs"]]
    assert all(same(p, q) for p, q in zip(proofs, sequential["proofs"]))
    assert d["one_device"] == [d["target"]]  # a single non-default device: the resident key lives there
    assert d["proofs_one"] == d["proofs"]
    assert verifier.verify_batch(pk.vk, sequential["publics"], proofs)


# ---------------------------------------------------------------------------------------------------------------
# Reliability (issue 21): the futures contract, prompt shutdown, dead workers, verify before return
# ---------------------------------------------------------------------------------------------------------------


def _shutdown_within(eng, seconds, **kw):
    t = threading.Thread(target=eng.shutdown, kwargs=kw, daemon=True)
    t0 = time.time()
    t.start()
    t.join(timeout=seconds)
    assert not t.is_alive(), f"shutdown({kw}) still running after {seconds} s"
    return time.time() - t0


def test_cancelled_futures_follow_the_futures_contract(cube_key):
    """A cancelled ProofFuture is cancelled() and done(), and wait / as_completed report it (waiters woken)."""
    circuit, r1cs, pk = cube_key
    eng = Engine(backend=HostBackend(), max_batch=2, max_wait_s=0.05, synthesis="thread", synthesis_workers=1)
    try:
        eng.preload(circuit, pk)
        eng.pause()
        futs = [eng.submit(circuit, [circuit.sample_inputs(p, 21)]) for p in range(3)]
        waiter = {}

        def wait_in_thread():  # a waiter installed before the cancel must be woken by it
            waiter["done"] = cf.wait([futs[0]], timeout=30).done

        t = threading.Thread(target=wait_in_thread)
        t.start()
        time.sleep(0.1)
        assert futs[0].cancel() and futs[0].cancel()  # cancelling twice is harmless
        t.join(timeout=30)
        assert waiter["done"] == {futs[0]}
        assert futs[0].cancelled() and futs[0].done()
        assert eng.cancel(futs[1].job_id)
        done, not_done = cf.wait(futs[:2], timeout=5)
        assert done == set(futs[:2]) and not not_done
        assert set(cf.as_completed(futs[:2], timeout=5)) == set(futs[:2])
        eng.resume()
        assert len(futs[2].result(timeout=120).proofs) == 1
    finally:
        _shutdown_within(eng, 60, wait=False)


def test_shutdown_cancel_pending_returns_promptly(cube_key):
    circuit, r1cs, pk = cube_key
    eng = Engine(backend=HostBackend(), max_batch=2, max_wait_s=0.05, synthesis="thread", synthesis_workers=1)
    eng.preload(circuit, pk)
    eng.pause()  # the jobs stay queued: shutdown must cancel them, not wait for them
    futs = [eng.submit(circuit, [circuit.sample_inputs(p, 22)]) for p in range(3)]
    wait_ready(eng, 3)
    assert _shutdown_within(eng, 60, cancel_pending=True) < 60
    assert all(f.cancelled() and f.done() for f in futs)
    assert not any(t.is_alive() for t in eng.threads)
    assert eng.status()["jobs"]["cancelled"] == 3
    # and as a context manager leaving on an exception (shutdown(wait=False, cancel_pending=True))
    with pytest.raises(ZeroDivisionError):
        with Engine(backend=HostBackend(), max_batch=2, synthesis="thread", synthesis_workers=1) as eng2:
            eng2.preload(circuit, pk)
            eng2.pause()
            f = eng2.submit(circuit, [circuit.sample_inputs(0, 22)])
            1 / 0
    assert f.cancelled() and cf.wait([f], timeout=5).done == {f}


def test_dead_synthesis_worker_is_replaced_and_its_job_retried_once(cube_key, tmp_path):
    """A worker process that exits (as if OOM-killed) breaks its pool: the engine replaces the pool, retries the
    job's partitions once (the job then proves), fails a job that kills its worker again with WorkerDied naming
    it, and keeps proving later jobs."""
    from cuzk_jax.engine import WorkerDied
    from cuzk_jax.engine.faults import FaultyCube

    circuit, r1cs, pk = cube_key
    faulty = FaultyCube()
    marker = tmp_path / "exited-once"
    with Engine(backend=HostBackend(), max_batch=2, max_wait_s=0.05, synthesis="process",
                synthesis_workers=1) as eng:
        eng.preload(circuit, pk)
        once = eng.submit(faulty, [dict(circuit.sample_inputs(1, 23), fault=("exit_once", str(marker)))])
        res = once.result(timeout=180)
        assert marker.exists() and res.verified
        assert verifier.verify(pk.vk, res.public_inputs[0], res.proofs[0])
        assert eng.status()["synthesis"]["pool_restarts"] == 1
        # a partition that kills its worker every time, queued with bystanders: it alone fails
        eng.pause()
        always = eng.submit(faulty, [dict(circuit.sample_inputs(2, 23), fault=("exit", None))])
        bystanders = [eng.submit(circuit, [circuit.sample_inputs(p, 23)]) for p in range(3, 7)]
        eng.resume()
        with pytest.raises(WorkerDied, match=f"job {always.job_id}: partition 0: its synthesis worker process died"):
            always.result(timeout=180)
        for f in bystanders:
            res = f.result(timeout=180)
            assert res.verified and verifier.verify(pk.vk, res.public_inputs[0], res.proofs[0])
        later = eng.submit(circuit, [circuit.sample_inputs(7, 23)]).result(timeout=180)
        assert verifier.verify(pk.vk, later.public_inputs[0], later.proofs[0])
        st = eng.status()
    assert st["synthesis"]["pool_restarts"] == 3 and st["jobs"]["done"] == 6 and st["jobs"]["failed"] == 1


class _TamperingBackend(HostBackend):
    """The host backend, but the partition proved with randomness ``r == bad_r`` gets A and C swapped (valid curve
    points, an invalid proof): what a prover bug would return."""

    def __init__(self, bad_r):
        self.bad_r = bad_r

    def finish(self, resident, out, i, r, s):
        proof = super().finish(resident, out, i, r, s)
        return Proof(proof.c, proof.b, proof.a) if r == self.bad_r else proof


def test_invalid_proof_is_never_returned(cube_key):
    """verify (default on): a job whose proof does not verify fails with ProofRejected naming the partition; its
    batch-mate completes verified; verify=False (benchmarks) returns what the prover made, unchecked."""
    from cuzk_jax.errors import ProofRejected

    circuit, r1cs, pk = cube_key
    assert EngineConfig().verify is True
    rs = prover.insecure_randomness_for_tests(5, 3)
    inputs = [circuit.sample_inputs(p, 24) for p in range(3)]
    with Engine(backend=_TamperingBackend(rs[1][0]), max_batch=4, max_wait_s=30, synthesis="thread",
                synthesis_workers=1) as eng:
        eng.preload(circuit, pk)
        eng.pause()
        bad = eng.submit(circuit, inputs[:2], randomness=rs[:2])
        good = eng.submit(circuit, inputs[2:], randomness=rs[2:])
        wait_ready(eng, 3)
        eng.resume()
        with pytest.raises(ProofRejected, match=f"job {bad.job_id}: the proof of partition 1 does not verify") as e:
            bad.result(timeout=120)
        assert e.value.partitions == [1] and e.value.exit_code == 1
        res = good.result(timeout=120)
        assert res.verified is True and res.timings.phases["verify"] > 0
    with Engine(backend=_TamperingBackend(rs[1][0]), verify=False, max_batch=2, synthesis="thread",
                synthesis_workers=1) as eng:
        eng.preload(circuit, pk)
        res = eng.submit(circuit, inputs[:2], randomness=rs[:2]).result(timeout=120)
    assert res.verified is None and not verifier.verify(pk.vk, res.public_inputs[1], res.proofs[1])


def test_soak_with_fault_injection_loses_nothing():
    """bench --op=soak in small: killed workers, cancelled jobs and unsatisfied witnesses (seeded); every job ends
    done, cancelled or failed with a project error; no job lost; every returned proof verifies."""
    from cuzk_jax.bench import soak

    row = soak.soak(24, backend="host", max_batch=4, max_partitions=2,
                    faults="kill=0.15,crash=0.1,cancel=0.15,unsat=0.15", seed=3, workers=1, max_wait_s=0.05)
    assert all(row["faults_injected"][k] > 0 for k in soak.FAULT_KINDS), row
    assert row["ok"] and row["jobs_lost"] == 0 and row["invalid_proofs_returned"] == 0, row
    assert row["jobs_done"] + row["jobs_cancelled"] + row["jobs_failed"] == row["jobs_submitted"]
    assert row["proofs_verified"] == row["proofs_returned"] > 0 and row["pool_restarts"] >= 1
    assert 0 < row["failed_by_cause"].get("Unsatisfied", 0) <= row["faults_injected"]["unsat"]
    assert set(row["failed_by_cause"]) <= {"Unsatisfied", "WorkerDied"} and not row["unexpected_failures"], row
    assert row["failed_by_cause"].get("WorkerDied", 0) <= row["faults_injected"]["crash"]  # no bystander fails
    with pytest.raises(ValueError, match="soak_faults"):
        soak.parse_faults("kill=2")


def test_submit_refuses_inputs_outside_the_field(cube_key):
    """Inputs >= r (reduced inside the circuit but reported unreduced), floats and bools are refused at submit with
    one BadInput naming the partition and the input; nothing is queued."""
    from cuzk_jax.engine import Engine, HostBackend
    from cuzk_jax.errors import BadInput
    from cuzk_jax.reference.constants import R

    circuit, r1cs, pk = cube_key
    good = circuit.sample_inputs(0)
    key = next(k for k, v in good.items() if isinstance(v, int))
    with Engine(backend=HostBackend(), max_batch=2, synthesis="thread", synthesis_workers=1) as eng:
        for bad, what in ((R + 3, "not in \\[0, r\\)"), (3.0, "not a field element"), (True, "not a field element"),
                          (-1, "not in \\[0, r\\)")):
            with pytest.raises(BadInput, match=f"partition 1 input {key}: .*{what}"):
                eng.submit(circuit, [good, {**good, key: bad}])
        assert eng.status()["queue"]["ready"] == 0
        w = circuit.witness(good)
        w_bad = dataclasses.replace(w, inputs=[w.inputs[0]] + [R + 1] + list(w.inputs[2:]))
        with pytest.raises(BadInput, match="partition 0 witness inputs\\[1\\]"):
            eng.submit(circuit, witnesses=[w_bad])


# ---------------------------------------------------------------------------------------------------------------
# Priorities and batches that fill (issue 23 item 2, issue 19 item 6)
# ---------------------------------------------------------------------------------------------------------------


def _completion_order(cube_key, delays, last_priority):
    """Six queued PoRep-class jobs, then one job of ``last_priority``, all ready before the collector runs (pause);
    returns the job ids in completion order and the last job's id."""
    circuit, r1cs, pk = cube_key
    order, lock = [], threading.Lock()
    with Engine(backend=HostBackend(), max_batch=2, max_wait_s=30, synthesis="thread", synthesis_workers=1,
                priority_delays_s=delays, prefetch=0) as eng:
        eng.preload(circuit, pk)
        eng.pause()
        futs = [eng.submit(circuit, [circuit.sample_inputs(k, 31)], priority="porep") for k in range(6)]
        futs.append(eng.submit(circuit, [circuit.sample_inputs(6, 31)], priority=last_priority))
        wait_ready(eng, 7)
        assert eng.status()["classes"][last_priority]["partitions_queued"] >= 1
        for f in futs:
            f.add_done_callback(lambda f: (lock.acquire(), order.append(f.job_id), lock.release()))
        eng.resume()
        for f in futs:
            res = f.result(timeout=120)
            assert res.verified and verifier.verify(pk.vk, res.public_inputs[0], res.proofs[0])
    return order, futs[-1].job_id


def test_urgent_class_overtakes_queued_bulk_work(cube_key):
    """A WinningPoSt-class job submitted after six queued PoRep jobs is in the first batch; its negative twin (the
    same job as PoRep class) is in the last. With every class's delay 0 (aging: the key is the submission time)
    the WinningPoSt job waits its turn: the delays decide, not the class name."""
    order, last = _completion_order(cube_key, None, "winning_post")
    assert last in order[:2], order
    order, last = _completion_order(cube_key, None, "porep")
    assert last in order[-1:], order
    order, last = _completion_order(cube_key, {c: 0 for c in ("winning_post", "porep")}, "winning_post")
    assert last in order[-1:], order


def test_priority_arguments_are_checked(cube_key):
    from cuzk_jax.errors import BadInput

    circuit, r1cs, pk = cube_key
    for bad in ({"urgent": 1}, {"porep": -1}, {"porep": float("inf")}, {"porep": True}):
        with pytest.raises(ValueError, match="priority"):
            Engine(backend=HostBackend(), synthesis="thread", synthesis_workers=1, priority_delays_s=bad)
    with pytest.raises(ValueError, match="fill"):
        Engine(backend=HostBackend(), synthesis="thread", synthesis_workers=1, fill="soon")
    with Engine(backend=HostBackend(), max_batch=2, synthesis="thread", synthesis_workers=1) as eng:
        with pytest.raises(BadInput, match="unknown priority class 'urgent'"):
            eng.submit(circuit, [circuit.sample_inputs(0)], priority="urgent")
        assert eng.status()["jobs"]["submitted"] == 0


class _SleepyHost(HostBackend):
    """The host backend with a fixed extra device time per batch (a device-bound engine at test scale)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def run(self, resident, z, phase):
        time.sleep(self.seconds)
        return super().run(resident, z, phase)


def _slow_cube(seconds):
    cls = type(base.get_circuit("cube"))

    class SlowCube(cls):
        """cube whose sample inputs take ``seconds`` (time.sleep releases the GIL: thread workers overlap)."""

        def sample_inputs(self, partition=0, seed=0):
            time.sleep(seconds)
            return super().sample_inputs(partition, seed)

    return SlowCube()


def _fed_run(cube_key, fill):
    """12 partitions (6 jobs of 2) synthesized by one worker at 0.3 s each (a batch of 4 fills in 0.9 s from its
    first ready partition, longer than the 0.5 s default wait) on a device taking 0.6 s per batch: the batch-size
    histogram and the padded slots."""
    circuit, r1cs, pk = cube_key
    slow = _slow_cube(0.3)
    with Engine(backend=_SleepyHost(0.6), max_batch=4, synthesis="thread", synthesis_workers=1, fill=fill) as eng:
        eng.preload(slow, pk)
        futs = [eng.submit(slow, sector=k, partitions=2) for k in range(6)]
        for f in futs:
            res = f.result(timeout=120)
            assert res.verified and all(verifier.verify(pk.vk, x, p) for x, p in zip(res.public_inputs, res.proofs))
        st = eng.status()
    return st["batch_sizes"], st["padded_slots"]


def test_continuously_fed_run_forms_full_batches(cube_key):
    """fill="predict" waits for partitions expected before the batch could run anyway: once the engine has its
    estimates (after the first two batches), every batch is full. Twin: the fixed 0.5 s wait (fill="wait") starts
    batches with 2-3 of 4 ready: fewer full batches, more padded slots."""
    hist, padded = _fed_run(cube_key, "predict")
    hist_wait, padded_wait = _fed_run(cube_key, "wait")
    assert sum(k * n for b, n in hist.items() for k in [int(b.split("/")[0])]) == 12
    assert hist.get("4/4", 0) >= 2, hist
    assert sum(n for b, n in hist.items() if b != "4/4") <= 2, hist  # the first two: no batch time measured yet
    assert hist_wait.get("4/4", 0) < hist["4/4"] and padded_wait > padded, (hist_wait, hist)


def test_urgent_class_does_not_wait_to_fill_behind_another_circuit(cube_key):
    """Circuit A (cube with +7: another R1CS, its own key) has one WinningPoSt partition ready and a second still in
    synthesis, so its batch would wait to fill; circuit B (cube) has a full PoRep batch ready. The A partition goes
    first, in a short batch. Twin: the same A jobs as PoRep class wait for their batch to fill, after B's."""
    circuit, r1cs, pk = cube_key
    cls = type(circuit)

    class Cube7(cls):
        name = "cube7_test"

        def synthesize(self, cs, inputs=None):
            from cuzk_jax.circuits.gadgets.num import alloc_input_num, alloc_num, enforce_equal, mul

            y = alloc_input_num(cs, None if inputs is None else inputs["y"], "y")
            x = alloc_num(cs, None if inputs is None else inputs["x"], "x")
            x3 = mul(cs, mul(cs, x, x, "x^2"), x, "x^3")
            enforce_equal(cs, x3 + x + 7, y, "x^3 + x + 7 = y")

        def sample_inputs(self, partition=0, seed=0):
            x = self._rng(partition, seed).randrange(2 ** 64)
            return {"x": x, "y": x ** 3 + x + 7}

    class SlowCube7(Cube7):
        def sample_inputs(self, partition=0, seed=0):
            time.sleep(1.0)  # still in synthesis when the collector picks (the rest is ready within milliseconds)
            return super().sample_inputs(partition, seed)

    a, slow_a = Cube7(), SlowCube7()
    pk7 = generator.setup(a.r1cs(), generator.insecure_toxic_waste_for_tests(12))
    assert pk7.circuit_digest != pk.circuit_digest

    def order(a_class):
        done, lock = [], threading.Lock()
        with Engine(backend=HostBackend(), max_batch=4, max_wait_s=30, synthesis="thread", synthesis_workers=2,
                    prefetch=0) as eng:
            eng.preload(circuit, pk)
            eng.preload(a, pk7)
            eng.pause()
            bulk = [eng.submit(circuit, sector=k, partitions=1, priority="porep") for k in range(4)]
            first = eng.submit(a, sector=0, partitions=1, priority=a_class)
            later = eng.submit(slow_a, sector=1, partitions=1, priority=a_class)
            wait_ready(eng, 5)
            for name, f in [("a", first), ("a_slow", later)] + [("b", f) for f in bulk]:
                f.add_done_callback(lambda f, name=name: (lock.acquire(), done.append(name), lock.release()))
            eng.resume()
            for f in [first, later, *bulk]:
                res = f.result(timeout=120)
                assert res.verified and verifier.verify((pk7 if f in (first, later) else pk).vk,
                                                        res.public_inputs[0], res.proofs[0])
        return done

    assert order("winning_post")[0] == "a"
    assert order("porep")[:4] == ["b"] * 4


def test_precompile_at_key_placement(cube_key, monkeypatch):
    """EngineConfig.precompile: placing a key (preload) also asks the backend to compile every batch shape's
    programs (a backend without ``precompile`` is left alone; off by default); DeviceBackend.precompile compiles
    the steps a batch really runs: one step within the key's plan, else plan-sized steps and the remainder."""
    from cuzk_jax.engine import backends
    from cuzk_jax.groth16 import pipeline

    circuit, r1cs, pk = cube_key
    calls = []

    class Recording(HostBackend):
        def precompile(self, resident, sizes):
            calls.append(tuple(sizes))
            return []

    with Engine(backend=Recording(), batch_sizes=(2, 4), synthesis="thread", synthesis_workers=1) as eng:
        eng.preload(circuit, pk)
    assert calls == []
    with Engine(backend=Recording(), batch_sizes=(2, 4), synthesis="thread", synthesis_workers=1,
                precompile=True) as eng:
        eng.preload(circuit, pk)
        assert calls == [(2, 4)]
        assert len(eng.submit(circuit, [circuit.sample_inputs(0, 3)]).result(timeout=300).proofs) == 1
    with Engine(backend=HostBackend(), synthesis="thread", synthesis_workers=1, precompile=True) as eng:
        eng.preload(circuit, pk)  # no precompile method: nothing to do

    class Failing(HostBackend):
        def precompile(self, resident, sizes):
            raise RuntimeError("compiler crashed")

    with Engine(backend=Failing(), synthesis="thread", synthesis_workers=1, precompile=True) as eng:
        eng.preload(circuit, pk)  # a failed ahead-of-time compile is logged; the key is still resident
        assert len(eng.submit(circuit, [circuit.sample_inputs(0, 4)]).result(timeout=300).proofs) == 1
    steps = []
    monkeypatch.setattr(pipeline, "precompile", lambda rk, P: steps.append(P) or ["evaluate"])
    rk = type("RK", (), {"plan": type("Plan", (), {"batch": 3})(), "mesh": None})()
    assert backends.DeviceBackend.precompile(rk, (2, 4, 8)) == ["evaluate@1", "evaluate@2", "evaluate@3"]
    assert steps == [1, 2, 3]


class _CallbackHost(HostBackend):
    """The host backend whose ``run`` takes ``witness_done`` (as the device backend's does) and, after calling it,
    waits for the collector to stage the next batch -- which it can only do with the running batch's credit back.
    ``call=False``: the same backend that never calls back (the negative twin)."""

    def __init__(self, call=True):
        self.call = call
        self.staged_during_run = []
        self._staged = threading.Event()

    def stage(self, resident, z, montgomery=True):
        self._staged.set()
        return super().stage(resident, z, montgomery)

    def run(self, resident, zs, phase, witness_done=None):
        self._staged.clear()
        if self.call:
            witness_done()
        self.staged_during_run.append(self._staged.wait(timeout=5 if self.call else 0.5))
        return super().run(resident, zs, phase)


def _three_batches_of_one(cube_key, backend, prefetch: int, seed: int) -> None:
    """One job of three cube partitions through an engine on ``backend`` in batches of one, started once all three
    are ready (so the collector could stage every next batch at once); every proof verifies."""
    circuit, r1cs, pk = cube_key
    with Engine(backend=backend, max_batch=1, max_wait_s=0.01, prefetch=prefetch, synthesis="thread",
                synthesis_workers=2) as eng:
        eng.preload(circuit, pk)
        eng.pause()
        fut = eng.submit(circuit, [circuit.sample_inputs(p, seed) for p in range(3)])
        wait_ready(eng, 3)
        eng.resume()
        res = fut.result(timeout=300)
    assert len(res.proofs) == 3 and res.verified


@pytest.mark.parametrize("call", [True, False])
def test_credit_returns_when_the_witness_is_dead(cube_key, call):
    """``prefetch=0``: the running batch's credit comes back when its backend calls ``witness_done`` (the device
    backend does so before the H MSM, once the batch's device witness is freed), so the next batch is staged while
    it still runs; a backend that does not call back (the twin) gets the next batch staged only after it ends.
    Every proof verifies either way."""
    backend = _CallbackHost(call)
    _three_batches_of_one(cube_key, backend, prefetch=0, seed=3)
    # batches 1 and 2 each had a successor to stage; the last one had none
    assert backend.staged_during_run[:2] == [call, call] and not backend.staged_during_run[2]


class _PlannedHost(HostBackend):
    """The host backend with a memory plan's staging mode on its resident keys (``"late"``: the key's plan
    counts no staged batch) and an event log: ``stage`` when a batch's witness goes on the device, ``done`` when a
    running batch's witness is dead (logged before calling back, after giving the collector time to stage)."""

    def __init__(self, mode):
        self.mode = mode
        self.events = []

    def place(self, pk, r1cs, headroom=None):
        resident = super().place(pk, r1cs, headroom)
        resident.plan = types.SimpleNamespace(prefetch=self.mode)
        return resident

    def stage(self, resident, z, montgomery=True):
        self.events.append("stage")
        return super().stage(resident, z, montgomery)

    def run(self, resident, zs, phase, witness_done=None):
        time.sleep(0.5)  # room for the collector to stage the next batch now, if it may
        self.events.append("done")
        witness_done()
        return super().run(resident, zs, phase)


@pytest.mark.parametrize("mode", ["late", "on"])
def test_witness_room_follows_the_key_plan(cube_key, mode):
    """``prefetch=1``: with a key whose plan counts no staged batch (``"late"``) one batch's witness at most is on
    the device -- the next is staged only after the running one's is dead, so stages and deaths alternate; the
    twin, a plan that counts one (``"on"``), stages the next batch while the first still holds its witness."""
    backend = _PlannedHost(mode)
    _three_batches_of_one(cube_key, backend, prefetch=1, seed=4)
    ev = backend.events
    assert ev.count("stage") == 3 and ev.count("done") == 3
    alternating = ev == ["stage", "done"] * 3
    assert alternating == (mode == "late"), ev
