"""The partition batch sharded over several devices: a 1-D mesh whose axis ``"p"`` runs over partitions.

Partitions of a batch are independent proofs that share one proving key, so the natural decomposition is data
parallel: each device holds a full replica of the key (queries and R1CS tables, ``PartitionSpec()``) and a slice
of the partition axis of every per-partition array (``z`` is ``(8, P, num_vars)``, sharded on axis 1). The
pipeline (:mod:`cuzk_jax.groth16.pipeline`) wraps every device phase in :func:`shard_map` with these specs, so
each device runs exactly the single-device program on its local ``P / D`` partitions -- no collective, no
resharding inside a phase, and results identical to the unsharded prover (tested: ``tests/test_engine.py``, 4
host devices). The batch size must be a multiple of the device count;
the engine pads batches to one.

Several devices and hosts, as used:

* ``cuzk_jax.engine.multidevice.MultiDeviceEngine`` runs either this sharded batch (mode ``"sharded"``) or one
  engine per device with the key committed to each device (``"per_device"``); ``cuzk-bench --op=multigpu``
  measures both.
* ``cuzk_jax.engine.distributed`` runs several processes or hosts through ``jax.distributed``: partitions are
  assigned by process index, each process proves its share on its own local devices (no program spans
  processes), and the proofs are gathered to process 0 with ``jax.experimental.multihost_utils``.
* One batch over the devices of several hosts (JAX's global SPMD: a mesh over ``jax.devices()``, each process's
  slice of ``z`` given by :func:`global_batch`) is not used: sectors are independent, so per-process proving
  needs no cross-host traffic, and every process would have to form identical batches.
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
