"""The proving daemon: cuzk's gRPC API over one :class:`cuzk_jax.engine.Engine`, with a journal and metrics.

* :class:`ProvingService` -- the logic, independent of gRPC: validate a request, journal it (durably, before the
  reply), hand it to the engine, write its result to the journal exactly once, answer awaits and polls from the
  journal; resume queued jobs at start.
* :class:`Server` -- the gRPC server around it: address and TLS, bearer-token check, request size limit, every
  error mapped to one gRPC status with a message (never a crash); optional Prometheus HTTP endpoint.
* :func:`serve` -- start, wait for SIGTERM / SIGINT, stop (queued jobs stay queued in the journal and resume at the
  next start).

Error mapping (the status a client sees): bad request fields, unknown circuit / preset / class, malformed inputs
-> ``INVALID_ARGUMENT``; unknown job id -> ``NOT_FOUND``; a job id reused for a different request ->
``ALREADY_EXISTS``; ``input_path`` outside ``input_dir`` (or none configured) -> ``PERMISSION_DENIED``; too many
queued jobs -> ``RESOURCE_EXHAUSTED`` (a message over ``max_request_bytes`` gets the same from gRPC itself); no or
wrong token -> ``UNAUTHENTICATED``; a daemon shutting down -> ``UNAVAILABLE``; anything else -> ``INTERNAL`` with
the error's class and message (and a log line with the traceback).
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import hmac
import json
import logging
import os
import re
import signal
import stat
import threading
import time

import grpc

from cuzk_jax import priorities
from cuzk_jax.errors import BadInput, CuzkError
from cuzk_jax.fileio import load_json

from . import proving_pb2 as pb
from . import proving_pb2_grpc as pbg
from .config import ServiceConfig, parse_address
from .journal import JobRow, Journal
from .metrics import Metrics

log = logging.getLogger(__name__)

JOB_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
NAME = re.compile(r"[A-Za-z0-9_.-]{0,64}")


class RequestError(CuzkError):
    """A request the service refuses with gRPC status ``code`` (see the module docstring)."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# --------------------------------------------------------------------------------------------------------------
# The service logic
# --------------------------------------------------------------------------------------------------------------


class ProvingService:
    """Jobs in, proofs out (see the module docstring). ``engine``: an engine to use instead of one built from the
    config (tests); the service shuts it down in :meth:`stop`."""

    def __init__(self, config: ServiceConfig, *, engine=None):
        self.config = config.check()
        self.journal = Journal(config.journal)
        self.engine = engine if engine is not None else self._make_engine()
        self.metrics = Metrics(self)
        self._lock = threading.Lock()
        self._live: dict[str, tuple] = {}  # job id -> (engine future, event set once the journal has its result)
        self._circuits: dict[tuple, object] = {}
        self._labels: dict[str, str] = {}  # R1CS digest -> "circuit/preset"
        self._stopping = False
        self.started = time.time()
        self.paused = False  # batch forming, set through set_paused (the Pause RPC)
        self._pause_lock = threading.Lock()

    def _make_engine(self):
        from cuzk_jax import keycache
        from cuzk_jax.engine import Engine, HostBackend

        key_dir = self.config.key_dir or None

        def loader(circuit, r1cs):
            return keycache.load_or_setup(circuit, r1cs, directory=key_dir)

        backend = HostBackend() if self.config.backend == "host" else None
        return Engine(self.config.engine_config(), backend=backend, key_loader=loader)

    # -- lifecycle -------------------------------------------------------------------------------------------------
    def start(self) -> int:
        """Resume every queued job of the journal, then preload the configured keys; returns the jobs resumed."""
        resumed = 0
        for row in self.journal.pending():
            self.journal.attempt(row.job_id)
            try:
                self._launch(row)
                resumed += 1
            except Exception as e:  # noqa: BLE001 -- e.g. its circuit no longer exists: this job fails, not the start
                cause = type(e).__name__
                self.journal.finish(row.job_id, "failed", error=f"{cause}: {e}", cause=cause)
                self.metrics.job_finished(row.priority, "failed", cause=cause)
        if resumed:
            log.info("resumed %d queued jobs from the journal %s", resumed, self.config.journal)
        for entry in self.config.preload:
            name, _, preset = entry.partition("/")
            self.preload(name, preset)
        return resumed

    def begin_stop(self) -> None:
        """Refuse new jobs and wake every Await (they answer ``queued``, ``timed_out``)."""
        self._stopping = True
        with self._lock:
            live = list(self._live.values())
        for _, ev in live:
            ev.set()

    def stop(self) -> None:
        """Stop the engine; jobs not finished stay ``queued`` in the journal (resumed at the next start)."""
        self.begin_stop()
        self.engine.shutdown(wait=False)
        self.journal.close()

    # -- circuits --------------------------------------------------------------------------------------------------
    def circuit(self, name: str, preset: str = ""):
        """The circuit instance for ``name`` / ``preset`` ("" = its default), its structure synthesized once."""
        if not name or not NAME.fullmatch(name) or not NAME.fullmatch(preset or ""):
            raise BadInput(f"circuit {name!r} / preset {preset!r}: expected names of letters, digits, '_', '.', '-'")
        key = (name, preset or "")
        with self._lock:
            circuit = self._circuits.get(key)
        if circuit is None:
            from cuzk_jax.circuits import base

            try:
                circuit = base.get_circuit(name, preset or None)
            except CuzkError:
                raise
            except (KeyError, ValueError, TypeError) as e:
                raise BadInput(f"circuit {name!r} preset {preset!r}: {e}") from None
            digest = self.engine.circuit_digest(circuit)
            with self._lock:
                self._circuits.setdefault(key, circuit)
                self._labels[digest] = f"{circuit.name}/{circuit.preset}"
        return circuit

    def key_label(self, digest: str) -> str:
        with self._lock:
            return self._labels.get(digest, digest[:16])

    # -- requests --------------------------------------------------------------------------------------------------
    def _spec(self, req) -> dict:
        """The JSON job description of a SubmitRequest, its inputs validated."""
        which = req.WhichOneof("inputs")
        limit = self.config.max_partitions
        if which is None:
            raise BadInput("submit: give one of inputs_json, input_path or sample")
        if which == "sample":
            n, seed = req.sample.partitions, req.sample.seed
            if not 1 <= n <= limit:
                raise BadInput(f"submit: sample.partitions must be in [1, {limit}], got {n}")
            if seed < 0:
                raise BadInput(f"submit: sample.seed must be >= 0, got {seed}")
            return {"sample": [seed, n]}
        text = self._read_input(req.input_path) if which == "input_path" else req.inputs_json
        data = load_json(text, which, error=BadInput)
        if not isinstance(data, list) or not data or not all(isinstance(x, dict) for x in data):
            raise BadInput(f"submit: {which} must be a non-empty JSON list of objects (one per partition)")
        if len(data) > limit:
            raise BadInput(f"submit: {len(data)} partitions; at most {limit} per job")
        from cuzk_jax.engine.core import check_input_values

        for p, x in enumerate(data):
            check_input_values(x, f"submit: partition {p} input")
        return {"inputs": data}

    def _read_input(self, path: str) -> bytes:
        root = self.config.input_dir
        if not root:
            raise RequestError(grpc.StatusCode.PERMISSION_DENIED,
                               "submit: input_path is disabled (the server has no input_dir)")
        real, base_dir = os.path.realpath(os.path.join(root, path)), os.path.realpath(root)
        if os.path.commonpath([real, base_dir]) != base_dir:
            raise RequestError(grpc.StatusCode.PERMISSION_DENIED, f"submit: input_path {path!r} is outside input_dir")
        try:
            st = os.stat(real)
            if not stat.S_ISREG(st.st_mode):
                raise BadInput(f"submit: input_path {path!r} is not a regular file")
            if st.st_size > self.config.max_request_bytes:
                raise BadInput(f"submit: input_path {path!r} is larger than max_request_bytes")
            with open(real, "rb") as fh:
                return fh.read(self.config.max_request_bytes + 1)
        except OSError as e:
            raise BadInput(f"submit: input_path {path!r}: {e.strerror or e}") from None

    def submit(self, req) -> pb.SubmitReply:
        if self._stopping:
            raise RequestError(grpc.StatusCode.UNAVAILABLE, "the service is shutting down")
        if not JOB_ID.fullmatch(req.job_id):
            raise BadInput("submit: job_id must be 1-128 characters of letters, digits, '.', '_', ':', '-'")
        circuit = self.circuit(req.circuit, req.preset)
        priority = req.priority or priorities.class_of(circuit)
        try:
            priorities.check(priority)
        except ValueError as e:
            raise BadInput(f"submit: {e}") from None
        spec = self._spec(req)
        digest = _digest({"circuit": req.circuit, "preset": circuit.preset, "priority": priority, "spec": spec})
        old = self.journal.get(req.job_id)
        if old is None:
            with self._lock:
                if len(self._live) >= self.config.max_queued_jobs:
                    raise RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                       f"submit: {len(self._live)} jobs queued (max_queued_jobs); retry later")
            row = JobRow(job_id=req.job_id, request_digest=digest, circuit=req.circuit, preset=circuit.preset,
                         priority=priority, spec=json.dumps(spec), state="queued", submitted_at=time.time())
            stored, existed = self.journal.accept(row)
            if not existed:
                try:
                    self._launch(stored, circuit)
                except BaseException as e:
                    if not self._stopping:  # a refusal the checks above missed: the job fails, once
                        cause = type(e).__name__
                        self.journal.finish(req.job_id, "failed", error=f"{cause}: {e}", cause=cause)
                    raise
                return pb.SubmitReply(job_id=req.job_id, existing=False, state="queued")
            old = stored
        if old.request_digest != digest:
            raise RequestError(grpc.StatusCode.ALREADY_EXISTS,
                               f"submit: job id {req.job_id!r} exists for a different request (circuit, inputs or "
                               f"priority differ); use a new job id")
        return pb.SubmitReply(job_id=req.job_id, existing=True, state=old.state)

    def _launch(self, row: JobRow, circuit=None) -> None:
        """Hand a journaled (queued) job to the engine; its result goes to the journal once."""
        circuit = circuit if circuit is not None else self.circuit(row.circuit, row.preset)
        spec = json.loads(row.spec)
        if "sample" in spec:
            seed, n = spec["sample"]
            fut = self.engine.submit(circuit, sector=seed, partitions=n, priority=row.priority)
        else:
            fut = self.engine.submit(circuit, spec["inputs"], priority=row.priority)
        ev = threading.Event()
        with self._lock:
            self._live[row.job_id] = (fut, ev)
        fut.add_done_callback(lambda f, row=row, ev=ev: self._on_done(row, f, ev))

    def _on_done(self, row: JobRow, fut, ev: threading.Event) -> None:
        from cuzk_jax.engine import EngineShutdown

        try:
            if fut.cancelled():
                if self.journal.finish(row.job_id, "cancelled"):
                    self.metrics.job_finished(row.priority, "cancelled")
                return
            exc = fut.exception()
            if exc is None:
                res = fut.result()
                publics = [[str(int(v)) for v in p] for p in res.public_inputs]
                if self.journal.finish(row.job_id, "done", proof=res.proof_bytes(), public_inputs=publics):
                    self.metrics.job_finished(row.priority, "done", result=res)
            elif isinstance(exc, EngineShutdown) and self._stopping:
                pass  # stays queued: the next start resumes it
            else:
                cause = type(exc).__name__
                if self.journal.finish(row.job_id, "failed", error=f"{cause}: {exc}", cause=cause):
                    self.metrics.job_finished(row.priority, "failed", cause=cause)
        except Exception:  # noqa: BLE001 -- journal unwritable (disk full, closed): the job stays queued
            log.exception("job %s: could not record its result; it stays queued", row.job_id)
        finally:
            with self._lock:
                if self._live.get(row.job_id, (None, None))[1] is ev:
                    del self._live[row.job_id]
            ev.set()

    def _row(self, job_id: str) -> JobRow:
        row = self.journal.get(job_id) if JOB_ID.fullmatch(job_id or "") else None
        if row is None:
            raise RequestError(grpc.StatusCode.NOT_FOUND, f"no job {job_id!r}")
        return row

    @staticmethod
    def _reply(row: JobRow, timed_out: bool = False) -> pb.JobReply:
        publics = [json.dumps(p) for p in json.loads(row.public_inputs)] if row.public_inputs else []
        return pb.JobReply(job_id=row.job_id, state=row.state, priority=row.priority, circuit=row.circuit,
                           preset=row.preset, proof=row.proof or b"", public_inputs_json=publics,
                           error=row.error or "", done_seq=row.done_seq or 0, submitted_at=row.submitted_at,
                           finished_at=row.finished_at or 0.0, timed_out=timed_out)

    def poll(self, req) -> pb.JobReply:
        return self._reply(self._row(req.job_id))

    def await_job(self, req, remaining: float | None = None) -> pb.JobReply:
        """Wait up to ``timeout_s`` (bounded by ``max_await_s`` and the call's deadline) for the job to finish."""
        row = self._row(req.job_id)
        if row.state == "queued":
            timeout = self.config.max_await_s if req.timeout_s <= 0 else min(req.timeout_s, self.config.max_await_s)
            if remaining is not None:
                timeout = max(0.0, min(timeout, remaining - 0.05))
            with self._lock:
                live = self._live.get(req.job_id)
            if live is not None:
                live[1].wait(timeout)
            row = self._row(req.job_id)
        return self._reply(row, timed_out=row.state == "queued")

    def cancel(self, req) -> pb.CancelReply:
        row = self._row(req.job_id)
        if row.state == "queued":
            with self._lock:
                live = self._live.get(req.job_id)
            if live is not None:
                live[0].cancel()  # runs _on_done, which journals "cancelled", unless it completed meanwhile
                live[1].wait(5)
            else:
                self.journal.finish(req.job_id, "cancelled")
            row = self._row(req.job_id)
        return pb.CancelReply(job_id=row.job_id, cancelled=row.state == "cancelled", state=row.state)

    def device_memory(self) -> dict:
        """``{device: {kind: bytes}}`` from the devices that report memory (none for the host backend / CPU)."""
        out = {}
        for d in getattr(self.engine.backend, "devices", []) or []:
            try:
                stats = d.memory_stats() or {}
            except Exception:  # noqa: BLE001 -- a backend without memory statistics
                stats = {}
            kinds = {k: int(stats[k]) for k in ("bytes_in_use", "peak_bytes_in_use", "bytes_limit") if k in stats}
            if kinds:
                out[str(d)] = kinds
        return out

    def status(self) -> dict:
        st = self.engine.status()
        st["keys"]["resident"] = {self.key_label(d): n for d, n in st["keys"]["resident"].items()}
        st["journal"] = {"path": self.config.journal, **self.journal.counts()}
        st["device_memory"] = self.device_memory()
        st["service"] = {"address": self.config.address, "backend": self.config.backend,
                         "uptime_s": time.time() - self.started, "live_jobs": len(self._live), "paused": self.paused,
                         "priority_delays_s": self.engine.config.delays()}
        return st

    def preload(self, name: str, preset: str = "") -> bool:
        circuit = self.circuit(name, preset)
        before = self.engine.circuit_digest(circuit) in self.engine.keys
        self.engine.preload(circuit)
        return not before

    def evict(self, name: str, preset: str = "") -> bool:
        return self.engine.evict(self.circuit(name, preset))

    def set_paused(self, paused: bool) -> bool:
        """Pause (or resume) the forming of new batches; True when the state changed."""
        with self._pause_lock:
            changed = paused != self.paused
            if changed:
                (self.engine.pause if paused else self.engine.resume)()
                self.paused = paused
                log.info("batch forming %s", "paused" if paused else "resumed")
        return changed

    def keys_json(self) -> str:
        return json.dumps({self.key_label(d): n for d, n in self.engine.keys.resident().items()})


# --------------------------------------------------------------------------------------------------------------
# gRPC
# --------------------------------------------------------------------------------------------------------------


class _Servicer(pbg.ProverServicer):
    """Maps calls to :class:`ProvingService` and every error to one gRPC status with a message."""

    def __init__(self, service: ProvingService):
        self.service = service

    def _call(self, context, fn, *args):
        try:
            return fn(*args)
        except RequestError as e:
            code, message = e.code, str(e)
        except (BadInput, ValueError, TypeError, RecursionError) as e:
            code, message = grpc.StatusCode.INVALID_ARGUMENT, str(e) or type(e).__name__
        except RuntimeError as e:  # the engine shutting down
            code, message = grpc.StatusCode.UNAVAILABLE, str(e) or type(e).__name__
        except Exception as e:  # noqa: BLE001 -- never crash the server; name the error
            log.exception("internal error in %s", getattr(fn, "__name__", fn))
            code, message = grpc.StatusCode.INTERNAL, f"internal error: {type(e).__name__}: {e}"
        context.abort(code, message[:2000])

    def Submit(self, request, context):
        return self._call(context, self.service.submit, request)

    def Await(self, request, context):
        return self._call(context, self.service.await_job, request, context.time_remaining())

    def Poll(self, request, context):
        return self._call(context, self.service.poll, request)

    def Cancel(self, request, context):
        return self._call(context, self.service.cancel, request)

    def Status(self, request, context):
        return self._call(context, lambda: pb.StatusReply(json=json.dumps(self.service.status(), default=str)))

    def Preload(self, request, context):
        return self._call(context, lambda: pb.KeyReply(changed=self.service.preload(request.circuit, request.preset),
                                                       json=self.service.keys_json()))

    def Evict(self, request, context):
        return self._call(context, lambda: pb.KeyReply(changed=self.service.evict(request.circuit, request.preset),
                                                       json=self.service.keys_json()))

    def Pause(self, request, context):
        return self._call(context, lambda: pb.PauseReply(changed=self.service.set_paused(request.paused),
                                                         paused=self.service.paused))

    def Metrics(self, request, context):
        return self._call(context, lambda: pb.MetricsReply(text=self.service.metrics.text()))


class _TokenInterceptor(grpc.ServerInterceptor):
    """Every call must carry metadata ``authorization: Bearer <token>`` (compared in constant time)."""

    def __init__(self, token: str):
        self._expected = f"Bearer {token}".encode()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED,
                          "missing or wrong token: send metadata 'authorization: Bearer <token>'")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation, details):
        got = dict(details.invocation_metadata or ()).get("authorization", "")
        if isinstance(got, str) and hmac.compare_digest(got.encode(), self._expected):
            return continuation(details)
        return self._deny


class Server:
    """The gRPC server over a :class:`ProvingService` (see the module docstring). ``start()`` returns the address
    actually bound (a TCP port 0 becomes the port chosen)."""

    def __init__(self, config: ServiceConfig, *, engine=None):
        self.config = config.check()
        self.service = ProvingService(self.config, engine=engine)
        self._grpc = None
        self._http = None
        self.address = None
        self.metrics_port = None  # the Prometheus HTTP port once started (a requested port 0 becomes the real one)

    def start(self) -> str:
        cfg = self.config
        resumed = self.service.start()
        options = [("grpc.max_receive_message_length", cfg.max_request_bytes),
                   ("grpc.max_send_message_length", 256 << 20), ("grpc.so_reuseport", 0)]
        token = cfg.token()
        self._grpc = grpc.server(cf.ThreadPoolExecutor(cfg.rpc_threads, thread_name_prefix="rpc"), options=options,
                                 interceptors=[_TokenInterceptor(token)] if token else [])
        pbg.add_ProverServicer_to_server(_Servicer(self.service), self._grpc)
        kind, where = parse_address(cfg.address)
        try:
            if kind == "unix":
                os.makedirs(os.path.dirname(os.path.abspath(where)), mode=0o700, exist_ok=True)
                if os.path.exists(where) and stat.S_ISSOCK(os.stat(where).st_mode):
                    os.unlink(where)  # a stale socket of a previous run
                mask = os.umask(0o177)  # the socket is created owner-only (rw-------)
                try:
                    self._grpc.add_insecure_port("unix:" + os.path.abspath(where))
                finally:
                    os.umask(mask)
                self.address = "unix:" + os.path.abspath(where)
            else:
                if cfg.tls_cert:
                    with open(cfg.tls_key, "rb") as k, open(cfg.tls_cert, "rb") as c:
                        creds = grpc.ssl_server_credentials([(k.read(), c.read())])
                    port = self._grpc.add_secure_port(where, creds)
                else:
                    port = self._grpc.add_insecure_port(where)
                self.address = f"{where.rpartition(':')[0]}:{port}"
        except RuntimeError as e:
            raise BadInput(f"cannot listen on {cfg.address}: {e}") from None
        self._grpc.start()
        if cfg.metrics_address:
            from prometheus_client import start_http_server

            host, _, port = cfg.metrics_address.rpartition(":")
            self._http, _ = start_http_server(int(port), addr=host.strip("[]"), registry=self.service.metrics.registry)
            self.metrics_port = self._http.server_port
        log.info("cuzk_jax service on %s (%d jobs resumed)", self.address, resumed)
        return self.address

    def stop(self, grace: float = 5.0) -> None:
        self.service.begin_stop()
        if self._grpc is not None:
            self._grpc.stop(grace).wait()
        if self._http is not None:
            self._http.shutdown()
        self.service.stop()

    def wait(self) -> None:
        self._grpc.wait_for_termination()


def serve(config: ServiceConfig, announce=print) -> None:
    """Run the daemon until SIGTERM or SIGINT: ``announce`` gets one line with the address once it listens."""
    server = Server(config)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    address = server.start()
    announce(f"cuzk_jax service listening on {address}")
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
