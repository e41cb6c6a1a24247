"""The proving service: a long-running daemon with cuzk's gRPC API over one engine (issue 23).

* :mod:`.server` -- :class:`~.server.ProvingService` (validation, journal, engine, results), :class:`~.server.Server`
  (gRPC, TLS, token, limits, error statuses), :func:`~.server.serve` (``python -m cuzk_jax serve``);
* :mod:`.journal` -- the SQLite (WAL) job journal: recorded before accepted, resumed after a restart, one result per
  job id;
* :mod:`.metrics` -- the Prometheus metrics;
* :mod:`.config` -- :class:`~.config.ServiceConfig` from a TOML file and flags, with the security checks;
* :mod:`.client` -- the Python client and the CLI client (``python -m cuzk_jax client``);
* ``proving.proto`` and its generated ``proving_pb2`` / ``proving_pb2_grpc`` modules.

docs/service.md is the manual. Submodules load lazily, so importing this package loads neither gRPC nor JAX.
"""

from cuzk_jax import lazy

__all__ = ["client", "config", "journal", "metrics", "proving_pb2", "proving_pb2_grpc", "server"]

__getattr__, __dir__ = lazy.submodules(__name__, __all__)
