"""The daemon's configuration: one :class:`ServiceConfig`, read from a TOML file and overridden by flags.

A TOML file holds the same names as the fields below, at the top level, plus an optional ``[priority_delays_s]``
table (``{class: seconds}``, see :class:`cuzk_jax.engine.EngineConfig`)::

    address = "localhost:50061"        # or "unix:/run/cuzk/cuzk.sock"
    journal = "/var/lib/cuzk/journal.sqlite"
    backend = "device"
    max_batch = 10
    preload = ["porep_like/domain20"]
    [priority_delays_s]
    porep = 300

Unknown names and values of the wrong type are refused (:class:`~cuzk_jax.errors.BadInput` naming them), never
ignored. :meth:`ServiceConfig.check` enforces the security defaults: a Unix socket or a loopback address is served
as is; any other TCP address only with TLS (``tls_cert`` and ``tls_key``) *and* a bearer token (``token_file``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import tomllib

from cuzk_jax import priorities
from cuzk_jax.errors import BadInput

_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "cuzk_jax")
DEFAULT_ADDRESS = "unix:" + os.path.join(_CACHE, "service", "cuzk.sock")
DEFAULT_JOURNAL = os.path.join(_CACHE, "service", "journal.sqlite")
BACKENDS = ("device", "host")
LOOPBACK_NAMES = ("localhost",)


@dataclasses.dataclass
class ServiceConfig:
    """Daemon settings.

    Listening: ``address`` (``unix:PATH`` or ``HOST:PORT``), ``tls_cert`` / ``tls_key`` (PEM files),
    ``token_file`` (a file holding the bearer token every call must carry; required with TLS beyond localhost),
    ``metrics_address`` (``HOST:PORT`` of a Prometheus HTTP endpoint, "" for none; the gRPC ``Metrics`` call always
    works), ``rpc_threads`` (calls served at once; an Await in progress holds one).
    Limits: ``max_request_bytes`` (largest gRPC message accepted), ``max_partitions`` (per job), ``max_queued_jobs``
    (jobs not yet finished), ``max_await_s`` (longest single Await).
    Storage: ``journal`` (SQLite file), ``key_dir`` (proving key cache; "" = keycache's default), ``input_dir``
    (where ``input_path`` requests may read; "" refuses them).
    Engine: ``backend`` (``device``: the prove pipeline on the local accelerators; ``host``: Python-int reference
    prover, tiny circuits only), ``max_batch``, ``batch_sizes``, ``max_wait_s`` (0 = the engine's default),
    ``fill``, ``synthesis``, ``workers`` (0 = cores - 1), ``prefetch``, ``key_budget_bytes`` (device budget for
    resident keys, 0 = none), ``witness_budget_bytes`` (host bytes of witnesses in synthesis, ready or staging; 0 =
    none: :attr:`cuzk_jax.engine.EngineConfig.host_budget_bytes`), ``prover`` (the pipeline's config text), ``preload`` (``circuit[/preset]`` keys made
    resident at start), ``priority_delays_s``, ``precompile`` (default true: a key made resident -- at start or on
    first use -- also gets its device programs compiled for every batch shape then, so the first jobs do not wait
    for them; :attr:`cuzk_jax.engine.EngineConfig.precompile`), ``split_synthesis`` (default true: a partition
    entering synthesis while workers would idle is split over them; false where concurrent writers of one shared
    file are slow on the host: :attr:`cuzk_jax.engine.EngineConfig.split_synthesis`).
    """

    address: str = DEFAULT_ADDRESS
    tls_cert: str = ""
    tls_key: str = ""
    token_file: str = ""
    metrics_address: str = ""
    rpc_threads: int = 64
    max_request_bytes: int = 16 << 20
    max_partitions: int = 64
    max_queued_jobs: int = 100_000
    max_await_s: float = 3600.0
    journal: str = DEFAULT_JOURNAL
    key_dir: str = ""
    input_dir: str = ""
    backend: str = "device"
    max_batch: int = 10
    batch_sizes: list = dataclasses.field(default_factory=list)
    max_wait_s: float = 0.0
    fill: str = "predict"
    synthesis: str = "process"
    workers: int = 0
    prefetch: int = 1
    key_budget_bytes: int = 0
    witness_budget_bytes: int = 0
    prover: str = ""
    preload: list = dataclasses.field(default_factory=list)
    priority_delays_s: dict = dataclasses.field(default_factory=dict)
    precompile: bool = True
    split_synthesis: bool = True

    # -- reading ---------------------------------------------------------------------------------------------------
    @classmethod
    def from_toml(cls, path: str) -> "ServiceConfig":
        """The defaults overridden by the TOML file ``path``."""
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as e:
            raise BadInput(f"config {path}: not valid TOML ({e})") from None
        return cls().replace(data, where=f"config {path}")

    def replace(self, values: dict, where: str = "config") -> "ServiceConfig":
        """A copy with ``values`` (field name -> value) applied, each type-checked against the field."""
        types = {f.name: f for f in dataclasses.fields(self)}
        out = {}
        for name, value in values.items():
            if name not in types:
                raise BadInput(f"{where}: unknown setting {name!r}; known: {', '.join(sorted(types))}")
            default = getattr(ServiceConfig(), name)
            if isinstance(default, bool) or isinstance(value, bool):
                ok = type(value) is type(default)
            elif isinstance(default, float):
                ok = isinstance(value, (int, float))
                value = float(value) if ok else value
            else:
                ok = isinstance(value, type(default))
            if not ok:
                raise BadInput(f"{where}: {name} must be a {type(default).__name__}, got {value!r}")
            out[name] = value
        return dataclasses.replace(self, **out)

    # -- checks ----------------------------------------------------------------------------------------------------
    def check(self) -> "ServiceConfig":
        """Self, after refusing unsafe or invalid settings (one :class:`BadInput` naming the setting)."""
        kind, _ = parse_address(self.address)
        if kind == "remote":
            missing = [n for n in ("tls_cert", "tls_key", "token_file") if not getattr(self, n)]
            if missing:
                raise BadInput(f"address {self.address}: listening beyond localhost needs TLS and a token; set "
                               f"{', '.join(missing)}")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise BadInput("tls_cert and tls_key go together")
        for name in ("tls_cert", "tls_key", "token_file"):
            path = getattr(self, name)
            if path and not os.path.isfile(path):
                raise BadInput(f"{name}: {path}: no such file")
        if self.token_file and not self.token():
            raise BadInput(f"token_file {self.token_file}: empty")
        if self.metrics_address:
            mkind, _ = parse_address(self.metrics_address)
            if mkind == "unix":
                raise BadInput(f"metrics_address {self.metrics_address}: must be HOST:PORT")
        if self.backend not in BACKENDS:
            raise BadInput(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        for name in ("rpc_threads", "max_request_bytes", "max_partitions", "max_queued_jobs", "max_batch"):
            if getattr(self, name) < 1:
                raise BadInput(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("workers", "prefetch", "key_budget_bytes", "witness_budget_bytes"):
            if getattr(self, name) < 0:
                raise BadInput(f"{name} must be >= 0, got {getattr(self, name)}")
        if not (math.isfinite(self.max_await_s) and self.max_await_s > 0):
            raise BadInput(f"max_await_s must be a positive number, got {self.max_await_s}")
        for p in self.preload:
            if not isinstance(p, str) or not p:
                raise BadInput(f"preload entries are 'circuit' or 'circuit/preset' strings, got {p!r}")
        for name in self.priority_delays_s:
            try:
                priorities.check(name)
            except ValueError as e:
                raise BadInput(f"priority_delays_s: {e}") from None
        try:
            self.engine_config().sizes(1)
            self.engine_config().delays()
        except ValueError as e:
            raise BadInput(str(e)) from None
        return self

    def token(self) -> str:
        """The bearer token (the token file's text, stripped), "" when none is configured."""
        if not self.token_file:
            return ""
        with open(self.token_file, encoding="utf-8") as fh:
            return fh.read().strip()

    def engine_config(self):
        """The :class:`cuzk_jax.engine.EngineConfig` these settings describe (the service always verifies)."""
        from cuzk_jax.engine import EngineConfig

        return EngineConfig(max_batch=self.max_batch, batch_sizes=tuple(self.batch_sizes) or None,
                            max_wait_s=self.max_wait_s or None, fill=self.fill, synthesis=self.synthesis,
                            synthesis_workers=self.workers or None, prefetch=self.prefetch,
                            key_budget_bytes=self.key_budget_bytes or None, prover=self.prover or None,
                            host_budget_bytes=self.witness_budget_bytes or None,
                            priority_delays_s=dict(self.priority_delays_s) or None, verify=True,
                            precompile=self.precompile, split_synthesis=self.split_synthesis)


def parse_address(address: str) -> tuple[str, str]:
    """``("unix", path)``, ``("local", host:port)`` (loopback) or ``("remote", host:port)``; BadInput if malformed."""
    if not isinstance(address, str) or not address:
        raise BadInput("address: empty")
    if address.startswith("unix:"):
        path = address[len("unix:"):]
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise BadInput(f"address {address}: no socket path")
        return "unix", os.path.expanduser(path)
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise BadInput(f"address {address!r}: expected unix:PATH or HOST:PORT")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if bare in LOOPBACK_NAMES:
        return "local", address
    try:
        return ("local" if ipaddress.ip_address(bare).is_loopback else "remote"), address
    except ValueError:
        return "remote", address  # a host name other than localhost: may resolve to anything
