"""The proving daemon (issue 23), against the real server started as a subprocess (``python -m cuzk_jax serve``).

The daemon runs the host backend (Python-int Groth16, no device compile) on the cube circuit, one thread synthesis
worker, batches of 2, no prefetch; proofs are checked here by arkworks pairings against the key the daemon loads
from the same key directory. One daemon serves most tests (module fixture); the restart test runs its own.
"""

import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import grpc
import pytest

from cuzk_jax import keycache
from cuzk_jax.circuits import base
from cuzk_jax.groth16 import verifier
from cuzk_jax.groth16.data_structures import Proof, VerifyingKey
from cuzk_jax.service import codegen
from cuzk_jax.service import config as service_config
from cuzk_jax.service.client import Client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("CUZK_JAX_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "cuzk_jax",
                                                             "xla-test")
MAX_BATCH = 2


class Daemon:
    """``python -m cuzk_jax serve`` on a Unix socket in ``directory``; ``address`` once it listens."""

    def __init__(self, directory, key_dir, *extra, journal=None):
        self.sock = os.path.join(directory, "s.sock")
        self.journal = journal or os.path.join(directory, "journal.sqlite")
        self.log = open(os.path.join(directory, "daemon.log"), "a")
        cmd = [sys.executable, "-m", "cuzk_jax", "serve", f"--address=unix:{self.sock}", f"--journal={self.journal}",
               f"--key_dir={key_dir}", "--backend=host", "--synthesis=thread", "--workers=1",
               f"--max_batch={MAX_BATCH}", "--prefetch=0", f"--cache_dir={CACHE}", *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=ROOT)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in self.proc.stdout], daemon=True).start()
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            line = ""
        if "listening on" not in line:
            self.kill()
            raise AssertionError(f"daemon did not start: {line!r}; log: {self.tail()}")
        self.address = line.split("listening on", 1)[1].strip()

    def tail(self) -> str:
        self.log.flush()
        with open(self.log.name) as fh:
            return fh.read()[-3000:]

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=60)
        self.log.close()


@pytest.fixture(scope="module")
def keys():
    """A key directory holding cube's key and its verifying key. The directory persists across runs (as the XLA
    cache does: a setup costs tens of seconds on this CPU); a missing or unusable key is set up again."""
    key_dir = os.environ.get("CUZK_JAX_TEST_KEY_DIR") or os.path.join(os.path.dirname(CACHE), "keys-test")
    circuit = base.get_circuit("cube")
    paths = keycache.companion_paths(keycache.key_path(circuit, circuit.r1cs(), key_dir))
    if all(os.path.isfile(paths[k]) for k in ("pk", "vk", "manifest")):
        try:
            with open(paths["vk"], "rb") as fh:
                return key_dir, VerifyingKey.from_bytes(fh.read())
        except (OSError, ValueError):
            pass
    return key_dir, keycache.load_or_setup(circuit, directory=key_dir).vk


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, keys):
    directory = tmp_path_factory.mktemp("svc")
    inputs = directory / "inputs"
    inputs.mkdir()
    circuit = base.get_circuit("cube")
    (inputs / "two.json").write_text(json.dumps([circuit.sample_inputs(p, 41) for p in range(2)]))
    (directory / "outside.json").write_text(json.dumps([circuit.sample_inputs(0, 41)]))
    d = Daemon(str(directory), keys[0], f"--input_dir={inputs}")
    yield d
    d.kill(signal.SIGTERM)
    assert d.proc.returncode == 0, d.tail()


@pytest.fixture(scope="module")
def client(daemon):
    with Client(daemon.address) as c:
        c.preload("cube")
        yield c


def verified(vk, job) -> bool:
    proofs, publics = Client.result(job)
    return len(proofs) == len(publics) > 0 and all(verifier.verify(vk, x, p) for x, p in zip(publics, proofs))


def rpc_error(fn, *args, **kw) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value


# ---------------------------------------------------------------------------------------------------------------


def test_generated_code_is_current(tmp_path):
    """proving_pb2*.py are what ``cuzk_jax.service.codegen`` makes of proving.proto now (protoc, then the version
    guards removed). Skipped when the installed grpc_tools bundles another protoc than the one named in the committed
    ``# Protobuf Python Version:`` header: its output differs in more than that line, so it cannot decide staleness."""
    pytest.importorskip("grpc_tools")
    for name, path in codegen.generate(tmp_path).items():
        with open(os.path.join(ROOT, "cuzk_jax", "service", name)) as f:
            committed = f.read()
        made = path.read_text()
        versions = [re.findall(r"^# Protobuf Python Version: .*$", t, re.M) for t in (committed, made)]
        if versions[0] != versions[1]:
            pytest.skip(f"{name}: committed by {versions[0]}, the installed grpc_tools makes {versions[1]}")
        assert committed == made, f"{name} is stale: run python -m cuzk_jax.service.codegen"


def test_codegen_raises_when_a_guard_is_missing():
    """Post-processing refuses output without the expected guard rather than committing it half-fixed."""
    with pytest.raises(ValueError, match="GRPC_GENERATED_VERSION"):
        codegen.postprocess("proving_pb2_grpc.py", "import grpc\n")
    with pytest.raises(ValueError, match="runtime_version import"):
        codegen.postprocess("proving_pb2.py", "import grpc\n")


def test_round_trip_verifies_and_is_delivered_once(keys, client):
    """A job round-trips and its proofs verify; awaiting again returns the same bytes; a resubmitted job id returns
    the existing job. Negative twins: the proof with A and C swapped, and a wrong public input, do not verify."""
    vk = keys[1]
    inputs = [base.get_circuit("cube").sample_inputs(p, 5) for p in range(2)]
    r = client.submit("rt-1", "cube", inputs=inputs)
    assert r.state == "queued" and not r.existing
    job = client.wait("rt-1", 120)
    assert job.state == "done" and len(job.proof) == 2 * 192 and job.priority == "porep", job.error
    assert verified(vk, job)
    again = client.wait("rt-1", 1)
    assert again.proof == job.proof and again.done_seq == job.done_seq
    dup = client.submit("rt-1", "cube", inputs=inputs)
    assert dup.existing and dup.state == "done"
    assert client.poll("rt-1").proof == job.proof
    proofs, publics = Client.result(job)
    swapped = Proof(proofs[0].c, proofs[0].b, proofs[0].a)
    assert not verifier.verify(vk, publics[0], swapped)
    assert not verifier.verify(vk, [publics[0][0] + 1], proofs[0])
    err = rpc_error(client.submit, "rt-1", "cube", inputs=inputs[:1])  # same id, another request
    assert err.code() == grpc.StatusCode.ALREADY_EXISTS and "rt-1" in err.details()


def test_input_path_reads_only_under_input_dir(keys, client):
    """input_path: a file under the daemon's input_dir is proved; paths leaving it (.., absolute) are refused."""
    client.submit("ip-1", "cube", input_path="two.json")
    job = client.wait("ip-1", 120)
    assert job.state == "done" and len(job.proof) == 2 * 192 and verified(keys[1], job)
    for path in ("../outside.json", "/etc/hostname", "inputs/../../outside.json"):
        err = rpc_error(client.submit, "ip-2", "cube", input_path=path)
        assert err.code() == grpc.StatusCode.PERMISSION_DENIED and "outside input_dir" in err.details(), path
    err = rpc_error(client.submit, "ip-3", "cube", input_path="missing.json")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "missing.json" in err.details()


def test_malformed_requests_get_clean_errors(client, daemon):
    cases = [
        (dict(job_id="m1", circuit="no_such_circuit", sample=(1, 1)), grpc.StatusCode.INVALID_ARGUMENT,
         "unknown circuit"),
        (dict(job_id="m2", circuit="cube", preset="huge", sample=(1, 1)), grpc.StatusCode.INVALID_ARGUMENT,
         "preset"),
        (dict(job_id="m3", circuit="cube", inputs="[{"), grpc.StatusCode.INVALID_ARGUMENT, "not valid JSON"),
        (dict(job_id="m4", circuit="cube", inputs="[" * 100 + "]" * 100), grpc.StatusCode.INVALID_ARGUMENT,
         "nested too deeply"),
        (dict(job_id="m5", circuit="cube", inputs='{"x": 1}'), grpc.StatusCode.INVALID_ARGUMENT, "list of objects"),
        (dict(job_id="m6", circuit="cube", inputs='[{"x": 1.5, "y": 2}]'), grpc.StatusCode.INVALID_ARGUMENT,
         "not a field element"),
        (dict(job_id="m7", circuit="cube", sample=(1, 1), priority="urgent"), grpc.StatusCode.INVALID_ARGUMENT,
         "unknown priority class"),
        (dict(job_id="bad id!", circuit="cube", sample=(1, 1)), grpc.StatusCode.INVALID_ARGUMENT, "job_id"),
        (dict(job_id="m8", circuit="cube"), grpc.StatusCode.INVALID_ARGUMENT, "give one of"),
        (dict(job_id="m9", circuit="cube", sample=(1, 10_000)), grpc.StatusCode.INVALID_ARGUMENT, "partitions"),
        (dict(job_id="m10", circuit="cube", input_path="/etc/passwd"), grpc.StatusCode.PERMISSION_DENIED,
         "outside input_dir"),
        (dict(job_id="m11", circuit="cube", inputs="[" + "1," * (9 << 20) + "1]"),
         grpc.StatusCode.RESOURCE_EXHAUSTED, ""),
    ]
    for kw, code, text in cases:
        err = rpc_error(client.submit, **kw)
        assert err.code() == code and text in err.details(), (kw.get("job_id"), err.code(), err.details())
    for fn in (client.poll, client.wait, client.cancel):
        err = rpc_error(fn, "never-submitted")
        assert err.code() == grpc.StatusCode.NOT_FOUND
    assert rpc_error(client.preload, "nope").code() == grpc.StatusCode.INVALID_ARGUMENT
    # an unsatisfied witness (y != x^3 + x + 5) is accepted, then fails with its cause; nothing else is disturbed
    x = base.get_circuit("cube").sample_inputs(0, 9)
    bad = {**x, "y": (x["y"] + 1)}
    client.submit("m-unsat", "cube", inputs=[bad])
    job = client.wait("m-unsat", 120)
    assert job.state == "failed" and job.error.split(":")[0] in ("Unsatisfied", "SynthesisError"), job.error
    assert daemon.proc.poll() is None  # still serving
    assert client.status()["journal"]["failed"] >= 1


def test_cancel(keys, client):
    """A queued job is cancelled (state cancelled, no proof, stays cancelled); cancelling a done job does nothing
    and keeps its proof."""
    ids = [f"c-{k}" for k in range(12)]
    client.evict("cube")  # the first batch reloads the key: the queue cannot drain before the cancel
    for k, job_id in enumerate(ids):
        client.submit(job_id, "cube", sample=(100 + k, 1))
    r = client.cancel(ids[-1])
    assert r.cancelled and r.state == "cancelled"
    for job_id in ids[:-1]:
        assert client.wait(job_id, 120).state == "done"
    last = client.wait(ids[-1], 1)
    assert last.state == "cancelled" and last.proof == b""
    r = client.cancel(ids[0])
    assert not r.cancelled and r.state == "done" and verified(keys[1], client.poll(ids[0]))


def test_winning_post_overtakes_queued_porep(keys, client):
    """With batch forming paused (the Pause RPC), 50 PoRep-class jobs and then one WinningPoSt-class job are
    submitted and synthesized; on resume the WinningPoSt job goes into the first batch: at most MAX_BATCH - 1 PoRep
    jobs (that batch's other slots) finish with or before it. Twin: the same job as PoRep class finishes after all
    12 PoRep jobs ahead of it (first come, first served within a class). Pause and resume report their state and
    whether it changed."""
    def run(tag, priority, n):
        r = client.pause()
        assert r.paused and r.changed and not client.pause().changed and client.status()["service"]["paused"]
        ids = [f"{tag}-{k}" for k in range(n)]
        for k, job_id in enumerate(ids):
            client.submit(job_id, "cube", sample=(1000 + k, 1), priority="porep")
        client.submit(f"{tag}-last", "cube", sample=(999, 1), priority=priority)
        deadline = time.monotonic() + 120
        while True:  # every partition synthesized and waiting for a batch
            queue = client.status()["queue"]
            if queue["ready"] == n + 1 and queue["synthesizing"] == 0:
                break
            assert time.monotonic() < deadline, queue
            time.sleep(0.05)
        at_resume = client.status()["journal"]["last_done_seq"]
        r = client.resume()
        assert r.changed and not r.paused and not client.status()["service"]["paused"]
        last = client.wait(f"{tag}-last", 300)
        assert last.state == "done" and verified(keys[1], last)
        seqs = [client.wait(job_id, 300).done_seq for job_id in ids]
        assert all(s > at_resume for s in seqs)  # nothing was proved while paused
        return sum(s < last.done_seq for s in seqs), sum(s > last.done_seq for s in seqs)

    ahead, behind = run("pri", "winning_post", 50)
    assert ahead <= MAX_BATCH - 1 and behind == 50 - ahead, (ahead, behind)
    ahead, behind = run("fifo", "porep", 12)
    assert ahead == 12 and behind == 0, (ahead, behind)


JOBS_PER_CLIENT = 25


def test_concurrent_clients_get_their_own_proofs(keys, daemon):
    """8 client threads x 25 jobs (the issue's load), each with its own inputs: every job returns the proof of its
    own public input."""
    circuit = base.get_circuit("cube")
    errors = []

    def worker(t):
        try:
            with Client(daemon.address) as c:
                for k in range(JOBS_PER_CLIENT):
                    x = circuit.sample_inputs(k, 500 + t)
                    c.submit(f"cc-{t}-{k}", "cube", inputs=[x], priority="window_post")
                for k in range(JOBS_PER_CLIENT):
                    job = c.wait(f"cc-{t}-{k}", 300)
                    proofs, publics = Client.result(job)
                    want = circuit.public_inputs(circuit.sample_inputs(k, 500 + t))
                    assert publics == [want] and verifier.verify(keys[1], want, proofs[0]), (t, k)
        except Exception as e:  # noqa: BLE001 -- reported by the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(600)
    assert not errors, errors


def test_metrics_and_status(client):
    text = client.metrics()
    for name in ("cuzk_queue_depth{class=\"winning_post\"}", "cuzk_proofs_total", "cuzk_proofs_per_minute",
                 "cuzk_phase_seconds_bucket", "cuzk_job_latency_seconds_bucket", "cuzk_key_resident_bytes",
                 "cuzk_jobs_finished_total{class=\"porep\",state=\"done\"}", "cuzk_host_witness_bytes",
                 "cuzk_split_partitions_total"):
        assert name in text, name
    proofs = next(float(line.split()[-1]) for line in text.splitlines() if line.startswith("cuzk_proofs_total "))
    assert proofs >= 1
    st = client.status()
    assert set(st["classes"]) == {"winning_post", "window_post", "porep", "snap_deals"}
    assert "cube/default" in st["keys"]["resident"] and st["service"]["backend"] == "host"
    r = client.evict("cube")
    assert r.changed and json.loads(r.json) == {}
    assert client.preload("cube").changed


def _self_signed(tmp_path):
    """A self-signed certificate for localhost (openssl), or skip."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                        str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
                       check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"openssl cannot make a test certificate: {e}")
    return str(cert), str(key)


def test_token_and_tls_rules(tmp_path, keys):
    """Beyond localhost the daemon refuses to start without TLS and a token. With TLS and a token: calls without the
    token, or with a wrong one, get UNAUTHENTICATED; a plaintext client cannot talk to it; the right client works.
    The Prometheus HTTP endpoint serves the same metrics."""
    with pytest.raises(Exception, match="needs TLS and a token"):
        service_config.ServiceConfig(address="0.0.0.0:50061").check()
    with pytest.raises(Exception, match="needs TLS and a token"):
        service_config.ServiceConfig(address="cuzk.example.org:50061").check()
    for ok in ("unix:/tmp/x.sock", "localhost:1", "127.0.0.1:1", "[::1]:1"):
        service_config.ServiceConfig(address=ok).check()
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    from cuzk_jax.service.server import Server

    cert, key = _self_signed(tmp_path)
    with pytest.raises(Exception, match="needs TLS and a token; set token_file"):
        service_config.ServiceConfig(address="0.0.0.0:50061", tls_cert=cert, tls_key=key).check()
    cfg = service_config.ServiceConfig(address="localhost:0", journal=str(tmp_path / "j.sqlite"), key_dir=keys[0],
                                       backend="host", synthesis="thread", workers=1, token_file=str(token),
                                       tls_cert=cert, tls_key=key, metrics_address="127.0.0.1:0")
    server = Server(cfg)
    address = server.start()
    try:
        with Client(address, tls_ca=cert) as c:
            assert rpc_error(c.status, timeout=10).code() == grpc.StatusCode.UNAUTHENTICATED
        with Client(address, token="wrong", tls_ca=cert) as c:
            assert rpc_error(c.status, timeout=10).code() == grpc.StatusCode.UNAUTHENTICATED
        with Client(address, token="s3cret") as c:  # plaintext to a TLS port
            assert rpc_error(c.status, timeout=10).code() == grpc.StatusCode.UNAVAILABLE
        with Client(address, token="s3cret", tls_ca=cert) as c:
            assert "classes" in c.status()
        import urllib.request

        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, never a proxy
        with direct.open(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as r:
            assert b'cuzk_queue_depth{class="porep"}' in r.read()
    finally:
        server.stop()


def test_config_file_and_flags(tmp_path):
    path = tmp_path / "service.toml"
    path.write_text('backend = "host"\nmax_batch = 4\npreload = ["cube"]\n[priority_delays_s]\nporep = 30\n')
    cfg = service_config.ServiceConfig.from_toml(str(path)).check()
    assert (cfg.backend, cfg.max_batch, cfg.preload, cfg.priority_delays_s) == ("host", 4, ["cube"], {"porep": 30})
    assert cfg.engine_config().delays()["porep"] == 30
    for text, match in (('max_batch = "4"\n', "max_batch must be a int"), ("colour = 1\n", "unknown setting"),
                        ("[priority_delays_s]\nurgent = 1\n", "unknown priority class"), ("x = [\n", "not valid TOML")):
        path.write_text(text)
        with pytest.raises(Exception, match=match):
            service_config.ServiceConfig.from_toml(str(path)).check()
    # the CLI: a bad config is one error line and exit status 2
    path.write_text("colour = 1\n")
    r = subprocess.run([sys.executable, "-m", "cuzk_jax", "serve", f"--config={path}"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().startswith("error:") and "colour" in r.stderr, r.stderr


@pytest.mark.slow
def test_kill_9_then_restart_resumes_every_job_once(tmp_path, keys):
    """``kill -9`` with 20 jobs queued, then a restart on the same journal: all 20 complete and verify, each job
    finished exactly once (journal ``completions`` 1, distinct ``done_seq``), the interrupted ones re-attempted.
    The restarted daemon also preloads its key (``--preload``)."""
    d = Daemon(str(tmp_path), keys[0], "--max_batch=1")
    with Client(d.address) as c:
        for k in range(20):
            c.submit(f"r-{k}", "cube", sample=(2000 + k, 1))
    d.kill(signal.SIGKILL)
    with sqlite3.connect(d.journal) as db:
        queued = db.execute("SELECT COUNT(*) FROM jobs WHERE state = 'queued'").fetchone()[0]
        total = db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    assert total == 20 and queued >= 1, (total, queued)  # every accepted job was journaled; some were unfinished
    d2 = Daemon(str(tmp_path), keys[0], "--preload=cube", journal=d.journal)
    try:
        with Client(d2.address) as c:
            assert "cube/default" in c.status()["keys"]["resident"]  # --preload: resident before any job asks
            for k in range(20):
                job = c.wait(f"r-{k}", 300)
                assert job.state == "done" and verified(keys[1], job), (k, job.state, job.error)
    finally:
        d2.kill(signal.SIGTERM)
    with sqlite3.connect(d.journal) as db:
        rows = db.execute("SELECT completions, attempts, done_seq FROM jobs").fetchall()
    assert len(rows) == 20 and all(c == 1 for c, _, _ in rows)
    assert len({s for _, _, s in rows}) == 20
    assert sum(a == 2 for _, a, _ in rows) == queued  # exactly the unfinished ones were handed over again


def test_cli_client(keys, daemon, tmp_path):
    """``python -m cuzk_jax client``: submit, wait (proof written, summary printed); a call the daemon
    refuses is one error line with the gRPC status and exit status 2."""
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "cuzk_jax", "client", f"--address={daemon.address}", *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)

    r = cli("submit", "--job_id=cli-1", "--circuit=cube", "--sample=77:2", "--priority=window_post")
    assert r.returncode == 0 and json.loads(r.stdout) == {"job_id": "cli-1", "existing": False, "state": "queued"}
    out = tmp_path / "cli-1.proof"
    r = cli("wait", "--job_id=cli-1", "--timeout=120", f"--out={out}")
    summary = json.loads(r.stdout)
    assert r.returncode == 0 and summary["state"] == "done" and summary["priority"] == "window_post", r.stderr
    with Client(daemon.address) as c:
        job = c.poll("cli-1")
    assert out.read_bytes() == job.proof and verified(keys[1], job)
    r = cli("wait", "--job_id=cli-none")
    assert r.returncode == 2 and r.stderr.strip() == "error: NOT_FOUND: no job 'cli-none'" and not r.stdout
    r = cli("submit", "--job_id=cli-2", "--circuit=cube", "--sample=77")
    assert r.returncode == 2 and "SEED:PARTITIONS" in r.stderr
    r = cli("pause")
    assert r.returncode == 0 and json.loads(r.stdout) == {"paused": True, "changed": True}, r.stderr
    r = cli("resume")
    assert r.returncode == 0 and json.loads(r.stdout) == {"paused": False, "changed": True}, r.stderr


def test_precompile_setting_reaches_the_engine():
    """The daemon compiles a placed key's programs by default (``precompile``); a TOML ``precompile = false`` turns
    it off; a non-boolean is one clear error."""
    from cuzk_jax.errors import BadInput
    from cuzk_jax.service.config import ServiceConfig

    assert ServiceConfig().engine_config().precompile is True
    assert ServiceConfig().replace({"precompile": False}).engine_config().precompile is False
    with pytest.raises(BadInput, match="precompile"):
        ServiceConfig().replace({"precompile": "yes"})


def test_witness_budget_setting_reaches_the_engine():
    """``witness_budget_bytes`` is the engine's host witness budget (0: none); a negative one is one clear error."""
    from cuzk_jax.errors import BadInput
    from cuzk_jax.service.config import ServiceConfig

    assert ServiceConfig().engine_config().host_budget_bytes is None
    assert ServiceConfig().replace({"witness_budget_bytes": 64 << 30}).engine_config().host_budget_bytes == 64 << 30
    assert ServiceConfig().engine_config().split_synthesis is True
    assert ServiceConfig().replace({"split_synthesis": False}).engine_config().split_synthesis is False
    with pytest.raises(BadInput, match="split_synthesis must be a bool"):
        ServiceConfig().replace({"split_synthesis": "no"})
    with pytest.raises(BadInput, match="witness_budget_bytes"):
        ServiceConfig().replace({"witness_budget_bytes": -1}).check()
