"""Several devices and several processes (issue 25): cuzk_jax.engine.multidevice and cuzk_jax.engine.distributed.

The multi-process test launches two Python processes on this machine, each with two emulated CPU devices
(``--xla_force_host_platform_device_count=2``), joined by ``jax.distributed`` (gloo CPU collectives): process 0
and 1 each prove two partitions of one sector, each over its two devices (one engine per device), the proofs are
gathered to process 0 and verified there. With the same test-only ``(r, s)`` they equal, bit for bit, the proofs
``prover.prove`` makes in this (single) process. Negative twins: swapped gathered proofs do not verify; a
coordinator that does not answer, or a peer that never joins, ends the script with one error line and exit 2 within
the timeout. The bench op runs on two emulated devices at the smallest circuit.
"""

import json
import os
import socket
import subprocess
import sys
import time

import jax
import pytest

from cuzk_jax.circuits import base
from cuzk_jax.engine import distributed, multidevice
from cuzk_jax.errors import BadInput
from cuzk_jax.groth16 import generator, prover, verifier
from cuzk_jax.groth16.data_structures import Proof

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTOR, PARTITIONS = 7, 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(devices: int = 1) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    env["CUZK_JAX_CACHE_DIR"] = jax.config.jax_compilation_cache_dir or ""
    for name in ("CUZK_COORDINATOR", "CUZK_NUM_PROCESSES", "CUZK_PROCESS_ID"):
        env.pop(name, None)
    return env


# ---------------------------------------------------------------------------------------------------------------
# Configuration (in process)
# ---------------------------------------------------------------------------------------------------------------


def test_process_config_from_flags_then_environment():
    env = {"CUZK_COORDINATOR": "10.0.0.1:8476", "CUZK_NUM_PROCESSES": "4", "CUZK_PROCESS_ID": "3"}
    assert distributed.ProcessConfig.resolve(environ={}) is None  # single process
    c = distributed.ProcessConfig.resolve(environ=env)
    assert (c.coordinator, c.num_processes, c.process_id) == ("10.0.0.1:8476", 4, 3)
    c = distributed.ProcessConfig.resolve("h:1", 2, 1, "0", 9.0, environ=env)  # flags win
    assert (c.coordinator, c.num_processes, c.process_id, c.local_device_ids, c.timeout_s) == ("h:1", 2, 1, (0,), 9.0)
    jax_env = {"JAX_COORDINATOR_ADDRESS": "h:2", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}
    assert distributed.ProcessConfig.resolve(environ=jax_env).coordinator == "h:2"
    for kw, needle in [(dict(coordinator="nohost", num_processes=2, process_id=0), "host:port"),
                       (dict(coordinator="h:0", num_processes=2, process_id=0), "port"),
                       (dict(coordinator="h:1", num_processes=2), "process_id"),
                       (dict(coordinator="h:1", num_processes=2, process_id=2), "process_id must be in 0..1"),
                       (dict(coordinator="h:1", num_processes="two", process_id=0), "integer"),
                       (dict(num_processes=2, process_id=1), "without a coordinator")]:
        with pytest.raises(BadInput, match=needle):
            distributed.ProcessConfig.resolve(environ={}, **kw)


def test_assignment_by_process_index_covers_every_item_once():
    for n, parts in [(10, 2), (10, 3), (3, 4), (40, 8)]:
        chunks = [distributed.assign(n, parts, i) for i in range(parts)]
        assert [i for c in chunks for i in c] == list(range(n))
        assert max(map(len, chunks)) - min(map(len, chunks)) <= 1


def test_select_devices_names_a_bad_index():
    assert multidevice.select_devices("") == jax.local_devices()
    assert multidevice.select_devices("0") == jax.local_devices()[:1]
    for spec in ("7", "0,0", "a", [True]):
        with pytest.raises(BadInput, match="devices"):
            multidevice.select_devices(spec)
    with pytest.raises(BadInput, match="device mode"):
        multidevice.MultiDeviceEngine("ring")


# ---------------------------------------------------------------------------------------------------------------
# Two processes, two devices each
# ---------------------------------------------------------------------------------------------------------------

_CHILD = r"""
import json, os, sys
import jax
if os.environ.get("CUZK_JAX_CACHE_DIR"):
    jax.config.update("jax_compilation_cache_dir", os.environ["CUZK_JAX_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
from cuzk_jax.engine import distributed
cfg = distributed.ProcessConfig(sys.argv[1], 2, int(sys.argv[2]), timeout_s=240)
distributed.initialize(cfg)
from cuzk_jax.circuits import base
from cuzk_jax.groth16 import prover
from cuzk_jax.groth16.data_structures import ProvingKey
circuit = base.get_circuit("cube")
pk = ProvingKey.load(sys.argv[3], subgroup_check=False)  # the test's own key
rs = prover.insecure_randomness_for_tests(3, int(sys.argv[5]))
res = distributed.prove_sectors(circuit, pk, [int(sys.argv[4])], int(sys.argv[5]), mode="per_device",
                                randomness=lambda k, p: rs[p], synthesis="thread", synthesis_workers=2,
                                max_batch=1, max_wait_s=0.05)
from cuzk_jax.engine.multidevice import MultiDeviceEngine
with MultiDeviceEngine("sharded", max_batch=3, synthesis="thread", synthesis_workers=1) as eng:  # not run: CPU compile
    sharded = {"engines": len(eng.engines), "mesh": eng.engines[0].backend.mesh.shape["p"],
               "sizes": list(eng.engines[0].batch_sizes), "busy": eng.busy_seconds()}
print(json.dumps({"sharded": sharded, "process": res.process_id, "devices": [str(d) for d in jax.local_devices()],
                  "items": res.items, "busy": res.busy_s,
                  "sectors": [{"sector": s.sector, "proofs": [p.to_bytes().hex() for p in s.proofs],
                               "publics": [[str(x) for x in xs] for xs in s.public_inputs],
                               "processes": s.processes, "verified": s.verified} for s in res.sectors]}))
"""


@pytest.fixture(scope="module")
def cube_key(tmp_path_factory):
    circuit = base.get_circuit("cube")
    r1cs = circuit.r1cs()
    pk = generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(11))
    path = str(tmp_path_factory.mktemp("key") / "cube.pk")
    pk.save(path)
    return circuit, r1cs, pk, path


@pytest.mark.slow
def test_two_processes_gather_proofs_equal_to_one_process(cube_key):
    circuit, r1cs, pk, path = cube_key
    addr = f"127.0.0.1:{_free_port()}"
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, addr, str(i), path, str(SECTOR), str(PARTITIONS)],
                              env=_env(devices=2), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=900)
            assert p.returncode == 0, err[-4000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    # partitions by process index: 0, 1 on process 0 and 2, 3 on process 1, each over its two local devices
    assert [o["items"] for o in outs] == [[[SECTOR, 0], [SECTOR, 1]], [[SECTOR, 2], [SECTOR, 3]]]
    assert all(len(o["devices"]) == 2 and len(o["busy"]) == 2 and min(o["busy"]) > 0 for o in outs)
    assert outs[1]["sectors"] == []  # gathered on process 0 only
    # the other mode: one engine over a mesh of the two local devices, batches rounded up to a multiple of two
    assert outs[0]["sharded"] == {"engines": 1, "mesh": 2, "sizes": [4], "busy": [0.0, 0.0]}
    (got,) = outs[0]["sectors"]
    assert got["processes"] == [0, 0, 1, 1] and got["verified"] is True
    # one process, the same (r, s): the same proofs, bit for bit, and the same public inputs
    inputs = [circuit.sample_inputs(p, SECTOR) for p in range(PARTITIONS)]
    rs = prover.insecure_randomness_for_tests(3, PARTITIONS)
    ref = prover.prove(pk, r1cs, [circuit.witness(x) for x in inputs], randomness=rs)[0]
    publics = [circuit.public_inputs(x) for x in inputs]
    assert got["proofs"] == [p.to_bytes().hex() for p in ref]
    assert got["publics"] == [[str(x) for x in xs] for xs in publics]
    proofs = [Proof.from_bytes(bytes.fromhex(h)) for h in got["proofs"]]
    assert verifier.verify_batch(pk.vk, publics, proofs)
    # negative twin: the gathered proofs of two partitions swapped do not verify
    swapped = [proofs[2], proofs[1], proofs[0], proofs[3]]
    assert not verifier.verify_batch(pk.vk, publics, swapped)
    assert verifier.verify_each(pk.vk, publics, swapped) == [False, True, False, True]


def test_unreachable_coordinator_and_missing_peer_are_one_error_within_the_timeout():
    """Two scripts at once (their waits overlap): process 1 whose coordinator never answers, and process 0 whose
    peer never joins -- each one error line and exit status 2 within the timeout, no hang, no XLA abort."""
    addrs = [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "prove.py"), "--circuit=cube", "--out=",
                               f"--coordinator={addr}", "--num_processes=2", f"--process_id={pid}",
                               f"--dist_timeout={timeout}"], env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for addr, pid, timeout in ((addrs[0], 1, 2), (addrs[1], 0, 3))]
    (_, err1), (_, err0) = (p.communicate(timeout=120) for p in procs)
    assert time.time() - t0 < 90
    assert [p.returncode for p in procs] == [2, 2], err1[-2000:] + err0[-2000:]
    lines = err1.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: coordinator {addrs[0]} did not accept a connection"), err1
    errors = [line for line in err0.splitlines() if line.startswith("error:")]
    assert errors == [f"error: process 0: not all 2 processes joined the coordinator {addrs[1]} within 3 s"], err0


# ---------------------------------------------------------------------------------------------------------------
# The benchmark on two emulated devices
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_multigpu_bench_on_two_cpu_devices(cube_key, tmp_path):
    circuit, r1cs, pk, path = cube_key
    from cuzk_jax import keycache

    keycache.load_or_setup(circuit, r1cs, directory=str(tmp_path / "keys"))  # the bench's key, made here once
    out_json = tmp_path / "mg.json"
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench.py"), "--op=multigpu",
                          "--circuit=cube", "--preset=default", "--partitions=2", "--sectors=2", "--synthesis=thread",
                          "--workers=2", "--impl=per_device", f"--key_dir={tmp_path / 'keys'}", f"--out={out_json}",
                          f"--cache_dir={jax.config.jax_compilation_cache_dir or ''}"],
                         env=_env(devices=2), capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.rstrip().splitlines()[-1] == f"wrote {out_json}"
    rows = json.loads(out_json.read_text())["rows"]
    assert [(r["devices"], r["mode"]) for r in rows] == [(1, "per_device"), (2, "per_device")]
    for r in rows:
        assert r["ok"] is True and r["verified"] is True
        assert len(r["busy_s"]) == r["devices"] and all(b > 0 for b in r["busy_s"])
        assert len(r["key_bytes_per_device"]) == r["devices"] and r["ratio"] > 0
    assert rows[0]["ratio"] == 1.0


def test_a_chunk_error_names_the_job_partition():
    """Per-device mode splits a job into chunks; an error of chunk partition i at offset o names partition o + i."""
    from cuzk_jax.errors import ProofRejected, Unsatisfied

    err = multidevice._renumbered(Unsatisfied(5, "cube", partition=1), 3)
    assert isinstance(err, Unsatisfied) and (err.index, err.partition) == (5, 4) and "partition 4:" in str(err)
    rej = ProofRejected("job 9: the proof of partition 0 does not verify")
    rej.partitions = [0]
    err = multidevice._renumbered(rej, 2)
    assert isinstance(err, ProofRejected) and err.partitions == [2] and "[2]" in str(err)
    other = RuntimeError("device lost")
    assert multidevice._renumbered(other, 2) is other
    assert multidevice.split(5, 2) == [range(0, 3), range(3, 5)]


def test_per_device_submit_keeps_the_job_priority():
    """Every chunk of a job split over the per-device engines is submitted with the job's priority class (the
    engines are stand-ins that record their calls; nothing is proved)."""
    import concurrent.futures as cf
    import itertools

    calls = []

    class FakeEngine:
        def submit(self, circuit, inputs=None, **kw):
            calls.append((len(inputs) if inputs is not None else None, kw.get("priority")))
            return cf.Future()

        def status(self):
            return {"queue": {"synthesizing": 0, "ready": 0}}

    class Circuit:
        def sample_inputs(self, p, seed=0):
            return {"p": p, "seed": seed}

    md = multidevice.MultiDeviceEngine.__new__(multidevice.MultiDeviceEngine)
    md.engines, md._ids = [FakeEngine(), FakeEngine()], itertools.count()
    job = md.submit_sector(Circuit(), sector=3, partitions=5, priority="winning_post")
    assert sorted(calls) == [(2, "winning_post"), (3, "winning_post")]
    assert job.cancel()
