"""The pipelined proving engine (cuzk's contribution: keep the device busy).

* :class:`Engine` / :class:`EngineConfig` (:mod:`.core`): submit proof jobs, get futures; synthesis workers,
  cross-sector batch collector (priority classes, batches that fill), device and finisher threads; cancel, status,
  timeline. The daemon over it is :mod:`cuzk_jax.service`.
* :class:`KeyManager` (:mod:`.keys`): resident proving keys, LRU by bytes.
* :class:`DeviceBackend` / :class:`HostBackend` (:mod:`.backends`): where batches are proved; the device backend
  is the one prove pipeline (:mod:`cuzk_jax.groth16.pipeline`), sharded over the partition axis of several local
  devices (:mod:`cuzk_jax.groth16.sharding`, which also documents multi-host).
* :mod:`.timeline`: events and the Gantt plot.

Typical use (``scripts/prove.py --sectors=N``)::

    from cuzk_jax import keycache
    from cuzk_jax.engine import Engine

    with Engine(max_batch=20, key_loader=keycache.load_or_setup) as engine:
        futures = [engine.submit_sector(circuit, sector=k, partitions=10) for k in range(n)]
        for f in futures:
            result = f.result()          # JobResult: proofs, public_inputs, timings, proof_bytes()

Names are loaded lazily, so synthesis worker processes (which import :mod:`.synthesis`) never import JAX.
"""

import importlib

_LAZY = {
    "Engine": ".core", "EngineConfig": ".core", "JobResult": ".core", "ProofFuture": ".core",
    "EngineShutdown": ".core", "WorkerDied": ".core", "KeyManager": ".keys", "DeviceBackend": ".backends",
    "HostBackend": ".backends",
    "Timeline": ".timeline", "plot_timeline": ".timeline",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name], __name__)
        value = getattr(module, "plot" if name == "plot_timeline" else name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cuzk_jax.engine' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
