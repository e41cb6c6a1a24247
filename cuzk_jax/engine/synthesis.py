"""CPU witness synthesis for the engine: the worker function and the worker pools (no JAX in this module).

Witness synthesis is Python (the circuit's ``synthesize`` runs gadget code per constraint), so it holds the GIL:
threads give no parallelism for it, a process pool does. Workers are started with the ``spawn`` method (``fork``
is unsafe in a process that runs JAX/XLA threads) and import only :mod:`cuzk_jax.circuits` (numpy, no JAX), so
they start in about a second and stay small. ``scripts/bench.py --op=engine`` measures both pool kinds
(``mode=synth`` rows).

A task is one partition: ``(circuit, spec)`` with ``spec`` one of

* ``("inputs", inputs_dict)`` -- witness for explicit inputs;
* ``("sample", partition, seed)`` -- ``circuit.sample_inputs(partition, seed)`` first (a "sector" job: partition
  ``p`` of sector ``k`` is ``sample_inputs(p, seed=k)``, as :mod:`cuzk_jax.groth16.sector`);
* ``("witness", Witness)`` -- already synthesized (only the limb conversion runs).

**A partition split over several workers** (:class:`SplitSynthesis`): a circuit whose witness comes in spans
(``circuit.span_units()`` > 1 and ``circuit.witness_span(inputs, lo, hi, path)``: porep_like, a span being a range
of challenges) can be synthesized by one sampling task (:func:`sample_task`) and then ``ways`` span tasks
(:func:`span_task`) writing disjoint columns of the same shared file. The engine does this only with idle
workers (a lone sector's first partition), where it cuts that partition's latency; in a full stream each
partition stays one task.

For a header-and-blocks circuit (WindowPoSt, SnapDeals: :func:`cuzk_jax.circuits.block_witness.supports`) the
first two run :func:`~cuzk_jax.circuits.block_witness.partition_z`: the partition is synthesized block range by
block range straight into canonical limbs, so a full-size partition (~10^8 wires) never exists as Python ints.

**Large witnesses go through shared memory** (``out=``): the parent creates a file of the partition's size
(:func:`new_shared_file`, under :func:`cuzk_jax.circuits.zfile.shared_dir`), the worker builds the limbs in it (a
circuit whose ``witness`` takes ``out=``: porep_like) or writes them there, and returns ``z=None`` with ``shared``
set; the parent maps the file and unlinks it at once
(:func:`claim_shared`: the mapping outlives the name, and the memory goes when the array does). A sector-scale
partition is ~4 GiB: pickled through the pool's pipe it would cost seconds of the parent's CPU (under the GIL the
engine's threads share) and twice the memory. The parent owns the file from creation to unlinking, whatever
becomes of the task (:func:`drop_shared`), so a failed, cancelled or dropped task leaves nothing behind.

The worker returns a :class:`SynthOutput`: ``z`` as Fr limbs ``(8, num_vars)`` uint32 (the layout of
:func:`cuzk_jax.circuits.r1cs.stack_z`, converted in the worker so the parent only stacks) in the form that costs
the host least, with ``montgomery`` saying which (as :func:`cuzk_jax.circuits.r1cs.stack_z_native`): canonical for
Python-int witnesses (a byte copy per value; the device's stage converts the whole batch with one ``to_mont``),
the witness's own limbs for a :class:`~cuzk_jax.circuits.r1cs.PackedWitness` (Montgomery for the porep_like batched
path: a plain copy); then the public inputs (canonical ints, without the leading one), the witness shape (checked
against the R1CS by the engine) and the worker's start/end times (``time.perf_counter``: CLOCK_MONOTONIC on Linux,
comparable across processes) for the timeline. :func:`convert_z` changes the form on the host (the engine uses it
for the minority of a batch that mixes both forms).
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import dataclasses
import inspect
import multiprocessing
import os
import threading
import time

import numpy as np

from cuzk_jax import encoding
from cuzk_jax.circuits import zfile

KINDS = ("process", "thread")


@dataclasses.dataclass
class SynthOutput:
    z: np.ndarray  # uint32 (8, num_vars): Montgomery form if ``montgomery``, else canonical
    public_inputs: list
    num_inputs: int
    num_aux: int
    num_constraints: int | None
    t_start: float
    t_end: float
    worker: str
    montgomery: bool = True  # the form of ``z``
    shared: str | None = None  # the file ``z`` was written into (``z`` is None then): see claim_shared
    parts: tuple = ()  # a split partition's tasks: ``(worker, t_start, t_end)`` each (see SplitSynthesis)


def portable_circuit(circuit):
    """A shallow copy of ``circuit`` without its cached R1CS (what is pickled to a worker process: name, preset and
    parameters only; the worker never needs the constraint matrices)."""
    strip = getattr(circuit, "without_r1cs", None)  # circuits.base.Circuit
    return strip() if strip is not None else copy.copy(circuit)


def synthesize_partition(circuit, spec, out: str | None = None) -> SynthOutput:
    """Run one synthesis task (see the module docstring). Exceptions propagate to the job's future.

    ``out``: the path of a file of ``32 * num_vars`` bytes (:func:`new_shared_file`) to write ``z`` into instead of
    returning it; the result then has ``z=None`` and ``shared=out``. A witness of another size raises ValueError
    (nothing is written)."""
    t0 = time.perf_counter()
    kind = spec[0]
    if kind in ("sample", "inputs"):
        from cuzk_jax.circuits import block_witness

        if block_witness.supports(circuit):  # WindowPoSt, SnapDeals: limbs block range by block range
            z, public, t = (block_witness.partition_z(circuit, spec[1], spec[2]) if kind == "sample"
                            else block_witness.partition_z(circuit, 0, inputs=spec[1]))
            out_z = z if out is None else _write_shared(out, z)
            return SynthOutput(z=out_z, public_inputs=public, num_inputs=t.ni_h + t.count * t.ni_b,
                               num_aux=t.na_h + t.count * t.na_b, num_constraints=t.m_h + t.count * t.m_b,
                               t_start=t0, t_end=time.perf_counter(), worker=_worker_name(), montgomery=False,
                               shared=out)
    direct = None
    if kind == "sample":
        _, partition, seed = spec
        inputs = circuit.sample_inputs(partition, seed)
        witness, direct = _witness(circuit, inputs, out)
        public = list(circuit.public_inputs(inputs))
    elif kind == "inputs":
        inputs = spec[1]
        witness, direct = _witness(circuit, inputs, out)
        public = list(circuit.public_inputs(inputs))
    elif kind == "witness":
        witness = spec[1]
        public = list(witness.public_inputs)
    else:
        raise ValueError(f"unknown synthesis task kind {kind!r}")
    if out is None:
        z, montgomery = native_z(witness)
    else:  # the limbs straight into the shared file, in the form native_z would choose (no intermediate copy)
        from cuzk_jax.circuits.r1cs import PackedWitness

        if isinstance(witness, PackedWitness) and direct is not None and np.shares_memory(witness.limbs, direct):
            montgomery, z = witness.montgomery, None  # already in the file (the circuit wrote it there)
            direct.flush()
        elif isinstance(witness, PackedWitness):  # its limbs as they are
            montgomery = witness.montgomery
            z = _write_shared(out, witness.limbs)
        else:
            montgomery = False
            z = _write_mapped(out, witness.num_vars, lambda dst: witness.z_limbs(False, out=dst))
    return SynthOutput(z=z, public_inputs=public, num_inputs=len(witness.inputs), num_aux=len(witness.aux),
                       num_constraints=witness.num_constraints, t_start=t0, t_end=time.perf_counter(),
                       worker=_worker_name(), montgomery=montgomery, shared=out)


def _witness(circuit, inputs, out: str | None):
    """``(witness, mapping)``: ``circuit.witness(inputs)``; with a shared output file ``out`` and a circuit whose
    ``witness`` takes ``out=`` (an ``(8, 1, num_vars)`` uint32 array to build its limbs in: porep_like's batched
    path), built straight in the file's mapping (returned, to flush), so the worker holds no private copy of a
    ~4 GiB partition beside the file."""
    if out is not None and "out" in inspect.signature(circuit.witness).parameters:
        dst = zfile.map_shared(out, (8, 1, os.path.getsize(out) // 32))
        return circuit.witness(inputs, check_shape=False, out=dst), dst
    return circuit.witness(inputs, check_shape=False), None


def new_shared_file(num_vars: int) -> str:
    """The parent's side of a shared-memory hand-off: a new, empty (sparse) file sized for one partition's
    ``(8, num_vars)`` uint32 limbs under :func:`cuzk_jax.circuits.zfile.shared_dir` (BadInput when no directory
    has room). The caller owns it: :func:`claim_shared` or :func:`drop_shared` removes it."""
    fd, path = zfile.new_file(32 * int(num_vars), prefix=f"cuzk-z-{os.getpid()}-")
    os.close(fd)
    return path


def _check_shared(path: str, num_vars: int) -> None:
    """ValueError unless the shared file ``path`` was sized for ``num_vars`` wires (else the circuit does not match
    the R1CS the engine sized it by)."""
    size = os.path.getsize(path)
    if size != 32 * num_vars:
        raise ValueError(f"witness has {num_vars} wires, the shared output file holds {size // 32}: not the "
                         f"circuit shape its R1CS was made for")


def _write_shared(path: str, z: np.ndarray) -> None:
    """Worker: ``z`` (``(8, num_vars)`` uint32 limbs) into the shared file ``path``, row by row with ``os.pwrite``:
    the kernel fills the new file's pages as it copies, about twice as fast as storing through a fresh shared
    mapping, whose every 4 KiB page faults on first touch (a sector-scale partition is ~10^6 pages)."""
    _check_shared(path, z.shape[1])
    fd = os.open(path, os.O_WRONLY)
    try:
        for limb in range(z.shape[0]):
            zfile.pwrite_all(fd, np.ascontiguousarray(z[limb], dtype=np.uint32), limb * 4 * z.shape[1])
    finally:
        os.close(fd)


def _write_mapped(path: str, num_vars: int, write) -> None:
    """Worker: ``write(dst)`` into the shared file's ``(8, num_vars)`` uint32 mapping (a witness that computes its
    limbs as it writes them)."""
    _check_shared(path, num_vars)
    dst = zfile.map_shared(path, (8, num_vars))
    write(dst)
    dst.flush()


def claim_shared(out: SynthOutput) -> SynthOutput:
    """Parent: ``out`` with ``z`` mapped from its shared file (``(8, num_vars)`` uint32), the file unlinked (the
    mapping keeps the memory until the array is dropped). Results returned in-band pass through unchanged."""
    if out.shared is None or out.z is not None:
        return out
    path = out.shared
    try:
        fd = os.open(path, os.O_RDWR)
        try:
            z = zfile.map_shared(path, (8, os.fstat(fd).st_size // 32), fd=fd)
        finally:
            os.close(fd)
    finally:
        drop_shared(path)
    return dataclasses.replace(out, z=z, shared=None)


def drop_shared(path: str | None) -> None:
    """Remove a shared output file (already gone: nothing to do)."""
    if path is None:
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def span_bounds(units: int, ways: int) -> list[tuple[int, int]]:
    """``min(ways, units)`` contiguous, near-equal ranges ``(lo, hi)`` covering ``[0, units)`` in order."""
    ways = max(1, min(int(ways), int(units)))
    q, r = divmod(int(units), ways)
    cuts = [0]
    for k in range(ways):
        cuts.append(cuts[-1] + q + (k < r))
    return list(zip(cuts[:-1], cuts[1:]))


def sample_task(circuit, spec) -> tuple:
    """Worker: the inputs of a split partition (``("sample", partition, seed)``: sampled here) and
    ``(t_start, t_end, worker)``."""
    t0 = time.perf_counter()
    if spec[0] != "sample":
        raise ValueError(f"sample_task: expected a ('sample', partition, seed) spec, got kind {spec[0]!r}")
    inputs = circuit.sample_inputs(spec[1], spec[2])
    return inputs, (_worker_name(), t0, time.perf_counter())


def span_task(circuit, inputs, lo: int, hi: int, out: str) -> tuple:
    """Worker: span ``[lo, hi)`` of the partition with ``inputs`` written into the shared file ``out``
    (``circuit.witness_span``, which returns the witness's sizes) and ``(t_start, t_end, worker)``."""
    t0 = time.perf_counter()
    counts = circuit.witness_span(inputs, lo, hi, out)
    return counts, (_worker_name(), t0, time.perf_counter())


class SplitSynthesis(cf.Future):
    """One partition synthesized by several tasks of a pool: ``("sample", p, seed)`` first sampled by one task
    (``("inputs", x)`` needs none), then ``ways`` span tasks (:func:`span_bounds` of ``circuit.span_units()``)
    writing disjoint columns of the shared file ``out``, which together hold the whole witness in the limbs and
    Montgomery form of the unsplit porep_like path. The future completes with the same :class:`SynthOutput` as
    :func:`synthesize_partition` with ``out`` (``z=None``, ``shared=out``; ``parts`` lists every task) or with the
    first task's exception (a broken pool's ``BrokenExecutor`` included, so the engine's retry path sees what it
    sees for one task). ``submit(fn, *args)`` is the pool's submit; :meth:`start` raises what the first submit
    raises. ``alive()``: checked before the span tasks go in (a withdrawn job's partition stops after sampling).
    ``cancel_tasks``: :meth:`cancel` also cancels the tasks still queued (only where that is safe: see the
    engine's ``_cancel_tasks``). The future never enters the running state, so it can be cancelled until it ends;
    tasks already running then finish and their writes go to the (unlinked) file."""

    def __init__(self, submit, circuit, spec, out: str, ways: int, alive=None, cancel_tasks: bool = False):
        super().__init__()
        if spec[0] not in ("sample", "inputs"):
            raise ValueError(f"SplitSynthesis: cannot split a {spec[0]!r} task")
        self._submit, self._circuit, self._spec, self._out = submit, circuit, spec, out
        self._bounds = span_bounds(circuit.span_units(), ways)
        self._alive = alive or (lambda: True)
        self._cancel_tasks = cancel_tasks
        self._mu = threading.Lock()
        self._tasks: list = []
        self._parts: list = []
        self._left = len(self._bounds)
        self._public = None
        self._t0 = time.perf_counter()

    @property
    def ways(self) -> int:
        return len(self._bounds)

    def start(self) -> "SplitSynthesis":
        if self._spec[0] == "inputs":
            self._spans(self._spec[1], raise_=True)
        else:
            self._track(self._submit(sample_task, self._circuit, self._spec), self._sampled)
        return self

    def _track(self, fut: cf.Future, then) -> None:
        with self._mu:
            self._tasks.append(fut)
        fut.add_done_callback(then)

    def _sampled(self, fut: cf.Future) -> None:
        try:
            inputs, part = fut.result()
        except BaseException as e:  # noqa: BLE001 -- the task's error (or the broken pool) is this future's
            return self._settle(exc=e)
        with self._mu:
            self._parts.append(part)
        if self.done():
            return  # cancelled meanwhile
        if not self._alive():
            return self._settle(exc=RuntimeError("split synthesis: the job was withdrawn after sampling"))
        self._spans(inputs)

    def _spans(self, inputs, raise_: bool = False) -> None:
        try:
            self._public = list(self._circuit.public_inputs(inputs))
            for lo, hi in self._bounds:
                self._track(self._submit(span_task, self._circuit, inputs, lo, hi, self._out), self._span_done)
        except BaseException as e:  # noqa: BLE001 -- a pool shut down or broken under us
            if raise_ and not self._tasks:
                raise
            self._settle(exc=e)

    def _span_done(self, fut: cf.Future) -> None:
        try:
            counts, part = fut.result()
        except BaseException as e:  # noqa: BLE001
            return self._settle(exc=e)
        with self._mu:
            self._parts.append(part)
            self._left -= 1
            last = self._left == 0
        if last:  # every span reports the whole witness's sizes (block_counts): the last one's will do
            self._settle(SynthOutput(
                z=None, public_inputs=self._public, num_inputs=counts["num_inputs"], num_aux=counts["num_aux"],
                num_constraints=counts["num_constraints"], t_start=self._t0, t_end=max(p[2] for p in self._parts),
                worker=f"{self.ways} workers", montgomery=True, shared=self._out, parts=tuple(self._parts)))

    def _settle(self, result=None, exc: BaseException | None = None) -> None:
        try:
            if exc is None:
                self.set_result(result)
            else:
                self.set_exception(exc)
        except cf.InvalidStateError:
            return  # already settled or cancelled: the first outcome stands
        if exc is not None:
            self._cancel_queued()

    def cancel(self) -> bool:
        ok = super().cancel()
        if ok:
            self._cancel_queued()
        return ok

    def _cancel_queued(self) -> None:
        if not self._cancel_tasks:
            return
        with self._mu:
            tasks = list(self._tasks)
        for f in tasks:
            f.cancel()


def _worker_name() -> str:
    return f"pid{os.getpid()}" if multiprocessing.parent_process() is not None else threading.current_thread().name


def native_z(witness) -> tuple[np.ndarray, bool]:
    """``(z, montgomery)``: the witness's Fr limbs ``(8, num_vars)`` uint32 in the form that costs the host least,
    and which form that is. A :class:`~cuzk_jax.circuits.r1cs.PackedWitness` keeps its own form (a copy of its
    limbs: Montgomery on the porep_like batched path); any other witness is canonical (Python ints byte-copied and
    range-checked, never multiplied by ``R`` on the host)."""
    from cuzk_jax.circuits.r1cs import stack_z_native

    z, montgomery = stack_z_native([witness])
    return z[:, 0, :], montgomery


def convert_z(z: np.ndarray, montgomery: bool) -> np.ndarray:
    """Fr limbs ``(8, ...)`` uint32 from one form to the other on the host: ``montgomery`` is the form ``z`` is in
    (True: Montgomery in, canonical out; False: canonical in, Montgomery out). Goes through Python ints (a multiply
    and reduction per value): only for the few partitions of a batch that mixes both forms."""
    shape = z.shape
    ints = encoding.limbs_to_ints(z.reshape(shape[0], -1), "fr", montgomery=montgomery)
    return encoding.ints_to_limbs(ints, "fr", montgomery=not montgomery).reshape(shape)


def _warm(circuits=()):
    """Warm-up task for a worker process: import the circuit registry and synthesize one partition of each circuit
    (of a header-and-blocks circuit, its header and one block), so per-process lazy tables (e.g. Poseidon round
    constants: seconds for porep_like) are built before real work. A circuit with a ``warm_worker()`` method does
    that instead (porep_like: one challenge of its batched path, not a whole ~4 GiB partition per worker)."""
    from cuzk_jax.circuits import base, block_witness

    base.list_circuits()
    for c in circuits:
        if block_witness.supports(c):  # the header and one block build the same tables as a whole partition
            block_witness.layout(c)
        elif hasattr(c, "warm_worker"):
            c.warm_worker()
        else:
            synthesize_partition(c, ("sample", 0, 0))
    time.sleep(0.2)  # keep this worker busy a moment so the other warm-up tasks go to the other workers
    return os.getpid()


def make_pool(kind: str, workers: int) -> cf.Executor:
    """A synthesis pool: ``"process"`` (spawned processes, real parallelism) or ``"thread"``."""
    if kind not in KINDS:
        raise ValueError(f"synthesis must be one of {KINDS}, got {kind!r}")
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"synthesis_workers must be a positive int, got {workers!r}")
    if kind == "thread":
        return cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="synth")
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def warm_pool(pool: cf.Executor, workers: int, circuits=()) -> set:
    """Start every worker of a process pool now (spawn, imports, one synthesis of each of ``circuits``) instead of
    on the first jobs; returns the worker pids that ran a warm-up task. Threads share the parent's state: one
    synthesis per circuit in the calling thread warms them all."""
    circuits = [portable_circuit(c) for c in circuits]
    if isinstance(pool, cf.ProcessPoolExecutor):
        futs = [pool.submit(_warm, circuits) for _ in range(workers)]
        cf.wait(futs)
        return {f.result() for f in futs}
    for c in circuits:
        synthesize_partition(c, ("sample", 0, 0))
    return {os.getpid()}


def default_workers() -> int:
    """One synthesis worker per core, keeping one core for the device/finish threads."""
    return max(1, (os.cpu_count() or 2) - 1)
