"""The partition batch sharded over several devices: a 1-D mesh whose axis ``"p"`` runs over partitions.

Partitions of a batch are independent proofs that share one proving key, so the natural decomposition is data
parallel: each device holds a full replica of the key (queries and R1CS tables, ``PartitionSpec()``) and a slice
of the partition axis of every per-partition array (``z`` is ``(8, P, num_vars)``, sharded on axis 1). The
pipeline (:mod:`cuzk_jax.groth16.pipeline`) wraps every device phase in :func:`shard_map` with these specs, so
each device runs exactly the single-device program on its local ``P / D`` partitions -- no collective, no
resharding inside a phase, and results identical to the unsharded prover (tested: ``tests/test_engine.py``, 4
host devices). The batch size must be a multiple of the device count;
the engine pads batches to one.

Multi-host (several machines, each with local GPUs) -- documented, not exercised by the tests:

* **Recommended: one engine per host.** Sectors are independent, so the simplest scaling is to run an engine per
  host over its local devices (the default ``jax.local_devices()``) and deal sectors out to hosts (sector ``k`` to
  host ``k mod H``, or from a shared work queue). No cross-host traffic, no collective, linear scaling. Nothing
  needs ``jax.distributed`` for this.
* **One batch over the devices of several hosts** (JAX's multi-controller SPMD model):

  1. In every process, before any other JAX call::

         jax.distributed.initialize(coordinator_address="host0:1234", num_processes=H, process_id=i)

     (arguments are discovered automatically on Slurm and Cloud TPU).
  2. ``DeviceBackend(devices=jax.devices())`` -- the *global* device list -- builds the mesh over all hosts; keys
     are replicated by ``device_put`` as here (every process loads the key).
  3. Every process must launch the same programs in the same order, so all processes must form identical batches:
     submit the same jobs everywhere and use fixed-size batches (``pause()``, submit, ``resume()``; one entry in
     ``batch_sizes``), since the collector's timing-driven choices would otherwise differ between hosts.
  4. Each process provides its own slice of ``z`` with :func:`global_batch`
     (``jax.make_array_from_process_local_data``) instead of ``device_put`` of the whole batch, and reads back the
     MSM results of its addressable shards (or all of them with
     ``jax.experimental.multihost_utils.process_allgather``).

  Steps 3-4 are not implemented by the engine (its ``stage`` copies a whole host batch); the phases themselves
  need no change, since each device only ever works on its local partitions.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

AXIS = "p"


def partition_mesh(devices=None) -> Mesh:
    """A 1-D mesh over ``devices`` (default: all local devices) with axis ``"p"`` (partitions)."""
    devices = list(devices) if devices is not None else jax.local_devices()
    if not devices:
        raise ValueError("partition_mesh: no devices")
    return Mesh(np.array(devices), (AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def along(ndim: int, axis: int) -> P:
    """The spec that shards axis ``axis`` of an ``ndim``-d array over the partition axis."""
    return P(*[AXIS if i == axis else None for i in range(ndim)])


def batch_sharding(mesh: Mesh, ndim: int = 3, axis: int = 1) -> NamedSharding:
    """Sharding of a per-partition array (default ``z``: ``(8, P, num_vars)``, partitions on axis 1)."""
    return NamedSharding(mesh, along(ndim, axis))


def global_batch(mesh: Mesh, local_z: np.ndarray):
    """Multi-host: the global ``z`` from this process's partitions (``(8, P_local, num_vars)``)."""
    return jax.make_array_from_process_local_data(batch_sharding(mesh), local_z)


def shard_map(f, mesh: Mesh, in_specs, out_specs):
    """``jax.shard_map`` without the replication check (the bodies use sort / fori_loop), across JAX versions."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    from jax.experimental.shard_map import shard_map as _sm  # older JAX

    return _sm(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)
