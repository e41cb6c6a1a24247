"""Prometheus metrics of the daemon (``prometheus-client``, a registry of its own -- never the global one).

==================================  =========  ======================================================================
name                                type       meaning
==================================  =========  ======================================================================
``cuzk_queue_depth``                gauge      partitions accepted but not yet in a device batch, label ``class``
``cuzk_queued_jobs``                gauge      jobs accepted and not finished, label ``class``
``cuzk_proofs_total``               counter    partition proofs delivered (verified)
``cuzk_proofs_per_minute``          gauge      the engine's proofs per minute since its first job
``cuzk_jobs_finished_total``        counter    finished jobs, labels ``class`` and ``state`` (done/failed/cancelled)
``cuzk_job_failures_total``         counter    failed jobs, label ``cause`` (the error class, e.g. ``Unsatisfied``)
``cuzk_phase_seconds``              histogram  per finished job, seconds spent in each phase, label ``phase``
                                               (synthesis, queue, stage-free device phases, finish, verify)
``cuzk_job_latency_seconds``        histogram  submit (to the engine) to completion, label ``class``
``cuzk_device_memory_bytes``        gauge      per device and ``kind`` (bytes_in_use, peak_bytes_in_use,
                                               bytes_limit) where the device reports it
``cuzk_key_resident_bytes``         gauge      bytes of each resident proving key, label ``circuit``
``cuzk_key_budget_bytes``           gauge      the resident-key budget (absent without one)
``cuzk_host_witness_bytes``         gauge      host bytes of witnesses in synthesis, ready or staging
``cuzk_host_witness_budget_bytes``  gauge      the host witness budget (absent without one)
``cuzk_key_loads_total`` etc.       gauge      key manager counters: loads, hits, evictions
``cuzk_split_partitions_total``     gauge      partitions synthesized by several workers at once (split synthesis)
==================================  =========  ======================================================================

Gauges are read from the engine when scraped (:class:`_EngineCollector`), so they are never stale.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from cuzk_jax import priorities

_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)


class _EngineCollector:
    """Scrape-time gauges from ``service.engine`` (queue depths, throughput, device memory, keys)."""

    def __init__(self, service):
        self.service = service

    def describe(self):
        return []  # gauges are computed at collection time; no registration-time collection

    def collect(self):
        service = self.service
        st = service.engine.status()
        depth = GaugeMetricFamily("cuzk_queue_depth", "partitions accepted but not yet in a device batch",
                                  labels=["class"])
        jobs = GaugeMetricFamily("cuzk_queued_jobs", "jobs accepted and not finished", labels=["class"])
        for c in priorities.CLASSES:
            depth.add_metric([c], st["classes"][c]["partitions_queued"])
            jobs.add_metric([c], st["classes"][c]["jobs"])
        yield depth
        yield jobs
        yield GaugeMetricFamily("cuzk_proofs_per_minute", "proofs per minute since the first job",
                                value=st["proofs_per_minute"])
        mem = GaugeMetricFamily("cuzk_device_memory_bytes", "device memory as the device reports it",
                                labels=["device", "kind"])
        for name, stats in service.device_memory().items():
            for kind, value in stats.items():
                mem.add_metric([name, kind], value)
        yield mem
        keys = GaugeMetricFamily("cuzk_key_resident_bytes", "bytes of each resident proving key", labels=["circuit"])
        for digest, n in st["keys"]["resident"].items():
            keys.add_metric([service.key_label(digest)], n)
        yield keys
        if st["keys"]["budget_bytes"]:
            yield GaugeMetricFamily("cuzk_key_budget_bytes", "resident key budget", value=st["keys"]["budget_bytes"])
        for name in ("loads", "hits", "evictions"):
            yield GaugeMetricFamily(f"cuzk_key_{name}_total", f"key manager {name}", value=st["keys"][name])
        yield GaugeMetricFamily("cuzk_host_witness_bytes", "host bytes of witnesses in synthesis, ready or staging",
                                value=st["host_witness"]["bytes"])
        if st["host_witness"]["budget_bytes"]:
            yield GaugeMetricFamily("cuzk_host_witness_budget_bytes", "host witness budget",
                                    value=st["host_witness"]["budget_bytes"])
        yield GaugeMetricFamily("cuzk_split_partitions_total", "partitions synthesized by several workers at once",
                                value=st["synthesis"]["split_partitions"])


class Metrics:
    """The daemon's metrics (see the module docstring); ``text()`` is the Prometheus exposition."""

    def __init__(self, service):
        self.registry = CollectorRegistry(auto_describe=False)
        self.proofs = Counter("cuzk_proofs", "partition proofs delivered", registry=self.registry)
        self.finished = Counter("cuzk_jobs_finished", "finished jobs", ["class", "state"], registry=self.registry)
        self.failures = Counter("cuzk_job_failures", "failed jobs by cause", ["cause"], registry=self.registry)
        self.phases = Histogram("cuzk_phase_seconds", "seconds per phase per job", ["phase"], buckets=_BUCKETS,
                                registry=self.registry)
        self.latency = Histogram("cuzk_job_latency_seconds", "job latency", ["class"], buckets=_BUCKETS,
                                 registry=self.registry)
        self.registry.register(_EngineCollector(service))

    def job_finished(self, priority: str, state: str, result=None, cause: str | None = None) -> None:
        self.finished.labels(priority, state).inc()
        if cause:
            self.failures.labels(cause).inc()
        if result is not None:
            self.proofs.inc(len(result.proofs))
            for phase, sec in result.timings.phases.items():
                self.phases.labels(phase).observe(sec)
            self.latency.labels(priority).observe(result.timings.total)

    def text(self) -> str:
        return generate_latest(self.registry).decode()
