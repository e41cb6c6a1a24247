"""Several local devices behind one submit call: one engine per device, or one engine over a sharded batch.

cuzk runs one proving pipeline per GPU; this project also has the data-parallel alternative, a batch whose
partition axis is sharded over a mesh of devices (:mod:`cuzk_jax.groth16.sharding`). :class:`MultiDeviceEngine`
offers both behind the :class:`~cuzk_jax.engine.core.Engine` interface (``submit``, ``submit_sector``,
``preload``, ``warm_up``, ``status``, ``events``, ``shutdown``, context manager), selected by ``mode``:

* ``"per_device"`` (:data:`PER_DEVICE`) -- one :class:`~cuzk_jax.engine.core.Engine` per device, each with a
  :class:`~cuzk_jax.engine.backends.DeviceBackend` over that device alone, so its resident keys are committed to
  that device (a replica per device, each under that engine's ``key_budget_bytes``) and its own collector, device
  and finisher threads keep that device busy independently of the others. A job of ``P`` partitions is split into
  contiguous chunks, one per engine (partition order kept; chunks differ in size by at most one), so one sector's
  partitions and those of a stream of sectors spread over every device; the job's future completes when every
  chunk has, with the proofs in partition order. The synthesis workers are shared out between the engines.
* ``"sharded"`` (:data:`SHARDED`) -- one engine whose backend shards each batch over a mesh of all the devices
  (``shard_map`` over the partition axis, the key replicated on every device). Batches are rounded up to a multiple
  of the device count; every device runs every batch, so all devices share one busy time.

Which one is faster depends on the device and batch sizes (``cuzk-bench --op=multigpu`` measures both); the two
make identical proofs for the same ``(r, s)`` (tested: ``tests/test_distributed.py``). With one device both are a
single plain engine.

Per-device busy time (:meth:`MultiDeviceEngine.busy_seconds`) is the sum of the device-lane events of each
engine's timeline (the phases the device thread timed, each ended by ``block_until_ready``).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import itertools
import threading
from typing import Sequence

import jax

from cuzk_jax.errors import BadInput, ProofRejected, Unsatisfied

from . import synthesis
from .backends import DeviceBackend
from .core import Engine, EngineConfig, JobResult, ProofFuture
from .timeline import Event

PER_DEVICE = "per_device"
SHARDED = "sharded"
DEVICE_MODES = (PER_DEVICE, SHARDED)


def select_devices(spec=None) -> list:
    """Local devices from ``spec``: ``None``/``""``/``"all"`` -> every local device; ``"0,1"`` or ``[0, 1]`` ->
    those indices into ``jax.local_devices()``; a list of devices -> itself. :class:`BadInput` names an index
    out of range or repeated."""
    local = jax.local_devices()
    if spec is None or (isinstance(spec, str) and spec.strip() in ("", "all")):
        return list(local)
    if isinstance(spec, str):
        try:
            spec = [int(x) for x in spec.split(",") if x.strip()]
        except ValueError:
            raise BadInput(f"devices {spec!r}: expected comma-separated local device indices, e.g. 0,1") from None
    spec = list(spec)
    if spec and all(isinstance(d, jax.Device) for d in spec):
        return spec
    if not spec or not all(isinstance(i, int) and not isinstance(i, bool) for i in spec):
        raise BadInput(f"devices {spec!r}: expected local device indices or devices")
    bad = [i for i in spec if not 0 <= i < len(local)]
    if bad or len(set(spec)) != len(spec):
        raise BadInput(f"devices {spec}: {len(local)} local device(s) ({', '.join(map(str, local))}); indices must "
                       f"be distinct and in 0..{len(local) - 1}")
    return [local[i] for i in spec]


def split(n: int, parts: int) -> list[range]:
    """``range(n)`` in ``parts`` contiguous chunks whose sizes differ by at most one (the first ones larger)."""
    q, r = divmod(n, parts)
    out, start = [], 0
    for k in range(parts):
        size = q + (k < r)
        out.append(range(start, start + size))
        start += size
    return out


class _Joined(ProofFuture):
    """The future of a job split over several engines: done when every part is; cancelling it cancels them."""

    def __init__(self, job_id: int, parts: list, sector, offsets: list):
        super().__init__(job_id)
        self.parts = parts
        self._offsets = {id(f): o for f, o in zip(parts, offsets)}
        self._sector = sector
        self._left = len(parts)
        self._lock = threading.Lock()
        for fut in parts:
            fut.add_done_callback(self._part_done)

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        for fut in self.parts:  # their callbacks see this future done and leave it cancelled
            fut.cancel()
        return True

    def _part_done(self, fut) -> None:
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if self.done():
            return
        if fut.cancelled():
            exc = cf.CancelledError("a part of the job was cancelled")
        else:
            exc = fut.exception()
        if exc is not None:  # the first failing part fails the job; the other parts are withdrawn
            for other in self.parts:
                if other is not fut:
                    other.cancel()
            _settle(self, exc=_renumbered(exc, self._offsets[id(fut)]))
            return
        if last:
            _settle(self, result=_join([f.result() for f in self.parts], self.job_id, self._sector))


def _renumbered(exc: BaseException, offset: int) -> BaseException:
    """The error of a chunk with its partition numbers made the job's (chunk partition ``i`` is job partition
    ``offset + i``): :class:`~cuzk_jax.errors.Unsatisfied` (``partition``) and the engine's ProofRejected
    (``partitions``); other errors unchanged."""
    if not offset:
        return exc
    if isinstance(exc, Unsatisfied) and exc.partition is not None:
        new = Unsatisfied(exc.index, exc.name, exc.partition + offset)
        new.__cause__ = exc
        return new
    if isinstance(exc, ProofRejected) and getattr(exc, "partitions", None):
        parts = [p + offset for p in exc.partitions]
        new = ProofRejected(f"job: the proof of partition(s) {parts} does not verify (the prover made an invalid "
                            f"proof; it is not returned)")
        new.partitions, new.__cause__ = parts, exc
        return new
    return exc


def _settle(fut: cf.Future, result=None, exc: BaseException | None = None) -> None:
    try:
        if fut.set_running_or_notify_cancel():
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)
    except (cf.InvalidStateError, RuntimeError):
        pass  # completed or cancelled meanwhile


def _join(results: list[JobResult], job_id: int, sector) -> JobResult:
    """One :class:`JobResult` from the results of a job's chunks, in chunk (= partition) order: proofs and public
    inputs concatenated; ``synthesis`` and device phases summed over the chunks (device seconds of different
    devices), ``total`` the slowest chunk's latency; ``verified`` True only if every chunk was verified."""
    first = results[0]
    phases: dict = {}
    for r in results:
        for k, v in r.timings.phases.items():
            phases[k] = phases.get(k, 0.0) + v
    timings = dataclasses.replace(first.timings, phases=phases, total=max(r.timings.total for r in results),
                                  partitions=sum(len(r.proofs) for r in results))
    verified = None if any(r.verified is None for r in results) else all(r.verified for r in results)
    return JobResult(job_id=job_id, sector=sector, proofs=[p for r in results for p in r.proofs],
                     public_inputs=[x for r in results for x in r.public_inputs], timings=timings,
                     synthesis_s=sum(r.synthesis_s for r in results),
                     batches=[(i, b) for i, r in enumerate(results) for b in r.batches], verified=verified)


class MultiDeviceEngine:
    """Proof jobs over several local devices (module docstring).

    ``MultiDeviceEngine(mode="per_device", devices=None, config=None, *, key_loader=None, **overrides)``:
    ``devices`` as :func:`select_devices` takes them (default: every local device); ``config`` / ``overrides``:
    :class:`~cuzk_jax.engine.core.EngineConfig` fields for every engine (``max_batch`` is per engine, i.e. per
    device in ``per_device`` mode; ``synthesis_workers`` is the total, shared out between the engines; ``devices``
    must not be given there).
    """

    def __init__(self, mode: str = PER_DEVICE, devices=None, config: EngineConfig | None = None, *,
                 key_loader=None, **overrides):
        if mode not in DEVICE_MODES:
            raise BadInput(f"device mode must be one of {DEVICE_MODES}, got {mode!r}")
        config = dataclasses.replace(config or EngineConfig(), **overrides)
        if config.devices is not None:
            raise BadInput("MultiDeviceEngine: give devices= to it, not in the engine config")
        self.devices = select_devices(devices)
        self.mode = mode if len(self.devices) > 1 else PER_DEVICE  # one device: one plain engine either way
        workers = config.synthesis_workers or synthesis.default_workers()
        self._ids = itertools.count()
        if self.mode == SHARDED:
            backend = DeviceBackend(self.devices, config.prover, config.sync_phases, staged_ahead=config.prefetch)
            self.engines = [Engine(dataclasses.replace(config, synthesis_workers=workers), backend=backend,
                                   key_loader=key_loader)]
        else:
            n = len(self.devices)
            shares = [len(c) or 1 for c in split(max(workers, n), n)]
            self.engines = []
            try:
                for dev, w in zip(self.devices, shares):
                    backend = DeviceBackend([dev], config.prover, config.sync_phases, staged_ahead=config.prefetch)
                    self.engines.append(Engine(dataclasses.replace(config, synthesis_workers=w), backend=backend,
                                               key_loader=key_loader))
            except BaseException:
                self.shutdown(wait=False)
                raise
        self.config = config

    # -- context manager ---------------------------------------------------------------------------------------------
    def __enter__(self) -> "MultiDeviceEngine":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.shutdown(wait=exc_type is None, cancel_pending=exc_type is not None)

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    @property
    def max_batch(self) -> int:
        """The largest device batch of one engine (per device in ``per_device`` mode, over the mesh if sharded)."""
        return self.engines[0].max_batch

    # -- keys --------------------------------------------------------------------------------------------------------
    def preload(self, circuit, pk=None) -> None:
        """Make the circuit's key resident on every device (one replica per engine, or one over the mesh)."""
        for eng in self.engines:
            eng.preload(circuit, pk)

    def warm_up(self, circuits=()) -> None:
        for eng in self.engines:
            eng.warm_up(circuits)

    # -- submission --------------------------------------------------------------------------------------------------
    def submit(self, circuit, inputs: Sequence[dict] | None = None, *, witnesses: Sequence | None = None,
               sector: int | None = None, partitions: int | None = None, randomness=None,
               priority: str | None = None) -> ProofFuture:
        """As :meth:`Engine.submit <cuzk_jax.engine.core.Engine.submit>` (``priority`` included: every chunk of
        the job keeps its class); in ``per_device`` mode the job's partitions are split over the engines (module
        docstring)."""
        if len(self.engines) == 1:
            return self.engines[0].submit(circuit, inputs, witnesses=witnesses, sector=sector,
                                          partitions=partitions, randomness=randomness, priority=priority)
        given = [x is not None for x in (inputs, witnesses, sector)]
        if sum(given) != 1:
            raise ValueError("submit: give exactly one of inputs=, witnesses= or sector= (with partitions=)")
        if sector is not None:
            if not isinstance(partitions, int) or partitions < 1:
                raise ValueError(f"submit: partitions must be a positive int with sector=, got {partitions!r}")
            inputs = [circuit.sample_inputs(p, sector) for p in range(partitions)]  # what Engine does per partition
        elif partitions is not None:
            raise ValueError("submit: partitions= is only used with sector=")
        items = list(inputs if inputs is not None else witnesses)
        if not items:
            raise ValueError("submit: a job needs at least one partition")
        if randomness is not None:
            randomness = list(randomness)
            if len(randomness) != len(items):
                raise ValueError(f"submit: {len(items)} partitions but {len(randomness)} (r, s) pairs")
        order = sorted(range(len(self.engines)), key=self._load)  # least loaded first: it takes the larger chunk
        parts, offsets = [], []
        try:
            for chunk, k in zip(split(len(items), len(self.engines)), order):
                if not len(chunk):
                    continue
                offsets.append(chunk.start)
                rs = None if randomness is None else randomness[chunk.start:chunk.stop]
                key = "inputs" if inputs is not None else "witnesses"
                parts.append(self.engines[k].submit(circuit, **{key: items[chunk.start:chunk.stop]}, randomness=rs,
                                                    priority=priority))
        except BaseException:
            for fut in parts:
                fut.cancel()
            raise
        return _Joined(next(self._ids), parts, sector, offsets)

    def submit_sector(self, circuit, sector: int, partitions: int = 10, randomness=None,
                      priority: str | None = None) -> ProofFuture:
        return self.submit(circuit, sector=sector, partitions=partitions, randomness=randomness, priority=priority)

    def _load(self, k: int) -> int:
        q = self.engines[k].status()["queue"]
        return q["synthesizing"] + q["ready"]

    def cancel(self, job) -> bool:
        return job.cancel()

    def pause(self) -> None:
        for eng in self.engines:
            eng.pause()

    def resume(self) -> None:
        for eng in self.engines:
            eng.resume()

    # -- measurements ------------------------------------------------------------------------------------------------
    def events(self) -> list[Event]:
        """Every engine's timeline events on one clock (seconds since the first engine started); lanes of engine
        ``k`` are prefixed ``dev<k>/`` when there are several engines."""
        t0 = min(eng.t0 for eng in self.engines)
        out = []
        for k, eng in enumerate(self.engines):
            pre = f"dev{k}/" if len(self.engines) > 1 else ""
            off = eng.t0 - t0
            out += [Event(pre + e.lane, e.name, e.start + off, e.end + off, e.batch, e.job) for e in eng.events()]
        return sorted(out, key=lambda e: e.start)

    def busy_seconds(self, since: float | None = None, until: float | None = None) -> list[float]:
        """Seconds each device spent in device phases between the ``time.perf_counter`` instants ``since`` and
        ``until`` (default: all of it), one entry per device; sharded: the mesh's busy time, the same for all."""
        busy = []
        for eng in self.engines:
            lo = -float("inf") if since is None else since - eng.t0
            hi = float("inf") if until is None else until - eng.t0
            busy.append(sum(max(0.0, min(e.end, hi) - max(e.start, lo)) for e in eng.events() if e.lane == "device"))
        return busy * len(self.devices) if self.mode == SHARDED else busy

    def status(self) -> dict:
        """Aggregate counts (jobs, proofs, batches) and every engine's own status under ``"engines"``."""
        per = [eng.status() for eng in self.engines]
        return {"mode": self.mode, "devices": [str(d) for d in self.devices],
                "proofs": sum(s["proofs"] for s in per), "batches": sum(s["batches"] for s in per),
                "jobs_done": sum(s["jobs"]["done"] for s in per), "jobs_failed": sum(s["jobs"]["failed"] for s in per),
                "engines": per}

    # -- shutdown ----------------------------------------------------------------------------------------------------
    def shutdown(self, wait: bool = True, cancel_pending: bool = False, timeout: float | None = None) -> None:
        for eng in getattr(self, "engines", []):
            eng.shutdown(wait=wait, cancel_pending=cancel_pending, timeout=timeout)
