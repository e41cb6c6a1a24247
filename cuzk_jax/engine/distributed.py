"""Several processes (one per host, or one per GPU) proving one stream of sectors through ``jax.distributed``.

The model is JAX's multi-controller one: every process runs the same program (``scripts/prove.py`` with the same
flags plus its own ``--process_id``), calls :func:`initialize` first (``jax.distributed.initialize``: process 0
runs the coordination service at the coordinator address, the others connect to it), then
:func:`prove_sectors`:

1. **Plan** -- process 0 (the submitting process) broadcasts its list of sectors and the partition count
   (``jax.experimental.multihost_utils.broadcast_one_to_all``), so the others prove what it asked for.
2. **Assign by process index** -- the ``S x P`` (sector, partition) items, sector-major, are cut into
   ``num_processes`` contiguous chunks (sizes differ by at most one); process ``i`` proves chunk ``i`` on its own
   local devices (a :class:`~cuzk_jax.engine.multidevice.MultiDeviceEngine`: one engine per local device, or one
   sharded batch). No program spans processes: sectors are independent, so there is no cross-host traffic during
   proving (the scaling cuzk gets from one pipeline per GPU).
3. **Gather** -- every process contributes its proofs (192 bytes each, zero-padded to the largest chunk), its
   status (and error message) and a fingerprint of its verifying key to
   ``multihost_utils.process_allgather``; process 0 reassembles the sectors in partition order, computes every
   public input itself and verifies every proof by pairing (py_arkworks_bls12381) before returning it. The verdict
   is broadcast, so every process ends with the same outcome: a failure on any process (bad witness, a key that
   differs from process 0's, a proof that does not verify) raises on all of them, naming the process.

Before each collective the processes meet at a barrier of the coordination service (``jax.distributed``'s runtime
client), whose deadline is ours: the CPU collectives allow a late peer only 30 s, and key loading or an uneven
share can keep processes apart much longer. Collectives between CPU processes use the CPU collectives JAX ships
(gloo, set by :func:`initialize` through ``jax_cpu_collectives_implementation`` -- only when a multi-process run is
initialized, never at import); GPU processes use the GPU backend's own.

Failure to start is one :class:`DistributedError` with a deadline, never a hang or an abort inside XLA (whose
coordination client terminates the process when its own deadline passes): a malformed address is refused at once;
a non-zero process first waits (up to ``timeout_s``) for the coordinator's port to accept a TCP connection --
a reachability probe only, nothing is sent; process 0 checks that it can bind the port; and
``jax.distributed.initialize`` and the backend's start (itself a collective) run under the same deadline (XLA's
own is set later, so this error comes first; the process should then exit, as the scripts do).

Tested on CPU with two processes on one machine (``tests/test_distributed.py``): the gathered proofs verify and
equal, bit for bit, one process's proofs made with the same test-only ``(r, s)``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
import threading
import time
from typing import Callable, Sequence

import numpy as np

from cuzk_jax.errors import BadInput, CuzkError, ProofRejected

ENV = {"coordinator": ("CUZK_COORDINATOR", "JAX_COORDINATOR_ADDRESS"),
       "num_processes": ("CUZK_NUM_PROCESSES", "JAX_NUM_PROCESSES"),
       "process_id": ("CUZK_PROCESS_ID", "JAX_PROCESS_ID")}
PROOF_BYTES = 192
MESSAGE_BYTES = 2048
DEFAULT_TIMEOUT_S = 300.0


class DistributedError(CuzkError, RuntimeError):
    """A multi-process run could not start or finish: coordinator unreachable, processes missing, a process failed."""


@dataclasses.dataclass(frozen=True)
class ProcessConfig:
    """One process of a multi-process run.

    ``coordinator``: ``"host:port"`` of process 0's coordination service (every process gives the same);
    ``num_processes``: how many processes take part; ``process_id``: this one, ``0 .. num_processes - 1``;
    ``local_device_ids``: the local devices this process claims (one process per GPU: ``(i,)``; None: all);
    ``timeout_s``: deadline for joining (and for JAX's heartbeat: a peer silent this long is dead).
    """

    coordinator: str
    num_processes: int
    process_id: int
    local_device_ids: tuple | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self):
        host, port = _split_address(self.coordinator)
        del host, port
        if not isinstance(self.num_processes, int) or self.num_processes < 1:
            raise BadInput(f"num_processes must be a positive int, got {self.num_processes!r}")
        if not isinstance(self.process_id, int) or not 0 <= self.process_id < self.num_processes:
            raise BadInput(f"process_id must be in 0..{self.num_processes - 1}, got {self.process_id!r}")
        if not self.timeout_s > 0:
            raise BadInput(f"timeout must be > 0 seconds, got {self.timeout_s!r}")

    @classmethod
    def resolve(cls, coordinator: str | None = None, num_processes: int | None = None,
                process_id: int | None = None, local_device_ids=None,
                timeout_s: float = DEFAULT_TIMEOUT_S, environ=None) -> "ProcessConfig | None":
        """The config from arguments (flags), else the environment (``CUZK_COORDINATOR`` / ``CUZK_NUM_PROCESSES``
        / ``CUZK_PROCESS_ID``, or JAX's ``JAX_COORDINATOR_ADDRESS`` / ``JAX_NUM_PROCESSES`` / ``JAX_PROCESS_ID``);
        None when no coordinator is given anywhere (a single-process run). :class:`BadInput` names what is
        missing or malformed."""
        environ = os.environ if environ is None else environ
        given = {"coordinator": coordinator or None, "num_processes": num_processes, "process_id": process_id}
        for key, names in ENV.items():
            if given[key] is None:
                given[key] = next((environ[n] for n in names if environ.get(n)), None)
        if given["coordinator"] is None:
            if given["num_processes"] not in (None, 1, "1") or given["process_id"] not in (None, 0, "0"):
                raise BadInput("num_processes / process_id given without a coordinator address (--coordinator or "
                               "CUZK_COORDINATOR=host:port)")
            return None
        for key in ("num_processes", "process_id"):
            value = given[key]
            if value is None:
                raise BadInput(f"a multi-process run needs {key} (--{key} or {ENV[key][0]})")
            try:
                given[key] = int(value)
            except (TypeError, ValueError):
                raise BadInput(f"{key} must be an integer, got {value!r}") from None
        if isinstance(local_device_ids, str):
            local_device_ids = [int(x) for x in local_device_ids.split(",") if x.strip()] or None
        ids = tuple(local_device_ids) if local_device_ids else None
        return cls(given["coordinator"], given["num_processes"], given["process_id"], ids, float(timeout_s))


def _split_address(address) -> tuple[str, int]:
    if not isinstance(address, str) or ":" not in address:
        raise BadInput(f"coordinator address must be host:port, got {address!r}")
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"coordinator address must be host:port with a port in 1..65535, got {address!r}")
    return host, int(port)


def _wait_for_coordinator(address: str, deadline: float) -> None:
    """Until ``deadline``: try a TCP connection to the coordinator (closed at once; a reachability probe)."""
    host, port = _split_address(address)
    last: Exception | None = None
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(2.0, deadline - time.monotonic()))):
                return
        except OSError as e:  # refused (not started yet), unresolvable, unreachable
            last = e
        if time.monotonic() >= deadline:
            raise DistributedError(f"coordinator {address} did not accept a connection within the timeout "
                                   f"({last.strerror if isinstance(last, OSError) and last.strerror else last}); "
                                   f"is process 0 running there, and the address reachable from this host?")
        time.sleep(0.2)


def _check_bindable(address: str) -> None:
    _, port = _split_address(address)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as e:
            raise DistributedError(f"process 0 cannot serve the coordinator on port {port} ({e.strerror or e}); "
                                   f"pick a free port") from None


_STATE: dict = {}
_STATE_LOCK = threading.Lock()


def initialize(config: ProcessConfig) -> None:
    """``jax.distributed.initialize`` for ``config``, before any other JAX call of this process (module docstring
    for the checks and the deadline). Selects JAX's gloo CPU collectives first (CPU processes need them for the
    gather; other platforms ignore the setting). Calling it again with the same config does nothing."""
    import jax

    with _STATE_LOCK:
        if "config" in _STATE:
            if _STATE["config"] != config:
                raise DistributedError(f"jax.distributed already initialized with {_STATE['config']}")
            return
        deadline = time.monotonic() + config.timeout_s
        if config.process_id == 0:
            if config.num_processes > 1:
                _check_bindable(config.coordinator)
        else:
            _wait_for_coordinator(config.coordinator, deadline)
        try:
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        except (AttributeError, KeyError, ValueError):  # a JAX whose CPU collectives need no choosing
            pass
        done: dict = {}
        kw = dict(coordinator_address=config.coordinator, num_processes=config.num_processes,
                  process_id=config.process_id,
                  initialization_timeout=int(config.timeout_s) + 60,  # XLA's own (fatal) deadline comes later
                  heartbeat_timeout_seconds=max(10, int(config.timeout_s)))
        if config.local_device_ids is not None:
            kw["local_device_ids"] = list(config.local_device_ids)

        def start():
            try:
                jax.distributed.initialize(**kw)
                # The backend's start is itself a collective (every process publishes its devices); do it now,
                # under this deadline, not inside the first computation (where one process may hold a file lock
                # another waits for -- a deadlock that ends in XLA's timeout).
                jax.devices()
            except BaseException as e:  # noqa: BLE001 -- reported by the caller's thread
                done["error"] = e
            done["ok"] = True

        t = threading.Thread(target=start, name="jax-distributed-init", daemon=True)
        t.start()
        t.join(timeout=max(0.0, deadline - time.monotonic()))
        if "ok" not in done:
            raise DistributedError(f"process {config.process_id}: not all {config.num_processes} processes joined "
                                   f"the coordinator {config.coordinator} within {config.timeout_s:g} s")
        if "error" in done:
            raise DistributedError(f"process {config.process_id}: jax.distributed.initialize failed: "
                                   f"{done['error']}") from done["error"]
        _STATE["config"] = config


# ---------------------------------------------------------------------------------------------------------------
# Proving a stream of sectors over the processes
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class GatheredSector:
    """One sector gathered on process 0: proofs and public inputs in partition order; ``processes[p]``: which
    process proved partition ``p``. Attribute names match :class:`cuzk_jax.groth16.sector.SectorResult`."""

    sector: int
    proofs: list
    public_inputs: list
    processes: list
    timings: object
    synthesis_s: float = 0.0
    verified: bool | None = None

    def proof_bytes(self) -> bytes:
        from cuzk_jax.groth16.data_structures import proofs_to_bytes

        return proofs_to_bytes(self.proofs)


@dataclasses.dataclass
class DistributedResult:
    """What :func:`prove_sectors` returns on every process: ``sectors`` (process 0: every sector, verified;
    the others: empty), this process's index and count, the (sector, partition) items it proved, its local proving
    wall time, per-local-device busy seconds, and the gather time."""

    sectors: list
    process_id: int
    num_processes: int
    items: list
    local_s: float
    busy_s: list
    gather_s: float


def _barrier(name: str, timeout_s: float) -> None:
    """Wait (up to ``timeout_s``) until every process reaches this point: the coordination service's barrier of
    ``jax.distributed`` (its runtime client; nothing in a single-process run). Run before each collective, since
    the CPU collectives give a late peer only a fixed 30 s before failing, while key loading or an uneven share of
    partitions can keep processes apart for much longer."""
    try:
        from jax._src import distributed as jax_distributed  # the client jax.distributed.initialize made
    except ImportError:  # pragma: no cover - a JAX that moved it: rely on the collective's own wait
        return
    client = getattr(jax_distributed.global_state, "client", None)
    if client is None:
        return
    with _STATE_LOCK:
        n = _STATE["barriers"] = _STATE.get("barriers", 0) + 1  # the same sequence on every process
    try:
        client.wait_at_barrier(f"cuzk_jax/{n}/{name}", int(timeout_s * 1000))
    except Exception as e:  # noqa: BLE001 -- XlaRuntimeError / JaxRuntimeError, by JAX version
        raise DistributedError(f"the processes did not all reach '{name}' within {timeout_s:g} s "
                               f"({' '.join(str(e).split())[:300]})") from None


def assign(num_items: int, num_processes: int, process_id: int) -> range:
    """The contiguous chunk of ``range(num_items)`` that process ``process_id`` proves (sizes differ by <= 1)."""
    from .multidevice import split

    return split(num_items, num_processes)[process_id]


def _fingerprint(pk) -> np.ndarray:
    return np.frombuffer(hashlib.sha256(pk.vk.to_bytes()).digest()[:16], np.uint8).copy()


def _message(exc: BaseException) -> np.ndarray:
    raw = f"{type(exc).__name__}: {exc}".encode()[:MESSAGE_BYTES]
    out = np.zeros(MESSAGE_BYTES, np.uint8)
    out[:len(raw)] = np.frombuffer(raw, np.uint8)
    return out


def _text(row: np.ndarray) -> str:
    return bytes(row).rstrip(b"\0").decode(errors="replace")


def prove_sectors(circuit, pk, sectors: Sequence[int], partitions: int = 10, *, engine=None, mode: str = "per_device",
                  devices=None, randomness: Callable[[int, int], tuple[int, int]] | None = None,
                  verify: bool = True, timeout_s: float | None = None, gather_timeout_s: float = 86_400.0,
                  **engine_overrides) -> DistributedResult:
    """Prove ``sectors`` (``partitions`` each; partition ``p`` of sector ``k`` is ``circuit.sample_inputs(p, k)``)
    over every process of an initialized run (:func:`initialize`; a single process works too) -- see the module
    docstring. Every process must call it (process 0's ``sectors`` and ``partitions`` are the ones used).

    ``engine``: this process's local prover (a :class:`~cuzk_jax.engine.core.Engine` or
    :class:`~cuzk_jax.engine.multidevice.MultiDeviceEngine` with the key preloaded); default: a
    ``MultiDeviceEngine(mode, devices, **engine_overrides)`` over the local devices, shut down on return.
    ``randomness(sector, partition) -> (r, s)``: TESTS ONLY (deterministic proofs); default the OS CSPRNG.
    ``verify=False`` skips process 0's pairing check (benchmarks; the engines still verify their own proofs
    unless told not to). ``timeout_s`` (default: the :class:`ProcessConfig`'s) bounds the wait for the plan,
    ``gather_timeout_s`` the wait for the slowest process's share before the gather. Raises
    :class:`DistributedError` (or the failing process's own error, on that process) when any process failed,
    :class:`~cuzk_jax.errors.ProofRejected` when a gathered proof does not verify."""
    import jax
    from jax.experimental import multihost_utils as mh

    from cuzk_jax.groth16 import verifier
    from cuzk_jax.groth16.data_structures import Proof

    from .multidevice import MultiDeviceEngine

    n, me = jax.process_count(), jax.process_index()
    if timeout_s is None:
        timeout_s = _STATE["config"].timeout_s if "config" in _STATE else DEFAULT_TIMEOUT_S
    # 1. the plan, from process 0
    _barrier("plan", timeout_s)
    plan = np.asarray(mh.broadcast_one_to_all(np.array([len(sectors), int(partitions)], np.int32)))
    count, partitions = int(plan[0]), int(plan[1])
    mine_sectors = np.zeros(count, np.int32)
    if me == 0:
        mine_sectors[:] = np.asarray(list(sectors), np.int64)
    sectors = [int(k) for k in np.asarray(mh.broadcast_one_to_all(mine_sectors))]
    if partitions < 1 or count < 1:
        raise BadInput(f"prove_sectors: need at least one sector and one partition, got {count} x {partitions}")
    # 2. this process's chunk
    items = [(k, p) for k in sectors for p in range(partitions)]
    chunks = [assign(len(items), n, i) for i in range(n)]
    mine = [items[i] for i in chunks[me]]
    width = max(len(c) for c in chunks)
    proofs_local = np.zeros((width, PROOF_BYTES), np.uint8)
    status, error = np.zeros(2, np.int32), np.zeros(MESSAGE_BYTES, np.uint8)
    local_error: BaseException | None = None
    busy: list = []
    t0 = time.perf_counter()
    own = engine is None
    try:
        if own and mine:
            engine = MultiDeviceEngine(mode, devices, **engine_overrides)
            engine.preload(circuit, pk)
        futures = []
        for k in dict.fromkeys(k for k, _ in mine):  # one job per sector (its partitions in this chunk)
            ps = [p for kk, p in mine if kk == k]
            rs = None if randomness is None else [randomness(k, p) for p in ps]
            futures.append(engine.submit(circuit, [circuit.sample_inputs(p, k) for p in ps], randomness=rs))
        got = [proof for f in futures for proof in f.result().proofs]
        for i, proof in enumerate(got):
            proofs_local[i] = np.frombuffer(proof.to_bytes(), np.uint8)
        status[1] = len(got)
    except Exception as e:  # noqa: BLE001 -- every process must still reach the gather
        local_error = e
        status[0] = 1
        error = _message(e)
    finally:
        if mine and engine is not None and hasattr(engine, "busy_seconds"):
            busy = engine.busy_seconds(since=t0)
        if own and engine is not None:
            engine.shutdown(wait=local_error is None, cancel_pending=local_error is not None)
    local_s = time.perf_counter() - t0
    # 3. gather everything to every process (process 0 uses it)
    _barrier("gather", gather_timeout_s)
    t1 = time.perf_counter()
    all_status = np.asarray(mh.process_allgather(status))
    all_errors = np.asarray(mh.process_allgather(error))
    all_keys = np.asarray(mh.process_allgather(_fingerprint(pk)))
    all_proofs = np.asarray(mh.process_allgather(proofs_local))
    gather_s = time.perf_counter() - t1
    failed = [i for i in range(n) if all_status[i, 0]]
    if failed:
        if local_error is not None:
            raise local_error
        i = failed[0]
        raise DistributedError(f"process {i} failed: {_text(all_errors[i])}")
    other_keys = [i for i in range(n) if not np.array_equal(all_keys[i], all_keys[0])]
    if other_keys:
        raise DistributedError(f"process(es) {other_keys} hold a different verifying key than process 0 (keys must be "
                               f"the same file on every host: copy process 0's key cache)")
    result = DistributedResult(sectors=[], process_id=me, num_processes=n, items=mine, local_s=local_s, busy_s=busy,
                               gather_s=gather_s)
    verdict = np.zeros(2, np.int32)  # [bad sector count, first bad sector index]
    why = ""
    if me == 0:
        by_item = {}
        for i, chunk in enumerate(chunks):
            for j, item in enumerate(items[c] for c in chunk):
                by_item[item] = (i, Proof.from_bytes(bytes(all_proofs[i, j])))
        from cuzk_jax.groth16.prover import Timings

        for k in sectors:
            publics = [circuit.public_inputs(circuit.sample_inputs(p, k)) for p in range(partitions)]
            got = [by_item[(k, p)] for p in range(partitions)]
            res = GatheredSector(sector=k, proofs=[g[1] for g in got], public_inputs=publics,
                                 processes=[g[0] for g in got],
                                 timings=Timings(phases={"prove_local": local_s, "gather": gather_s}, total=local_s,
                                                 partitions=partitions))
            if verify:
                res.verified = bool(verifier.verify_batch(pk.vk, publics, res.proofs))
                if not res.verified and not verdict[0]:
                    bad = [p for p, ok in enumerate(verifier.verify_each(pk.vk, publics, res.proofs)) if not ok]
                    why = (f"sector {k}: the proof(s) of partition(s) {bad} (made by process(es) "
                           f"{sorted({res.processes[p] for p in bad})}) do not verify; nothing is returned")
                verdict[0] += not res.verified
            result.sectors.append(res)
    _barrier("verdict", gather_timeout_s)  # process 0 verified while the others waited
    verdict = np.asarray(mh.broadcast_one_to_all(verdict))
    if verdict[0]:
        raise ProofRejected(why or f"{int(verdict[0])} gathered sector(s) did not verify on process 0")
    return result
