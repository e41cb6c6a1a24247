"""Parallel, limb-native witness synthesis for circuits made of a header and identical blocks.

FallbackPoSt (WindowPoSt: one block per sector, 2349 per partition) and EmptySectorUpdate (SnapDeals: one block
per challenge) repeat the same gates per block, and a block's wires depend only on its own inputs and the
header's. Their R1CS is tiled from one block (:mod:`.tiling`); this module does the same for the witness: the
``(partition, block range)`` work units go to worker processes, each synthesizes the header and its blocks with the
ordinary builder (``ConstraintSystem("witness")``) and writes their values as Fr limbs straight into one shared
``(8, P, num_vars)`` uint32 file, at the columns the tiled layout gives them::

    z = [1, header inputs, block_0 inputs, ..., block_{n-1} inputs, header aux, block_0 aux, ...]

so a worker holding blocks ``b0 .. b1 - 1`` writes its inputs at ``ni_h + b * ni_b`` and its aux at ``n_in + na_h
+ b * na_b``; the worker that holds block 0 also writes the header's columns. No Python object per wire outlives
a work unit: at full size (a WindowPoSt partition has about 10^8 wires) the parent holds only the limb array.

A circuit opts in with four members:

* ``BLOCK_PREFIX`` (the namespace prefix of its blocks, as in :func:`.tiling.tiled_r1cs`) and ``BLOCK_ALIGN``
  (work units start at multiples of it: the circuit's own sampling granule);
* ``block_count`` (blocks per partition) and ``uses_blocks()`` (False when a subclass synthesizes differently);
* ``sample_blocks(partition, seed, b0, b1) -> (inputs, offset)``: what blocks ``b0 .. b1 - 1`` need, with
  ``offset`` the block index that ``inputs`` starts at (WindowPoSt samples only those sectors; SnapDeals returns
  the partition's inputs, offset 0);
* ``block_synthesis(inputs, offset) -> (header(cs) -> shared, block(cs, shared, j))``.

The result equals stacking the builder's witnesses (``circuit.witness(circuit.sample_inputs(p, seed))``; tested).
Values are canonical limbs by default (a byte copy per value; the prover converts to Montgomery form on the device)
or Montgomery limbs (``montgomery=True``).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os

import numpy as np

from cuzk_jax import encoding
from cuzk_jax.errors import BadInput

from .cs import ConstraintSystem
from .tiling import block_tiling
from .zfile import alloc_z, map_shared, shared_z

__all__ = ["supports", "work_units", "witness_batch", "partition_z", "layout", "shutdown_pool"]


def supports(circuit) -> bool:
    """Whether ``circuit`` synthesizes as a header and identical blocks (see the module docstring)."""
    return hasattr(circuit, "block_synthesis") and circuit.uses_blocks()


def work_units(P: int, count: int, workers: int, align: int = 1) -> list[tuple[int, int, int]]:
    """``(partition, b0, b1)`` units covering ``P`` partitions of ``count`` blocks: about ``2 * workers`` of them
    in all (at least one per partition; more than one per worker evens out the load), every ``b0`` a multiple of
    ``align`` (the last unit of a partition ends at ``count``)."""
    if P < 1 or count < 1:
        raise ValueError(f"work_units: need partitions and blocks, got {P} x {count}")
    align = max(1, int(align))
    granules = -(-count // align)
    per = max(1, min(granules, -(-2 * max(1, int(workers)) // P)))
    out = []
    for p in range(P):
        for g in np.array_split(np.arange(granules), per):
            if len(g):
                out.append((p, int(g[0]) * align, min(count, (int(g[-1]) + 1) * align)))
    return out


def _synthesize(circuit, inputs, offset, b0, b1):
    """The builder's witness of the header and blocks ``b0 .. b1 - 1``: ``(witness, ni_h, na_h)``."""
    header, block = circuit.block_synthesis(inputs, offset)
    cs = ConstraintSystem("witness")
    shared = header(cs)
    ni_h, na_h = cs.num_inputs, cs.num_aux
    for j in range(b0, b1):
        with cs.namespace(f"{circuit.BLOCK_PREFIX}_{j}"):
            block(cs, shared, j)
    return cs.witness(), ni_h, na_h


def _write(circuit, unit, z, row, inputs, offset, montgomery) -> None:
    """Synthesize ``unit = (p, b0, b1)`` and write its columns into ``z[:, row, :]`` (layout: module docstring)."""
    _, b0, b1 = unit
    w, ni_h, na_h = _synthesize(circuit, inputs, offset, b0, b1)
    k = b1 - b0
    ni_b, na_b = (len(w.inputs) - ni_h) // k, (len(w.aux) - na_h) // k
    n_in = ni_h + circuit.block_count * ni_b
    if (len(w.inputs) - ni_h) % k or (len(w.aux) - na_h) % k or n_in + na_h + circuit.block_count * na_b \
            != z.shape[2]:
        raise AssertionError(f"block witness: blocks {b0}..{b1} of {circuit.name} do not tile to {z.shape[2]} "
                             f"wires (header {ni_h}+{na_h}, block {ni_b}+{na_b})")

    def put(values, start):
        if values:
            z[:, row, start:start + len(values)] = encoding.ints_to_limbs(values, "fr", montgomery=montgomery)

    put(w.inputs[ni_h:], ni_h + b0 * ni_b)
    put(w.aux[na_h:], n_in + na_h + b0 * na_b)
    if b0 == 0:
        put(w.inputs[:ni_h], 0)
        put(w.aux[:na_h], n_in)


def _task(circuit, unit, seed, inputs, path, shape, montgomery):
    """Worker: one unit into the shared file (inputs sampled here unless the caller gave them)."""
    p, b0, b1 = unit
    offset = 0
    if inputs is None:
        inputs, offset = circuit.sample_blocks(p, seed, b0, b1)
    z = map_shared(path, shape)
    _write(circuit, unit, z, p, inputs, offset, montgomery)
    z.flush()
    del z
    return unit


_POOL: dict = {}


def _pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """A ``spawn`` process pool of ``workers`` (kept between calls; safe after JAX started threads)."""
    pool = _POOL.get(workers)
    if pool is None:
        shutdown_pool()
        pool = _POOL[workers] = concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"))
    return pool


def shutdown_pool() -> None:
    """Stop the workers of :func:`witness_batch` (if any)."""
    while _POOL:
        _, pool = _POOL.popitem()
        pool.shutdown(wait=True, cancel_futures=True)


def witness_batch(circuit, partitions: int, seed: int = 0, workers: int | None = 1, montgomery: bool = False,
                  inputs_list=None, num_vars: int | None = None):
    """Witnesses of partitions ``0 .. partitions - 1`` of sector ``seed`` (``circuit.sample_inputs(p, seed)``, or
    ``inputs_list`` when given): ``(z, publics)`` with ``z`` the ``(8, P, num_vars)`` uint32 Fr limbs (canonical
    unless ``montgomery``) and ``publics`` each partition's public inputs (read back from ``z``).

    ``workers`` > 1 runs the :func:`work_units` in that many processes writing into a shared file under
    ``/dev/shm`` (the array returned maps it, already unlinked); ``None``: one per CPU. ``num_vars``: the R1CS's
    (checked against the layout; default: the circuit's R1CS)."""
    if not supports(circuit):
        raise BadInput(f"block witness: {type(circuit).__name__} is not a header-and-blocks circuit")
    P = len(inputs_list) if inputs_list is not None else int(partitions)
    if P < 1:
        raise BadInput("block witness: no partitions")
    r1cs = None
    if num_vars is None:
        r1cs = circuit.r1cs()
        num_vars = r1cs.num_vars
    shape = (8, P, int(num_vars))
    workers = (os.cpu_count() or 1) if workers is None else max(1, int(workers))
    units = work_units(P, circuit.block_count, workers, circuit.BLOCK_ALIGN)
    workers = min(workers, len(units))  # no process without a unit (a WinningPoSt partition is one block)
    if workers == 1:
        z = alloc_z(shape)
        for unit in units:
            inputs, offset = ((inputs_list[unit[0]], 0) if inputs_list is not None
                              else circuit.sample_blocks(unit[0], seed, unit[1], unit[2]))
            _write(circuit, unit, z, unit[0], inputs, offset, montgomery)
    else:
        with shared_z(shape) as (path, mapped):
            slim = circuit.without_r1cs()
            pool = _pool(workers)
            try:
                futs = [pool.submit(_task, slim, unit, seed,
                                    None if inputs_list is None else inputs_list[unit[0]], path, shape, montgomery)
                        for unit in units]
                for f in futs:
                    f.result()
            except concurrent.futures.process.BrokenProcessPool:
                shutdown_pool()  # a dead worker breaks the pool: the next call starts a fresh one
                raise
            z = mapped()
    ni = r1cs.num_inputs if r1cs is not None else None
    if ni is None:
        ni = _num_inputs(circuit)
    publics = [encoding.limbs_to_ints(z[:, p, 1:ni], "fr", montgomery=montgomery) for p in range(P)]
    return z, publics


def layout(circuit):
    """The tiled layout's :class:`~.tiling.Tiling` (sizes only), from the header and one block (structure
    synthesis: cheap next to a partition, and it builds the per-process tables a partition's synthesis uses)."""
    header, block = circuit.block_synthesis(None, 0)
    return block_tiling(header, lambda cs, shared: block(cs, shared, 0), circuit.block_count, circuit.BLOCK_PREFIX)


def _num_inputs(circuit) -> int:
    """``num_inputs`` (ONE included) of the tiled layout."""
    t = layout(circuit)
    return t.ni_h + t.count * t.ni_b


#: Work units one :func:`partition_z` call synthesizes its partition in (in turn): each holds the Python objects
#: of about ``1/PARTITION_UNITS`` of the partition's wires at a time.
PARTITION_UNITS = 16


def partition_z(circuit, partition: int, seed: int = 0, inputs=None, montgomery: bool = False):
    """One partition's witness in this process, block range by block range: ``(z, publics, layout)`` with ``z``
    the ``(8, num_vars)`` uint32 Fr limbs (canonical unless ``montgomery``), ``publics`` its public inputs and
    ``layout`` the :class:`~.tiling.Tiling` (its sizes: ``ni_h + count ni_b`` inputs, ``na_h + count na_b`` aux,
    ``m_h + count m_b`` constraints). Partition ``partition`` of sector ``seed`` (``circuit.sample_inputs``'s), or
    ``inputs`` when given. What the engine's synthesis workers run for these circuits: no R1CS is built and no
    Python object per wire outlives a unit (the whole-partition builder witness of a full WindowPoSt partition
    would hold ~10^8 Python ints)."""
    if not supports(circuit):
        raise BadInput(f"block witness: {type(circuit).__name__} is not a header-and-blocks circuit")
    t = layout(circuit)
    n_in = t.ni_h + t.count * t.ni_b
    z = alloc_z((8, 1, n_in + t.na_h + t.count * t.na_b))
    for unit in work_units(1, circuit.block_count, max(1, PARTITION_UNITS // 2), circuit.BLOCK_ALIGN):
        unit_inputs, offset = ((inputs, 0) if inputs is not None
                               else circuit.sample_blocks(int(partition), seed, unit[1], unit[2]))
        _write(circuit, unit, z, 0, unit_inputs, offset, montgomery)
    publics = encoding.limbs_to_ints(z[:, 0, 1:n_in], "fr", montgomery=montgomery)
    return z[:, 0, :], publics, t
