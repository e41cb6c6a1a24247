"""The pipelined proving engine: job queue, CPU synthesis workers, cross-sector batch collector, device and
finisher threads (cuzk's engine: keep the device busy).

Data flow (one arrow = one hand-off; every stage runs concurrently with the others)::

    submit(job) --> synthesis pool (processes or threads; one task per partition, or spans of one over several workers)
                      --> ready partitions, per circuit
                            --> collector thread: forms a batch (max size / max wait), gets the resident key,
                                stacks z and copies it to the device(s)      [batch k+1 staged while k runs]
                                (Python-int witnesses as canonical limbs, converted to Montgomery on the device)
                                  --> device thread: evaluate, H, five MSMs  [the accelerator]
                                        --> finisher thread: r/s randomisation on the host, proofs to jobs

* **Batching** (cuzk's batch-all-partitions and cross-sector BatchCollector): ready partitions of *any* jobs with the
  same circuit go into one device batch. A batch is formed when ``max_batch`` partitions are ready, when nothing more
  of that circuit is being synthesized (no reason to wait), when the oldest ready partition has waited ``max_wait_s``
  (a ceiling, see :class:`EngineConfig`), or -- ``fill="predict"``, the default -- when waiting would not fill it: the
  engine estimates when each partition of that circuit still in synthesis will be ready (its running mean synthesis
  time per circuit) and when the device will be free (its mean batch time per circuit), and waits only for partitions
  expected before the device could run the batch anyway, or within one batch time (running a short batch now and the
  rest later costs a whole extra batch); a partition overdue by more than one mean synthesis time is no longer
  expected. ``fill="wait"`` is the fixed-wait rule alone. Batches are padded (with copies of a real partition, whose
  results are discarded) to one of ``batch_sizes`` (default: just ``max_batch``), so the device runs a handful of
  compiled shapes and never recompiles mid-run; sizes are rounded up to a multiple of the device count (sharding). A
  batch is only formed when the device can take it soon (at most ``prefetch`` staged batches wait), so a busy device
  lets batches fill. A running batch stops counting once its witness is dead on the device (the device backend
  calls back before its H MSM), so the next batch's copy overlaps that MSM -- with ``prefetch=0`` too, at no memory
  beyond one batch's (the memory plan counts the ``prefetch`` staged batches, ``DeviceBackend(staged_ahead=)``).
* **Priorities** (cuzk's classes, :mod:`cuzk_jax.priorities`): every job has a class (``submit(priority=)``,
  default the circuit's ``PRIORITY_CLASS``) and an urgency key = submission time + the class's delay
  (``priority_delays_s``; default WinningPoSt 0 s, WindowPoSt 60 s, PoRep 600 s, SnapDeals 1200 s): a lower key is
  more urgent. Synthesis takes backlog partitions in key order, and at each batch boundary the collector forms the
  batch of the circuit whose most urgent ready partition has the lowest key, taking that circuit's partitions in key
  order (a more urgent class whose batch would wait to fill goes short rather than lose the boundary) -- so a
  WinningPoSt job overtakes queued bulk work at the next batch boundary (the batch running and the
  ``prefetch`` staged ones finish first), batches still hold one circuit's partitions, and bulk work is never
  starved: a PoRep job waits at most 600 s (its delay) behind a stream of newer WinningPoSt jobs (aging).
* **Faults**: a partition whose synthesis raises fails its job with that exception; a witness that does not
  satisfy the R1CS fails its job with :class:`~cuzk_jax.circuits.cs.Unsatisfied` (partition and constraint named;
  detected per partition in the batch's evaluate phase, so batch-mates are unaffected); an exception in a device
  phase fails the jobs of that batch only. Every other job completes. A synthesis worker process that dies (OOM
  killer, signal, exit) breaks its ``ProcessPoolExecutor`` and every task in it: the engine replaces the pool and
  retries those partitions once each, one at a time alone in the pool (the pool holds at most workers + 1 tasks,
  the rest wait in the engine's backlog, so few are affected); a partition whose worker dies again alone is the
  culprit and fails its job with :class:`WorkerDied` (job, partition and cause named). The bystanders complete.
* **Verify before return** (``verify``, on by default): each job's proofs are pairing-checked before its future
  completes; a proof that does not verify fails the job with :class:`~cuzk_jax.errors.ProofRejected` (partition
  named) -- an invalid proof never leaves the engine.
* **Cancel**: ``future.cancel()`` (or :meth:`Engine.cancel`) withdraws a job at any point before it completes:
  queued synthesis is cancelled, ready partitions are dropped, in-flight results are discarded.
* **Shutdown**: :meth:`Engine.shutdown` (or leaving the ``with`` block) waits for submitted jobs (or cancels them),
  stops the threads and the pool; a job that cannot complete any more gets a ``RuntimeError`` -- no future is ever
  left pending.
* **Witness form**: each synthesized partition's ``z`` is Fr limbs in the form that costs its worker least
  (:func:`cuzk_jax.engine.synthesis.native_z`: canonical for Python-int witnesses, Montgomery for the porep_like
  packed ones), and a batch is staged in one form (``backend.stage(resident, z, montgomery)``: the device converts a
  canonical batch with one ``to_mont``). A batch whose partitions come in both forms takes the majority's form
  (canonical on a tie) and the other partitions are converted on the host (:func:`_stack_slots`); the proofs are
  the same either way.

Timing: every phase is recorded on a :class:`~cuzk_jax.engine.timeline.Timeline` (synthesis per worker, staging,
device phases, finishing), and :meth:`Engine.status` reports queue depths, per-phase totals, batch sizes and proofs
per minute.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import dataclasses
import heapq
import inspect
import itertools
import math
import logging
import queue
import sys
import threading
import time
from typing import Sequence

import jax
import numpy as np

from cuzk_jax import priorities
from cuzk_jax.errors import BadInput, CuzkError, ProofRejected
from cuzk_jax.reference.constants import R
from cuzk_jax.groth16 import pipeline, prover
from cuzk_jax.groth16.data_structures import proofs_to_bytes

from . import synthesis
from .backends import DeviceBackend
from .keys import KeyManager
from .timeline import Timeline

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------------------
# Configuration and results
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class EngineConfig:
    """Engine settings (see the module docstring).

    max_batch: largest device batch, in partitions. batch_sizes: the padded batch shapes allowed (default
    ``(max_batch,)``: one compiled shape; when given, its largest entry is the maximum batch). max_wait_s: the
    longest the oldest ready partition may wait for its batch to fill (None: 0.5 s, except that with
    ``fill="predict"`` and estimates at hand the ceiling is two mean synthesis times plus one mean batch time, so a
    task that never finishes cannot hold a batch back for long). fill: ``"predict"`` (form a batch early when
    the partitions still in synthesis are not expected in time to fill it) or ``"wait"`` (only the fixed wait).
    priority_delays_s: ``{class: seconds}`` added to a job's submission time to give its urgency key (lower is
    served first); classes not named keep the default (:data:`DEFAULT_DELAYS_S`). synthesis: ``"process"`` or
    ``"thread"`` workers; synthesis_workers: their number (default: cores - 1).
    prefetch: batches staged on the device while one runs. key_budget_bytes: LRU limit of resident keys (None: no
    limit). devices / prover / sync_phases: for the default :class:`DeviceBackend`. verify (default True):
    pairing-check each job's proofs (arkworks, one batched check per job) before completing it; a proof that does
    not verify fails its job with :class:`~cuzk_jax.errors.ProofRejected` naming the partition, so no invalid proof
    is ever returned (``JobResult.verified`` True); False (benchmarks) skips it (``verified`` None).
    timeline: record events (``timeline_limit`` max). precompile (default False): when a key is placed (preload or
    first use), compile the device programs of every batch shape now (:meth:`DeviceBackend.precompile
    <cuzk_jax.engine.backends.DeviceBackend.precompile>`), so the first batches do not wait for them; a backend
    without that method ignores it.

    host_budget_bytes (None: no limit): the most witness bytes (``32 * num_vars`` per partition) the engine holds on
    the host at once -- partitions in synthesis, ready ones and those of a batch until it is on the device. A
    partition enters synthesis only when its bytes fit beside the others' (one always may, so work goes on); a job
    whose single partition does not fit is refused at :meth:`Engine.submit` (BadInput). At sector scale (~4 GiB per
    partition) this, not the worker count, is what bounds the host's memory. shared_z_min_bytes: a process
    worker hands a partition at least this large back through a shared-memory file instead of the pool's pipe
    (:func:`cuzk_jax.engine.synthesis.new_shared_file`). split_synthesis (default True): a partition handed back
    that way, of a circuit whose witness comes in spans (``span_units()``: porep_like's challenges), is
    synthesized by several workers at once (:class:`~cuzk_jax.engine.synthesis.SplitSynthesis`; how many:
    :func:`split_ways`): by the workers the backlog would leave idle (a lone sector's first partition).
    """

    max_batch: int = 10
    batch_sizes: tuple | None = None
    max_wait_s: float | None = None
    fill: str = "predict"
    priority_delays_s: dict | None = None
    synthesis: str = "process"
    synthesis_workers: int | None = None
    prefetch: int = 1
    key_budget_bytes: int | None = None
    devices: Sequence | None = None
    prover: object = None  # pipeline.ProverConfig or its text form
    sync_phases: bool = True
    verify: bool = True
    timeline: bool = True
    timeline_limit: int = 200_000
    precompile: bool = False
    host_budget_bytes: int | None = None
    shared_z_min_bytes: int = 64 << 20
    split_synthesis: bool = True

    def sizes(self, num_devices: int) -> tuple[int, ...]:
        """The allowed batch shapes, validated and rounded up to multiples of ``num_devices``."""
        if not isinstance(self.max_batch, int) or self.max_batch < 1:
            raise ValueError(f"max_batch must be a positive int, got {self.max_batch!r}")
        sizes = tuple(self.batch_sizes) if self.batch_sizes else (self.max_batch,)
        if any(not isinstance(s, int) or s < 1 for s in sizes):
            raise ValueError(f"batch_sizes must be positive ints, got {self.batch_sizes!r}")
        if self.max_wait_s is not None and not self.max_wait_s >= 0:
            raise ValueError(f"max_wait_s must be >= 0, got {self.max_wait_s!r}")
        if not isinstance(self.prefetch, int) or self.prefetch < 0:
            raise ValueError(f"prefetch must be an int >= 0, got {self.prefetch!r}")
        if self.fill not in FILL_MODES:
            raise ValueError(f"fill must be one of {FILL_MODES}, got {self.fill!r}")
        if self.host_budget_bytes is not None and (isinstance(self.host_budget_bytes, bool) or not isinstance(
                self.host_budget_bytes, int) or self.host_budget_bytes <= 0):
            raise ValueError(f"host_budget_bytes must be a positive int or None, got {self.host_budget_bytes!r}")
        if isinstance(self.shared_z_min_bytes, bool) or not isinstance(self.shared_z_min_bytes, int) \
                or self.shared_z_min_bytes < 0:
            raise ValueError(f"shared_z_min_bytes must be an int >= 0, got {self.shared_z_min_bytes!r}")
        self.delays()
        return tuple(sorted({-(-s // num_devices) * num_devices for s in sizes}))

    def delays(self) -> dict[str, float]:
        """``{class: delay seconds}`` for every class: the defaults overridden by ``priority_delays_s``."""
        out = dict(DEFAULT_DELAYS_S)
        for name, sec in (self.priority_delays_s or {}).items():
            priorities.check(name)
            if isinstance(sec, bool) or not isinstance(sec, (int, float)) or not (math.isfinite(sec) and sec >= 0):
                raise ValueError(f"priority delay of {name!r} must be a finite number of seconds >= 0, got {sec!r}")
            out[name] = float(sec)
        return out


#: Batch-forming rules (see the module docstring).
FILL_MODES = ("predict", "wait")
#: Default urgency delay per class: a job's key is its submission time plus its class's delay. A bulk job therefore
#: ranks ahead of urgent jobs submitted more than (its delay - theirs) seconds after it: aging, so no starvation.
DEFAULT_DELAYS_S = {"winning_post": 0.0, "window_post": 60.0, "porep": 600.0, "snap_deals": 1200.0}


def check_input_values(values: dict, what: str) -> None:
    """BadInput unless every number in ``values`` (recursively through lists, tuples and dicts) is an int in
    ``[0, r)``: a value >= r would be reduced inside the circuit while the job reported it unreduced as a public
    input, and a float or bool is not a field element."""
    def walk(v, path):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{path}.{k}" if path else str(k))
        elif isinstance(v, (list, tuple)):
            for k, x in enumerate(v):
                walk(x, f"{path}[{k}]")
        elif isinstance(v, bool) or isinstance(v, float):
            raise BadInput(f"{what} {path}: {v!r} is not a field element (an int in [0, r) is)")
        elif isinstance(v, (int, np.integer)) and not 0 <= int(v) < R:
            raise BadInput(f"{what} {path}: {v} is not in [0, r)")

    walk(values, "")


class ProofFuture(cf.Future):
    """A :class:`concurrent.futures.Future` of a :class:`JobResult`; ``job_id`` identifies the job."""

    def __init__(self, job_id: int):
        super().__init__()
        self.job_id = job_id
        self._notify_lock = threading.Lock()
        self._notified = False

    def cancel(self) -> bool:
        """Cancel the job unless it already completed. As ``concurrent.futures`` executors do for a cancelled
        task, the future then moves on to "cancelled and notified" (``set_running_or_notify_cancel``), so
        ``concurrent.futures.wait`` / ``as_completed`` report it done and wake their waiters (a bare
        ``Future.cancel()`` leaves it invisible to them: they only count notified cancellations)."""
        if not super().cancel():
            return False
        with self._notify_lock:
            if not self._notified:
                self._notified = True
                self.set_running_or_notify_cancel()
        return True


@dataclasses.dataclass
class JobResult:
    """A completed job: one proof per partition (in order) and the partitions' public inputs.

    ``timings.phases``: ``synthesis`` (worker seconds summed over the job's partitions), ``queue`` (submission to
    the start of its first device batch), the device phases summed over the batches that carried its partitions
    (shared with their batch-mates), ``finish``; ``timings.total`` is the job's latency (submit to completion).
    Attribute names match :class:`cuzk_jax.groth16.sector.SectorResult` (``sector``, ``proofs``, ``public_inputs``,
    ``timings``, ``synthesis_s``, ``verified``, ``proof_bytes()``), so sector writers accept either.
    """

    job_id: int
    sector: int | None
    proofs: list
    public_inputs: list
    timings: prover.Timings
    synthesis_s: float
    batches: list
    verified: bool | None = None

    def proof_bytes(self) -> bytes:
        return proofs_to_bytes(self.proofs)


# --------------------------------------------------------------------------------------------------------------
# Internal records
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class _Circuit:
    digest: str
    circuit: object
    r1cs: object
    portable: object  # picklable copy sent to synthesis workers
    span_units: int = 0  # circuit.span_units(): > 1 when a partition's synthesis can be split (SplitSynthesis)

    @property
    def z_bytes(self) -> int:
        """Host bytes of one partition's witness limbs (``(8, num_vars)`` uint32)."""
        return 32 * self.r1cs.num_vars


@dataclasses.dataclass(eq=False)
class _Job:
    id: int
    entry: _Circuit
    specs: list
    randomness: list
    future: ProofFuture
    sector: int | None
    submitted: float
    priority: str = priorities.DEFAULT
    key: float = 0.0  # urgency: submitted + the class's delay (lower first)
    proofs: list = None
    publics: list = None
    remaining: int = 0
    state: str = "active"  # active | done | failed | cancelled
    open_synth: set = dataclasses.field(default_factory=set)  # its tasks in the pool (counted in _synthesizing)
    backlog_n: int = 0  # its partitions waiting in the engine's backlog (counted in _synthesizing)
    synth_s: float = 0.0
    phases: dict = dataclasses.field(default_factory=lambda: collections.defaultdict(float))
    batches: list = dataclasses.field(default_factory=list)
    first_device: float | None = None

    @property
    def active(self) -> bool:
        return self.state == "active"


@dataclasses.dataclass(eq=False)
class _Slot:
    job: _Job
    index: int  # partition index within the job
    z: np.ndarray  # uint32 (8, num_vars): Montgomery form if ``montgomery``, else canonical
    ready: float
    montgomery: bool = True
    token: object = None  # its _HostToken: released once z is on the device (or dropped)


@dataclasses.dataclass(eq=False)
class _Batch:
    id: int
    entry: _Circuit
    slots: list
    size: int
    resident: object = None
    staged: object = None
    phases: dict = dataclasses.field(default_factory=dict)


class _HostToken:
    """One partition's share of the engine's host witness budget, from entering synthesis until its ``z`` is on
    the device or dropped. :meth:`release` is idempotent; a token that is garbage collected unreleased releases
    itself (a path that forgot it cannot leak the budget)."""

    __slots__ = ("_engine", "nbytes", "__weakref__")

    def __init__(self, engine, nbytes: int):
        self._engine, self.nbytes = engine, nbytes

    def release(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine._host_release(self.nbytes)

    def __del__(self):
        self.release()


def _stack_slots(slots: Sequence[_Slot], size: int) -> tuple[np.ndarray, bool]:
    """``(z, montgomery)``: the batch ``(8, size, num_vars)`` uint32 of ``slots`` (padded with copies of the first)
    and its form (Montgomery if ``montgomery``, else canonical). One form per batch: the majority's (canonical on a
    tie: the device converts that form, not the host); the partitions in the other form are converted on the host
    (:func:`cuzk_jax.engine.synthesis.convert_z`) -- a batch of one circuit normally has a single form."""
    mont = sum(1 for s in slots if s.montgomery)
    montgomery = 2 * mont > len(slots)
    if size == 1:  # a batch of one: a view, not a copy (a sector-scale partition is ~4 GiB)
        return slots[0].z[:, None, :], slots[0].montgomery
    zs = [s.z if s.montgomery == montgomery else synthesis.convert_z(s.z, s.montgomery) for s in slots]
    return np.stack(zs + [zs[0]] * (size - len(slots)), axis=1), montgomery


def _stage_fn(backend):
    """``stage(resident, z, montgomery)`` for ``backend``: its own ``stage`` when it takes the ``montgomery`` flag
    (the backends of :mod:`cuzk_jax.engine.backends`); for a backend whose ``stage(resident, z)`` takes Montgomery
    limbs only, a canonical batch is converted on the host first."""
    try:
        takes_form = "montgomery" in inspect.signature(backend.stage).parameters
    except (TypeError, ValueError):
        takes_form = False
    if takes_form:
        return lambda resident, z, montgomery: backend.stage(resident, z, montgomery=montgomery)
    return lambda resident, z, montgomery: backend.stage(resident, z if montgomery else
                                                         synthesis.convert_z(z, montgomery=False))


def _ema(means: dict, key, x: float, alpha: float = 0.3) -> None:
    """Update the exponential moving average ``means[key]`` with the sample ``x`` (the first sample sets it)."""
    old = means.get(key)
    means[key] = x if old is None else (1 - alpha) * old + alpha * x


def split_ways(units: int, free: int, waiting: int) -> int:
    """How many span tasks a partition of ``units`` spans (``circuit.span_units()``) is synthesized in when it enters
    a pool with ``free`` workers without a task, ``waiting`` other partitions in the backlog (the engine's
    ``EngineConfig.split_synthesis`` rule): the workers the backlog's partitions leave idle (one each),
    ``free - waiting``.

    Then at most ``units`` and ``free`` (at least 1), and balanced: the same number of rounds of spans on as few
    workers as give it (18 spans on 15 free workers are two rounds either way: 9 workers with 2 spans each, and 6
    workers stay free for the next partition)."""
    if units < 2 or free < 2:
        return 1
    ways = max(1, min(units, free - waiting))
    rounds = -(-units // ways)
    return -(-units // rounds)


def _block(x):
    return jax.tree_util.tree_map(lambda a: a.block_until_ready() if hasattr(a, "block_until_ready") else a, x)


def _settle(fut: cf.Future, result=None, exc: BaseException | None = None) -> None:
    """Complete ``fut`` unless it is already done (e.g. cancelled by the user meanwhile)."""
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)
    except cf.InvalidStateError:
        pass


class EngineShutdown(RuntimeError):
    """The engine stopped before this job could complete."""


class WorkerDied(CuzkError, RuntimeError):
    """A partition's synthesis worker process died (killed by the OOM killer or a signal, or it exited) twice: once
    with other tasks in the pool, then alone on its one retry. ``job_id`` names the job."""

    def __init__(self, message: str, job_id: int | None = None):
        super().__init__(message)
        self.job_id = job_id


# --------------------------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------------------------


class Engine:
    """The pipelined prover (see the module docstring). Use as a context manager or call :meth:`shutdown`.

    ``Engine(config=None, *, backend=None, key_loader=None, **overrides)``: ``overrides`` are
    :class:`EngineConfig` fields. ``backend``: default :class:`~cuzk_jax.engine.backends.DeviceBackend` over
    ``config.devices``. ``key_loader(circuit, r1cs) -> ProvingKey`` loads a key the first time a circuit is seen
    (e.g. ``cuzk_jax.keycache.load_or_setup``); without one, keys must be given to :meth:`preload`.
    """

    def __init__(self, config: EngineConfig | None = None, *, backend=None, key_loader=None, **overrides):
        config = dataclasses.replace(config or EngineConfig(), **overrides)
        self.config = config
        self.backend = backend or DeviceBackend(config.devices, config.prover, config.sync_phases,
                                                staged_ahead=config.prefetch)
        self._stage = _stage_fn(self.backend)
        self.batch_sizes = config.sizes(self.backend.num_devices)
        self.max_batch = self.batch_sizes[-1]
        self.keys = KeyManager(self._place, self.backend.size, key_loader, config.key_budget_bytes)
        self.t0 = time.perf_counter()
        self.timeline = Timeline(self.t0, config.timeline_limit, config.timeline)
        workers = config.synthesis_workers or synthesis.default_workers()
        self._pool = synthesis.make_pool(config.synthesis, workers)
        self._pool_gen = 0  # bumped each time a broken pool is replaced
        self._pool_lock = threading.Lock()  # guards _pool, _pool_gen, _closing (never taken inside self._lock)
        self._closing = False
        self._workers = workers
        # Cancel queued synthesis tasks of a withdrawn job? Not in a process pool before Python 3.12: a worker dying
        # while a cancelled task is still in the pool's queue crashes the pool's manager thread (CPython 3.11's
        # terminate_broken calls set_exception on the cancelled future: InvalidStateError) and hangs every other
        # task. Such tasks then run to completion and their results are dropped.
        self._cancel_tasks = config.synthesis == "thread" or sys.version_info >= (3, 12)
        # The pool holds at most workers + 1 tasks (one running per worker, one waiting); the other partitions wait
        # in the engine's backlog. A worker dying breaks every task in its pool, so this bounds how many other
        # partitions one death sends to retry (as suspects, below).
        # A heap of (job key, job id, partition index, job): the most urgent job's partitions enter the pool first.
        self._backlog: list = []  # under self._lock
        # Partitions whose pool broke under them (suspects: one of them, or none, killed its worker) run one at a
        # time, alone in the pool: one that breaks the pool again alone is the culprit and fails its job with
        # WorkerDied; the others (innocent bystanders) complete. Under self._lock.
        self._suspects: collections.deque = collections.deque()
        self._solo = None  # None, "reserved" or the future of the suspect running alone
        self._inflight = 0  # tasks in the pool, under self._lock (a split partition counts its span tasks)
        self._weights: dict[cf.Future, int] = {}  # split partitions' futures -> their span tasks, under self._lock
        self._split_pending = 0  # split partitions counted in _inflight but not yet in _weights, under self._lock
        self._synth_limit = workers + 1
        self._pumping = threading.local()
        # Host witness bytes held (partitions in synthesis, ready, or staging): config.host_budget_bytes bounds it.
        # A leaf lock (never held while taking another), reentrant: a _HostToken collected by the garbage collector
        # in the middle of an update releases itself through the same lock.
        self._host_lock = threading.RLock()
        self._host_bytes = 0
        self._host_peak = 0
        self._shared_out = config.synthesis == "process"  # a thread pool shares the parent's memory already

        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._circuits: dict[tuple, _Circuit] = {}
        self._jobs: dict[int, _Job] = {}
        self._ready: dict[str, collections.deque] = collections.defaultdict(collections.deque)
        self._synthesizing: dict[str, int] = collections.defaultdict(int)
        self._job_ids = itertools.count()
        self._batch_ids = itertools.count()
        self._accepting = True
        self._stop = False
        self._paused = False
        self._credits = threading.Semaphore(config.prefetch + 1)  # batches staged or running
        self._witnesses = 0  # batches whose witness is on the device: staged, or running before its H MSM
        # whether the backend's run calls back once a batch's witness is dead (the credit then comes back early)
        self._run_callback = "witness_done" in inspect.signature(self.backend.run).parameters
        self._device_q: queue.Queue = queue.Queue()
        self._finish_q: queue.Queue = queue.Queue()
        self._device_busy = False
        self._stats = collections.Counter()
        self._phase_s: dict[str, float] = collections.defaultdict(float)
        self._phase_n: dict[str, int] = collections.defaultdict(int)
        self._batch_hist: collections.Counter = collections.Counter()
        self._first_submit: float | None = None
        self._last_done: float | None = None
        self._delays = config.delays()
        # Estimates for fill="predict" (under self._lock): mean synthesis seconds and mean device seconds per batch,
        # per circuit digest (exponential moving averages); when each task entered the pool; the running batch.
        self._synth_mean: dict[str, float] = {}
        self._device_mean: dict[str, float] = {}
        self._in_pool: dict[cf.Future, tuple[str, float]] = {}
        self._device_since: float | None = None
        self._device_digest: str | None = None
        self._thread = {name: threading.Thread(target=fn, name=f"engine-{name}", daemon=True)
                        for name, fn in (("collector", self._collector), ("device", self._device_loop),
                                         ("finisher", self._finisher))}
        for t in self._thread.values():
            t.start()

    # -- context manager ---------------------------------------------------------------------------------------------
    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.shutdown(wait=exc_type is None, cancel_pending=exc_type is not None)

    # -- circuits and keys -------------------------------------------------------------------------------------------
    def _entry(self, circuit) -> _Circuit:
        from cuzk_jax.circuits.base import Circuit

        if not isinstance(circuit, Circuit):
            raise ValueError(f"expected a cuzk_jax.circuits Circuit, got {type(circuit).__name__}")
        key = (type(circuit).__module__, type(circuit).__qualname__, circuit.preset,
               repr(sorted(circuit.params.items())))
        with self._lock:
            entry = self._circuits.get(key)
        if entry is None:
            r1cs = circuit.r1cs()  # structure synthesis: once per circuit shape, in the caller's thread
            units = getattr(circuit, "span_units", None)
            entry = _Circuit(digest=r1cs.digest(), circuit=circuit, r1cs=r1cs,
                             portable=synthesis.portable_circuit(circuit), span_units=int(units()) if units else 0)
            with self._lock:
                entry = self._circuits.setdefault(key, entry)
        return entry

    def _place(self, pk, r1cs, headroom=None):
        """The backend's ``place``, then (``precompile``) the programs of every batch shape compiled ahead."""
        resident = self.backend.place(pk, r1cs, headroom)
        if self.config.precompile and hasattr(self.backend, "precompile"):
            t0 = time.perf_counter()
            try:
                names = self.backend.precompile(resident, self.batch_sizes)
            except Exception as e:  # noqa: BLE001  (a failed ahead-of-time compile only costs the first batch)
                log.warning("precompile for batch shapes %s failed (%s: %s); the first batches compile instead",
                            self.batch_sizes, type(e).__name__, e)
            else:
                log.info("precompiled %s for batch shapes %s in %.1f s", names, self.batch_sizes,
                         time.perf_counter() - t0)
        return resident

    def circuit_digest(self, circuit) -> str:
        """The R1CS digest that identifies ``circuit``'s key (its structure is synthesized once, then cached)."""
        return self._entry(circuit).digest

    def preload(self, circuit, pk=None, *, resident=None) -> None:
        """Make ``circuit``'s key resident now: ``pk`` if given, else through the key loader. ``resident``: a key
        the backend already placed (``backend.place(pk, r1cs)``, e.g. a
        :class:`~cuzk_jax.groth16.pipeline.ResidentKey` made with ``make_resident(consume=True)``, whose full-size
        proving key is gone), adopted as it is."""
        entry = self._entry(circuit)
        if resident is not None:
            if pk is not None:
                raise ValueError("preload: give pk= or resident=, not both")
            self.keys.adopt(resident, entry.digest)
        elif pk is not None:
            self.keys.put(pk, entry.r1cs, entry.digest)
        else:
            self.keys.get(entry.digest, entry.circuit, entry.r1cs)

    def evict(self, circuit) -> bool:
        """Drop ``circuit``'s resident key (reloaded through the loader if needed again)."""
        return self.keys.evict(self._entry(circuit).digest)

    def warm_up(self, circuits=()) -> None:
        """Start every synthesis worker now and let each synthesize one partition of each of ``circuits`` (worker
        processes build per-process tables lazily: seconds for porep_like), instead of on the first jobs."""
        synthesis.warm_pool(self._current_pool()[0], self._workers, circuits)

    # -- the synthesis pool ------------------------------------------------------------------------------------------
    def _current_pool(self):
        with self._pool_lock:
            return self._pool, self._pool_gen

    def _renew_pool(self, gen: int) -> bool:
        """Replace the pool of generation ``gen`` (broken: a worker process died) by a fresh one, once however
        many tasks report it; False when the engine is shutting down (no new pool then)."""
        with self._pool_lock:
            if self._closing:
                return False
            if self._pool_gen != gen:
                return True  # already replaced
            old = self._pool
            self._pool = synthesis.make_pool(self.config.synthesis, self._workers)
            self._pool_gen += 1
        with self._lock:
            self._stats["pool_restarts"] += 1
        log.warning("synthesis pool broken (a worker process died); replaced by a new pool")
        # never shut the old pool down here: this may run in that pool's own manager thread (a task's callback)
        threading.Thread(target=old.shutdown, kwargs={"cancel_futures": True}, name="engine-old-pool",
                         daemon=True).start()
        return True

    def _synth_submit(self, entry: _Circuit, spec, out: str | None = None, ways: int = 1, alive=None):
        """Queue one partition's synthesis (``out``: its shared output file, or None): ``(future, pool
        generation)``; with ``ways`` > 1, split over that many span tasks (:class:`~.synthesis.SplitSynthesis`). A
        pool found broken is replaced once."""
        for attempt in range(2):
            pool, gen = self._current_pool()
            try:
                if ways > 1:
                    return synthesis.SplitSynthesis(pool.submit, entry.portable, spec, out, ways, alive,
                                                    self._cancel_tasks).start(), gen
                return pool.submit(synthesis.synthesize_partition, entry.portable, spec, out), gen
            except cf.BrokenExecutor:
                if attempt or not self._renew_pool(gen):
                    raise

    def _hands_off_shared(self, entry: _Circuit) -> bool:
        """Whether ``entry``'s partitions come back through a shared file (see ``EngineConfig.shared_z_min_bytes``):
        process workers and partitions of at least that size."""
        return self._shared_out and entry.z_bytes >= self.config.shared_z_min_bytes

    def _split_ways(self, job: _Job, index: int) -> int:
        """Under the lock: how many workers synthesize this partition (see ``EngineConfig.split_synthesis`` and
        :func:`split_ways`)."""
        entry = job.entry
        if (entry.span_units < 2 or not self.config.split_synthesis or not self._hands_off_shared(entry)
                or job.specs[index][0] not in ("sample", "inputs")):
            return 1
        waiting = sum(1 for item in self._backlog if item[3].active)
        return split_ways(entry.span_units, self._workers - self._inflight, waiting)

    def _resynthesize(self, job: _Job, index: int, old: cf.Future, gen: int, exc: BaseException, solo: bool):
        """Task ``old`` of ``job`` died with its pool (generation ``gen``): replace the pool and queue the partition
        as a suspect (retried once, alone in the pool); a suspect whose worker dies again, alone, fails its job.
        None when queued again (it keeps its place in ``_synthesizing``), else the exception to fail the job with."""
        with self._lock:
            if not job.active or old not in job.open_synth:
                return exc
        if not self._renew_pool(gen):  # whether or not this job is retried: later jobs need a pool
            return EngineShutdown(f"job {job.id}: a synthesis worker died while the engine was shutting down")
        if solo:
            return WorkerDied(f"job {job.id}: partition {index}: its synthesis worker process died (killed by the OOM "
                              f"killer or a signal, or it exited) twice: with other tasks, then alone on its one "
                              f"retry", job.id)
        with self._lock:
            taken = job.active and old in job.open_synth
            if taken:  # a suspect now, keeping its place in _synthesizing
                job.open_synth.discard(old)
                self._in_pool.pop(old, None)
                job.backlog_n += 1
                self._suspects.append((job, index))
                self._stats["resynthesized"] += 1
        if not taken:  # cancelled or failed meanwhile (the release counted the old task)
            return exc
        log.info("job %d: partition %d queued again after its synthesis worker died", job.id, index)
        self._pump()
        return None

    def _pump(self) -> None:
        """Move partitions from the backlog into the pool while it holds fewer than ``_synth_limit`` tasks."""
        if getattr(self._pumping, "active", False):
            return  # a task finished inside our own submit (thread pool): the loop below goes on
        self._pumping.active = True
        try:
            while True:
                with self._lock:
                    if self._solo is not None:
                        return  # a suspect runs alone
                    while self._suspects and not self._suspects[0][0].active:
                        self._suspects.popleft()
                    solo = bool(self._suspects)
                    if solo:
                        if self._inflight:
                            return  # let the pool drain first
                        job, index = self._suspects.popleft()
                        self._solo = "reserved"
                    else:
                        # no task queued beyond the workers while a split partition is in flight: its span tasks,
                        # submitted once it is sampled, would wait behind it in the pool's FIFO queue
                        if self._inflight >= self._synth_limit - (1 if self._weights or self._split_pending else 0):
                            return
                        item = None
                        while self._backlog:
                            entry = heapq.heappop(self._backlog)
                            if entry[3].active:
                                item = entry
                                break
                        if item is None:
                            return
                        _, _, index, job = item
                    token = self._host_take(job.entry.z_bytes)
                    if token is None:  # the host budget is full: wait for a batch to reach the device
                        if solo:
                            self._suspects.appendleft((job, index))
                            self._solo = None
                        else:
                            heapq.heappush(self._backlog, item)
                        return
                    job.backlog_n -= 1  # in transit: neither in the backlog nor in the pool until registered
                    ways = 1 if solo else self._split_ways(job, index)
                    self._inflight += ways  # a split partition counts as the workers it takes
                    # a split in transit (not yet in _weights) holds the pool to the workers as well: another
                    # thread's pump in between must not queue a task its spans would wait behind
                    self._split_pending += ways > 1
                out = None
                try:
                    if self._hands_off_shared(job.entry):
                        out = synthesis.new_shared_file(job.entry.r1cs.num_vars)
                    fut, gen = self._synth_submit(job.entry, job.specs[index], out, ways, lambda job=job: job.active)
                except (RuntimeError, CuzkError, OSError) as e:
                    # the pool is shut down (engine stopping) or broke again at once, or no room for the shared file
                    synthesis.drop_shared(out)
                    token.release()
                    with self._lock:
                        if solo:
                            self._solo = None
                        self._inflight -= ways
                        self._split_pending -= ways > 1
                        self._synthesizing[job.entry.digest] -= 1
                        self._cv.notify_all()
                    self._fail(job, e if isinstance(e, CuzkError) else
                               EngineShutdown(f"job {job.id}: synthesis pool unavailable: {e}"))
                    continue
                with self._lock:
                    if ways > 1:
                        self._weights[fut] = ways
                        self._split_pending -= 1
                        self._stats["split"] += 1
                    if solo:
                        self._solo = fut
                    owned = job.active
                    if owned:
                        job.open_synth.add(fut)
                        self._in_pool[fut] = (job.entry.digest, time.perf_counter())
                    else:  # failed or cancelled while in transit: the release did not count it
                        self._synthesizing[job.entry.digest] -= 1
                        self._cv.notify_all()
                if owned:  # before _task_done: a broken task is queued as a suspect before the pump runs again
                    fut.add_done_callback(lambda f, job=job, index=index, g=gen, solo=solo, token=token, out=out:
                                          self._on_synthesized(job, index, f, g, solo, token, out))
                else:
                    fut.add_done_callback(lambda f, token=token, out=out: (synthesis.drop_shared(out),
                                                                           token.release()))
                fut.add_done_callback(self._task_done)
                if not owned and self._cancel_tasks:
                    fut.cancel()
        finally:
            self._pumping.active = False

    def _task_done(self, fut: cf.Future) -> None:
        with self._lock:
            self._inflight -= self._weights.pop(fut, 1)
            if self._solo is fut:
                self._solo = None
        self._pump()

    # -- the host witness budget -------------------------------------------------------------------------------------
    def _host_take(self, nbytes: int) -> _HostToken | None:
        """A token for ``nbytes`` more host witness bytes, or None when they do not fit the budget beside what is
        held (with nothing held, any partition may start: submit refused those larger than the budget)."""
        limit = self.config.host_budget_bytes
        with self._host_lock:
            if limit is not None and self._host_bytes and self._host_bytes + nbytes > limit:
                return None
            self._host_bytes += nbytes
            self._host_peak = max(self._host_peak, self._host_bytes)
        return _HostToken(self, nbytes)

    def _host_release(self, nbytes: int) -> None:
        """Give back a token's bytes (:meth:`_HostToken.release`). Takes only the leaf lock: a token may be dropped
        while the engine lock is held; whoever releases one calls :meth:`_pump` afterwards
        (:meth:`_drop_host_witnesses` does; a finished task's release is followed by :meth:`_task_done`'s)."""
        with self._host_lock:
            self._host_bytes -= nbytes

    def _host_full(self, nbytes: int) -> bool:
        """Whether a partition of ``nbytes`` would not be let into synthesis now (the budget is full)."""
        limit = self.config.host_budget_bytes
        with self._host_lock:
            return limit is not None and self._host_bytes > 0 and self._host_bytes + nbytes > limit

    # -- submission --------------------------------------------------------------------------------------------------
    def submit(self, circuit, inputs: Sequence[dict] | None = None, *, witnesses: Sequence | None = None,
               sector: int | None = None, partitions: int | None = None,
               randomness: Sequence[tuple[int, int]] | None = None, priority: str | None = None) -> ProofFuture:
        """Queue one proof job; returns a :class:`ProofFuture` of its :class:`JobResult`.

        Give exactly one of: ``inputs`` (one dict per partition, as ``circuit.sample_inputs`` returns),
        ``witnesses`` (already synthesized :class:`~cuzk_jax.circuits.r1cs.Witness` objects), or ``sector`` and
        ``partitions`` (partition ``p`` uses ``circuit.sample_inputs(p, seed=sector)``). ``randomness``: one
        ``(r, s)`` per partition (tests only: ``prover.insecure_randomness_for_tests``); default the OS CSPRNG.
        ``priority``: the job's class (:data:`cuzk_jax.priorities.CLASSES`); default the circuit's own class.
        """
        if priority is None:
            priority = priorities.class_of(circuit)
        elif not isinstance(priority, str) or priority not in priorities.CLASSES:
            raise BadInput(f"submit: unknown priority class {priority!r}; expected one of "
                           f"{', '.join(priorities.CLASSES)}")
        given = [x is not None for x in (inputs, witnesses, sector)]
        if sum(given) != 1:
            raise ValueError("submit: give exactly one of inputs=, witnesses= or sector= (with partitions=)")
        if sector is not None:
            if not isinstance(partitions, int) or partitions < 1:
                raise ValueError(f"submit: partitions must be a positive int with sector=, got {partitions!r}")
            specs = [("sample", p, sector) for p in range(partitions)]
        elif partitions is not None:
            raise ValueError("submit: partitions= is only used with sector=")
        elif inputs is not None:
            specs = [("inputs", dict(x)) for x in inputs]
            for p, (_, x) in enumerate(specs):
                check_input_values(x, f"submit: partition {p} input")
        else:
            specs = [("witness", w) for w in witnesses]
            for p, (_, w) in enumerate(specs):
                check_input_values({"inputs": list(w.inputs)}, f"submit: partition {p} witness")
        if not specs:
            raise ValueError("submit: a job needs at least one partition")
        P = len(specs)
        if randomness is None:
            randomness = prover.random_randomness(P)
        randomness = [(int(r), int(s)) for r, s in randomness]
        if len(randomness) != P:
            raise ValueError(f"submit: {P} partitions but {len(randomness)} (r, s) pairs")
        entry = self._entry(circuit)
        budget = self.config.host_budget_bytes
        if budget is not None and entry.z_bytes > budget:
            raise BadInput(f"submit: one partition of {circuit.name} holds {entry.z_bytes / 2**30:.2f} GiB of witness "
                           f"on the host, more than the engine's host budget of {budget / 2**30:.2f} GiB "
                           f"(host_budget_bytes)")
        with self._lock:
            if not self._accepting:
                raise RuntimeError("engine is shut down")
            job = _Job(id=next(self._job_ids), entry=entry, specs=specs, randomness=randomness,
                       future=None, sector=sector, submitted=time.perf_counter(), priority=priority)
            job.key = job.submitted + self._delays[priority]
            job.future = ProofFuture(job.id)
            job.proofs, job.publics, job.remaining = [None] * P, [None] * P, P
            self._jobs[job.id] = job
            self._synthesizing[entry.digest] += P
            self._stats["submitted"] += 1
            if self._first_submit is None:
                self._first_submit = job.submitted
            job.backlog_n = P
            for index in range(P):
                heapq.heappush(self._backlog, (job.key, job.id, index, job))
        job.future.add_done_callback(lambda f, job=job: self._on_future_done(job))
        self._pump()
        return job.future

    def submit_sector(self, circuit, sector: int, partitions: int = 10, randomness=None,
                      priority: str | None = None) -> ProofFuture:
        """``submit(circuit, sector=sector, partitions=partitions)``: one sector (PoRep C2: 10 partitions)."""
        return self.submit(circuit, sector=sector, partitions=partitions, randomness=randomness, priority=priority)

    def pause(self) -> None:
        """Stop forming new batches (synthesis continues; running batches finish). For bursts: pause, submit,
        resume -- the collector then sees all ready partitions at once."""
        with self._lock:
            self._paused = True

    def resume(self) -> None:
        with self._cv:
            self._paused = False
            self._cv.notify_all()

    def cancel(self, job) -> bool:
        """Cancel a job (its :class:`ProofFuture` or id); True if it was still pending."""
        if isinstance(job, cf.Future):
            return job.cancel()
        with self._lock:
            j = self._jobs.get(job)
        return j.future.cancel() if j is not None else False

    # -- job state transitions ---------------------------------------------------------------------------------------
    def _release_synthesis(self, job: _Job) -> list:
        """Under the lock: forget the job's outstanding synthesis (backlog entries are skipped later; results of
        tasks in the pool are dropped). Returns the tasks to cancel *after* releasing the lock (a cancel runs the
        task's callbacks, which take it): none where cancelling is unsafe (see ``_cancel_tasks``)."""
        self._synthesizing[job.entry.digest] -= len(job.open_synth) + job.backlog_n
        for f in job.open_synth:
            self._in_pool.pop(f, None)
        tasks = list(job.open_synth) if self._cancel_tasks else []
        job.open_synth.clear()
        job.backlog_n = 0
        return tasks

    def _drop_ready(self, job: _Job) -> list:
        """Under the lock: take the job's ready partitions out of the ready queue (its host witnesses are freed by
        the caller, outside the lock, with :meth:`_drop_host_witnesses`)."""
        dq = self._ready.get(job.entry.digest)
        if not dq:
            return []
        mine = [s for s in dq if s.job is job]
        if mine:
            self._ready[job.entry.digest] = collections.deque(s for s in dq if s.job is not job)
        return mine

    def _retire(self, job: _Job, state: str) -> bool:
        """Under the lock: move an active job to its final ``state`` ("done", "failed", "cancelled": counted in
        the stats of that name) and forget it; False if it had already left the active state."""
        if job.state != "active":
            return False
        job.state = state
        self._stats[state] += 1
        self._jobs.pop(job.id, None)
        return True

    def _on_future_done(self, job: _Job) -> None:
        if not job.future.cancelled():
            return
        with self._lock:
            if not self._retire(job, "cancelled"):
                return
            tasks = self._release_synthesis(job)
            slots = self._drop_ready(job)
            self._cv.notify_all()
        for f in tasks:
            f.cancel()
        self._drop_host_witnesses(slots)

    def _fail(self, job: _Job, exc: BaseException) -> None:
        with self._lock:
            if not self._retire(job, "failed"):
                return
            tasks = self._release_synthesis(job)
            slots = self._drop_ready(job)
            self._cv.notify_all()
        for f in tasks:
            f.cancel()
        self._drop_host_witnesses(slots)
        log.info("job %d failed: %s", job.id, exc)
        _settle(job.future, exc=exc)

    def _on_synthesized(self, job: _Job, index: int, fut: cf.Future, gen: int = 0, solo: bool = False,
                        token: _HostToken | None = None, shared: str | None = None) -> None:
        exc = None if fut.cancelled() else fut.exception()
        out = None if fut.cancelled() or exc is not None else fut.result()
        if out is not None and out.shared is not None:
            try:
                out = synthesis.claim_shared(out)  # maps the worker's file and unlinks it
            except OSError as e:
                out, exc = None, e
        else:
            synthesis.drop_shared(shared)  # the task failed or was cancelled: its file (if any) goes now
        if out is None and token is not None:
            token.release()  # no witness to hold (the partition, if retried, takes a new token)
            token = None
        if fut.cancelled():
            return  # accounted for by whoever cancelled it (the release)
        if isinstance(exc, cf.BrokenExecutor):  # a worker process died: every task queued in its pool gets this
            exc = self._resynthesize(job, index, fut, gen, exc, solo)
            if exc is None:
                return
        if out is not None:
            for worker, t0, t1 in out.parts or [(out.worker, out.t_start, out.t_end)]:
                self.timeline.add(worker, "synthesis", t0, t1, job=job.id)
            r1cs = job.entry.r1cs
            if (out.num_inputs, out.num_aux) != (r1cs.num_inputs, r1cs.num_aux):
                exc = ValueError(f"partition {index}: witness shape (inputs={out.num_inputs}, aux={out.num_aux}) "
                                 f"does not match the R1CS (inputs={r1cs.num_inputs}, aux={r1cs.num_aux})")
            elif out.num_constraints is not None and out.num_constraints != r1cs.num_constraints:
                exc = ValueError(f"partition {index}: witness synthesized with {out.num_constraints} constraints, the "
                                 f"R1CS has {r1cs.num_constraints}: not the same circuit shape")
        now = time.perf_counter()
        with self._lock:
            # leaving "synthesizing" and entering "ready" in one step: the collector must never see the circuit idle
            # (nothing synthesizing) while this partition is in neither state, or it would flush a short batch
            owned = fut in job.open_synth  # else released with its job (and counted) already
            if owned:
                job.open_synth.discard(fut)
                self._in_pool.pop(fut, None)
                self._synthesizing[job.entry.digest] -= 1
                self._cv.notify_all()
            if out is not None and not out.parts:  # the mean is one worker's time per partition (split ones: less)
                _ema(self._synth_mean, job.entry.digest, out.t_end - out.t_start)
            if exc is None and job.active and owned:
                job.publics[index] = out.public_inputs
                job.synth_s += out.t_end - out.t_start
                self._phase_s["synthesis"] += out.t_end - out.t_start
                self._phase_n["synthesis"] += 1
                self._ready[job.entry.digest].append(_Slot(job, index, out.z, now, out.montgomery, token))
                token = None
        if token is not None:
            token.release()  # a witness nobody will use (a bad shape, or its job is gone)
        if exc is not None:
            self._fail(job, exc)

    def _complete(self, job: _Job, resident) -> None:
        verified = None
        if self.config.verify:
            t0 = time.perf_counter()
            try:
                self._verify(job, resident.pk.vk)
            except Exception as e:  # noqa: BLE001 -- ProofRejected, or inputs the verifier refuses: this job only
                self._fail(job, e)
                return
            verified = True
            t1 = time.perf_counter()
            job.phases["verify"] += t1 - t0
            self.timeline.add("finish", "verify", t0, t1, job=job.id)
            with self._lock:
                self._phase_s["verify"] += t1 - t0
                self._phase_n["verify"] += 1
        now = time.perf_counter()
        with self._lock:
            if not self._retire(job, "done"):
                return
            self._stats["proofs"] += len(job.proofs)
            self._last_done = now
        phases = {"synthesis": job.synth_s,
                  "queue": (job.first_device - job.submitted) if job.first_device else 0.0, **job.phases}
        timings = prover.Timings(phases=phases, total=now - job.submitted, partitions=len(job.proofs))
        _settle(job.future, JobResult(job_id=job.id, sector=job.sector, proofs=list(job.proofs),
                                      public_inputs=list(job.publics), timings=timings, synthesis_s=job.synth_s,
                                      batches=list(job.batches), verified=verified))

    @staticmethod
    def _verify(job: _Job, vk) -> None:
        """Raise :class:`ProofRejected` naming the partitions whose proofs do not verify under ``vk``."""
        from cuzk_jax.groth16 import verifier

        if verifier.verify_batch(vk, job.publics, job.proofs):
            return
        bad = [i for i, ok in enumerate(verifier.verify_each(vk, job.publics, job.proofs)) if not ok]
        which = f"partition {bad[0]}" if len(bad) == 1 else f"partitions {bad}"
        err = ProofRejected(f"job {job.id}: the proof of {which} does not verify (the prover made an invalid proof; "
                            f"it is not returned)")
        err.job_id, err.partitions = job.id, bad
        raise err

    # -- collector ---------------------------------------------------------------------------------------------------
    def _pick(self, now: float):
        """Under the lock: ``(digest, slots, size)`` of the next batch, or ``(None, seconds to wait)``.

        Among the circuits whose batch may be formed now (full; nothing more of it in synthesis; its oldest ready
        partition waited long enough; or, fill="predict", waiting would not fill it: :meth:`_due`), the one whose
        most urgent ready partition has the lowest key; its partitions are taken most urgent first. Exception: when
        the most urgent ready partition of all belongs to a more urgent class than that choice, its circuit's batch
        is formed now even though it would wait to fill (urgent work takes the next batch boundary)."""
        best, top, wait = None, None, 0.5
        if self._paused and not self._stop:
            return None, wait
        for digest in list(self._ready):
            dq = self._ready[digest]
            live = [s for s in dq if s.job.active]
            if len(live) != len(dq):
                self._ready[digest] = collections.deque(live)
            if not live:
                continue
            live.sort(key=lambda s: (s.job.key, s.job.id, s.index))
            idle = self._synthesizing[digest] <= 0 or self._stop or self._starved(digest, live)
            if top is None or live[0].job.key < top[1][0].job.key:
                top = (digest, live, idle)
            due = 0.0 if len(live) >= self.max_batch or idle else \
                self._due(digest, len(live), min(s.ready for s in live), now)
            if due > 0:
                wait = min(wait, due)
                continue
            if best is None or live[0].job.key < best[1][0].job.key:
                best = (digest, live, idle)
        if best is None:
            return None, max(wait, 1e-3)
        if top[0] != best[0] and (self._delays[top[1][0].job.priority] < self._delays[best[1][0].job.priority]):
            # a more urgent class waiting for its batch to fill would lose this batch boundary to less urgent work
            # of another circuit: its batch goes now, short
            best = top
        digest, live, idle = best
        k = len(live)
        if k >= self.max_batch:
            take = size = self.max_batch
        else:
            fits = [s for s in self.batch_sizes if s <= k]
            if fits and not idle:  # formed early but more is coming: a full smaller shape, no padding
                take = size = fits[-1]
            else:
                take, size = k, next(s for s in self.batch_sizes if s >= k)
        chosen = live[:take]
        ids = {id(s) for s in chosen}
        self._ready[digest] = collections.deque(s for s in self._ready[digest] if id(s) not in ids)
        return (digest, chosen, size), 0.0

    def _starved(self, digest: str, live: list) -> bool:
        """Under the lock: nothing more of ``digest`` can arrive before a batch goes -- none of its tasks is in the
        pool and the host budget lets no new one in (the ready partitions hold it): waiting would never fill."""
        if self.config.host_budget_bytes is None or any(d == digest for d, _ in self._in_pool.values()):
            return False
        return self._host_full(live[0].job.entry.z_bytes)

    def _due(self, digest: str, k: int, oldest: float, now: float) -> float:
        """Under the lock: seconds until a batch of ``digest``'s ``k`` ready partitions (fewer than ``max_batch``,
        more in synthesis) should be formed; <= 0 means now. See the module docstring ("Batching")."""
        synth, dev = self._synth_mean.get(digest), self._device_mean.get(digest)
        estimates = self.config.fill == "predict" and synth is not None and dev is not None
        limit = self.config.max_wait_s
        if limit is None:
            limit = 2 * synth + dev if estimates else 0.5
        ceiling = oldest + limit - now
        if ceiling <= 0 or not estimates:
            return ceiling
        # When the device could start this batch: after the running batch and the staged ones.
        free = 0.0
        if self._device_since is not None:
            running = self._device_mean.get(self._device_digest, dev)
            free = max(0.0, self._device_since + running - now)
        free += self._device_q.qsize() * dev
        # When the partitions still in synthesis are expected: tasks in the pool one mean after they entered it
        # (one overdue by more than a mean is not expected: it may never finish); backlog tasks after the pool.
        pool = [t + synth for d, t in self._in_pool.values() if d == digest]
        expected = sorted(max(now, t) for t in pool if t >= now - synth)
        backlog = max(0, self._synthesizing[digest] - len(pool))
        expected += [now + synth * (1 + i // self._workers) for i in range(min(backlog, self.max_batch))]
        expected.sort()
        need = min(self.max_batch - k, len(expected))
        if need and expected[need - 1] - now <= free + dev:
            # the batch fills before it could have finished anyway: wait (an overdue partition: poll until it
            # arrives or stops being expected)
            return min(ceiling, max(expected[need - 1] - now, 0.01))
        n_stage = self._phase_n.get("stage", 0)
        stage = self._phase_s["stage"] / n_stage if n_stage else 0.0
        return min(ceiling, free - stage)  # it will not fill in time: form it when the device is about to be free

    def _collector(self) -> None:
        while True:
            # A credit = room on the device side (prefetch staged + one running); waiting for it before forming a
            # batch lets batches fill while the device is busy.
            while not self._credits.acquire(timeout=0.2):
                if self._stop:
                    break
            with self._cv:
                choice = None
                while not self._stop or self._any_ready():
                    choice, wait = self._pick(time.perf_counter())
                    if choice is not None:
                        break
                    self._cv.wait(timeout=wait)
                if choice is None:  # stopping and nothing left
                    self._device_q.put(None)
                    return
            digest, slots, size = choice
            batch = _Batch(id=next(self._batch_ids), entry=slots[0].job.entry, slots=slots, size=size)
            t0 = time.perf_counter()
            on_device = False
            try:
                entry = batch.entry
                batch.resident = self.keys.get(digest, entry.circuit, entry.r1cs)
                self._wait_witness_room(batch.resident)
                on_device = True
                z, montgomery = _stack_slots(slots, size)
                batch.staged = _block(self._stage(batch.resident, z, montgomery))
            except Exception as e:  # noqa: BLE001 -- a bad key or upload fails this batch's jobs only
                log.exception("batch %d: staging failed", batch.id)
                self._fail_batch(batch, e)
                if on_device:
                    self._witness_gone()
                self._credits.release()
                self._drop_host_witnesses(slots)
                continue
            z = None
            if isinstance(batch.staged, jax.Array):  # a device copy: the host witnesses and their budget go now
                self._drop_host_witnesses(slots)  # (a batch kept on the host lets go when its run ends)
            self.timeline.add("collector", "stage", t0, time.perf_counter(), batch=batch.id)
            with self._lock:
                self._phase_s["stage"] += time.perf_counter() - t0
                self._phase_n["stage"] += 1
                self._batch_hist[(len(slots), size)] += 1
                self._stats["padded_slots"] += size - len(slots)
            self._device_q.put(batch)

    def _drop_host_witnesses(self, slots) -> None:
        """Forget the host ``z`` of ``slots`` and give back their host budget (then let more synthesis in)."""
        for s in slots:
            s.z = None
            if s.token is not None:
                s.token.release()
                s.token = None
        self._pump()

    def _wait_witness_room(self, resident) -> None:
        """Wait until one more batch's witness may go onto the device: at most ``1 + prefetch`` when the key's
        memory plan counts the staged batches (``MemoryPlan.prefetch == "on"``, or no plan: the host backend),
        else 1 -- the running batch's witness must be dead first (it calls back before its H MSM), as the plan
        without them assumes. Then count it."""
        plan = getattr(resident, "plan", None)
        limit = 1 + (self.config.prefetch if getattr(plan, "prefetch", "on") == "on" else 0)
        with self._cv:
            while self._witnesses >= limit and not (self._stop and not self._device_alive()):
                self._cv.wait(timeout=0.2)
            self._witnesses += 1

    def _witness_gone(self) -> None:
        with self._cv:
            self._witnesses -= 1
            self._cv.notify_all()

    @property
    def threads(self) -> tuple[threading.Thread, ...]:
        """The engine's own threads (collector, device, finisher): all ended once :meth:`shutdown` returns (each is
        given 30 s)."""
        return tuple(self._thread.values())

    def _device_alive(self) -> bool:
        return self._thread["device"].is_alive()

    def _any_ready(self) -> bool:
        return any(s.job.active for dq in self._ready.values() for s in dq)

    def _fail_batch(self, batch: _Batch, exc: BaseException) -> None:
        for job in {id(s.job): s.job for s in batch.slots}.values():
            self._fail(job, exc)

    # -- device ------------------------------------------------------------------------------------------------------
    def _device_loop(self) -> None:
        while True:
            batch = self._device_q.get()
            if batch is None:
                self._finish_q.put(None)
                return
            start = time.perf_counter()
            with self._lock:
                self._device_busy = True
                self._device_since, self._device_digest = start, batch.entry.digest
                for s in batch.slots:
                    if s.job.first_device is None:
                        s.job.first_device = start

            def phase(name, fn):
                t0 = time.perf_counter()
                out = _block(fn())
                t1 = time.perf_counter()
                batch.phases[name] = batch.phases.get(name, 0.0) + (t1 - t0)
                self.timeline.add("device", name, t0, t1, batch=batch.id)
                return out

            # The batch's credit comes back once its witness is dead on the device (the backend calls back before
            # the H MSM; the device copy of z is freed then), so the next batch is staged while this one finishes
            # its H MSM -- or, for a backend without the callback, when the batch ends.
            credit = [True]

            def witness_done():
                if credit:
                    credit.pop()
                    self._witness_gone()
                    self._credits.release()

            out = None
            staged = [batch.staged]  # the run gets the only reference (popped), so it can free the device copy
            batch.staged = None
            try:
                if self._run_callback:
                    out = self.backend.run(batch.resident, staged.pop(), phase, witness_done=witness_done)
                else:
                    out = self.backend.run(batch.resident, staged.pop(), phase)
            except Exception as e:  # noqa: BLE001 -- a device error fails this batch's jobs only
                log.exception("batch %d: device phases failed", batch.id)
                out = e
            finally:
                staged.clear()
                with self._lock:
                    self._device_busy = False
                    self._device_since = None
                    if not isinstance(out, Exception):
                        _ema(self._device_mean, batch.entry.digest, time.perf_counter() - start)
                    for name, sec in batch.phases.items():
                        self._phase_s[name] += sec
                        self._phase_n[name] += 1
                    self._stats["batches"] += 1
                    self._stats["device_s"] += time.perf_counter() - start
                witness_done()  # (when the backend did not call it)
                self._drop_host_witnesses(batch.slots)  # a batch the backend kept on the host: gone with its run
            if isinstance(out, Exception):
                self._fail_batch(batch, out)
            else:
                self._finish_q.put((batch, out))

    # -- finisher ----------------------------------------------------------------------------------------------------
    def _finisher(self) -> None:
        while True:
            item = self._finish_q.get()
            if item is None:
                return
            batch, out = item
            t0 = time.perf_counter()
            done = []
            for i, slot in enumerate(batch.slots):
                job = slot.job
                if not job.active:
                    continue
                try:
                    err = pipeline.unsatisfied(batch.resident, out, i, slot.index)
                    if err is not None:
                        self._fail(job, err)
                        continue
                    r, s = job.randomness[slot.index]
                    proof = self.backend.finish(batch.resident, out, i, r, s)
                except Exception as e:  # noqa: BLE001
                    log.exception("batch %d: finishing partition failed", batch.id)
                    self._fail(job, e)
                    continue
                with self._lock:
                    if not job.active:
                        continue
                    job.proofs[slot.index] = proof
                    job.remaining -= 1
                    if batch.id not in job.batches:
                        job.batches.append(batch.id)
                        for name, sec in batch.phases.items():
                            job.phases[name] += sec
                    if job.remaining == 0:
                        done.append(job)
            t1 = time.perf_counter()
            self.timeline.add("finish", "finish", t0, t1, batch=batch.id)
            with self._lock:
                self._phase_s["finish"] += t1 - t0
                self._phase_n["finish"] += 1
            for job in done:
                job.phases["finish"] += t1 - t0
                self._complete(job, batch.resident)

    # -- status ------------------------------------------------------------------------------------------------------
    def status(self) -> dict:
        """Queue depths, job counts, per-phase totals, batch sizes, proofs per minute, resident keys."""
        with self._lock:
            now = time.perf_counter()
            ready = sum(1 for dq in self._ready.values() for s in dq if s.job.active)
            proofs = self._stats["proofs"]
            span = (self._last_done - self._first_submit) if (self._last_done and self._first_submit) else 0.0
            st = {
                "uptime_s": now - self.t0,
                "jobs": {"active": len(self._jobs), "submitted": self._stats["submitted"], "done": self._stats["done"],
                         "failed": self._stats["failed"], "cancelled": self._stats["cancelled"]},
                "queue": {"synthesizing": sum(max(0, v) for v in self._synthesizing.values()), "ready": ready,
                          "staged_batches": self._device_q.qsize(), "device_busy": self._device_busy,
                          "finishing_batches": self._finish_q.qsize()},
                "proofs": proofs,
                "proofs_per_minute": 60.0 * proofs / span if span > 0 else 0.0,
                "batches": self._stats["batches"],
                "batch_sizes": {f"{k}/{s}": n for (k, s), n in sorted(self._batch_hist.items())},
                "padded_slots": self._stats["padded_slots"],
                "device_busy_fraction": self._stats["device_s"] / span if span > 0 else 0.0,
                "phase_seconds": dict(self._phase_s),
                "phase_mean_seconds": {k: self._phase_s[k] / n for k, n in self._phase_n.items() if n},
                "classes": self._class_depths(),
                "estimates": {"synthesis_mean_s": {d[:16]: v for d, v in self._synth_mean.items()},
                              "batch_mean_s": {d[:16]: v for d, v in self._device_mean.items()}},
            }
        st["keys"] = {"resident": self.keys.resident(), "resident_bytes": self.keys.resident_bytes(),
                      "budget_bytes": self.keys.budget_bytes, **self.keys.stats.as_dict()}
        st["backend"] = {"name": self.backend.name, "devices": self.backend.num_devices,
                         "batch_sizes": list(self.batch_sizes)}
        st["synthesis"] = {"kind": self.config.synthesis, "workers": self._workers,
                           "pool_restarts": self._stats["pool_restarts"], "resynthesized": self._stats["resynthesized"],
                           "split_partitions": self._stats["split"], "in_pool": self._inflight}
        with self._host_lock:
            st["host_witness"] = {"bytes": self._host_bytes, "peak_bytes": self._host_peak,
                                  "budget_bytes": self.config.host_budget_bytes}
        return st

    def _class_depths(self) -> dict:
        """Under the lock: per priority class, the active jobs and their partitions not yet in a device batch."""
        out = {c: {"jobs": 0, "partitions_queued": 0} for c in priorities.CLASSES}
        for job in self._jobs.values():
            out[job.priority]["jobs"] += 1
            out[job.priority]["partitions_queued"] += job.backlog_n + len(job.open_synth)
        for dq in self._ready.values():
            for slot in dq:
                if slot.job.active:
                    out[slot.job.priority]["partitions_queued"] += 1
        return out

    def events(self):
        """The timeline events so far (see :mod:`cuzk_jax.engine.timeline`)."""
        return self.timeline.events()

    # -- shutdown ----------------------------------------------------------------------------------------------------
    def shutdown(self, wait: bool = True, cancel_pending: bool = False, timeout: float | None = None) -> None:
        """Stop accepting jobs; wait for the submitted ones (or cancel them), then stop threads and workers.

        Jobs still pending when the threads stop (``wait=False``, or ``timeout`` seconds passed) fail with
        :class:`EngineShutdown`, so no future is left pending.
        """
        with self._lock:
            if self._stop:
                return
            self._accepting = False
            jobs = list(self._jobs.values())
        if cancel_pending:
            for job in jobs:
                job.future.cancel()
        if wait:
            cf.wait([j.future for j in jobs], timeout=timeout)
        with self._cv:
            self._stop = True
            pending = list(self._jobs.values())
            self._cv.notify_all()
        for job in pending:
            self._fail(job, EngineShutdown("engine shut down before the job completed"))
        for t in self._thread.values():
            t.join(timeout=30)
            if t.is_alive():
                log.warning("engine thread %s did not stop within 30 s", t.name)
        with self._pool_lock:
            self._closing = True  # a pool breaking from now on is not replaced
            pool = self._pool
        pool.shutdown(wait=True, cancel_futures=True)
