"""``--op=service``: the proving daemon under load against the in-process engine on the same work (issue 23).

The same jobs run twice, each on a fresh engine with the same settings and the key already resident:

* ``mode=engine`` -- submitted straight to :class:`cuzk_jax.engine.Engine` from ``clients`` threads;
* ``mode=service`` -- through the daemon (:class:`cuzk_jax.service.server.Server` on a Unix socket in a temporary
  directory, fresh journal, same process) by ``clients`` gRPC client threads.

The work: ``sectors`` bulk jobs (PoRep class, ``partitions`` each) spread over the client threads, plus
``urgent`` WinningPoSt-class jobs (one partition) submitted one every ``urgent_interval_s`` seconds while the bulk
work runs. Rows: wall time, proofs per minute, the service's throughput relative to the engine's
(``throughput_vs_engine``; the issue's target is >= 0.95), and the latency of the urgent and bulk jobs (p50, p99,
max; client-side, submit to result). Every proof is verified by the engine before it is returned.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time

DEFAULTS = {"circuit": "cube", "preset": "default", "sectors": 16, "partitions": 2}


def _pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))]


def _latencies(name, xs) -> dict:
    return {f"{name}_p50_s": _pct(xs, 50), f"{name}_p99_s": _pct(xs, 99), f"{name}_max_s": max(xs) if xs else None,
            f"{name}_mean_s": statistics.fmean(xs) if xs else None}


def _drive(submit, wait, sectors, partitions, clients, urgent, urgent_interval_s):
    """Run the workload through ``submit(tag, kind, seed, n) -> handle`` / ``wait(handle)``; returns
    (wall, bulk latencies, urgent latencies)."""
    bulk_lat, urgent_lat, errors = [], [], []
    lock = threading.Lock()

    def bulk(c):
        mine = [k for k in range(sectors) if k % clients == c]
        handles = [(time.perf_counter(), submit(f"b{k}", "porep", k, partitions)) for k in mine]
        for t0, h in handles:
            wait(h)
            with lock:
                bulk_lat.append(time.perf_counter() - t0)

    def urgents():
        for k in range(urgent):
            time.sleep(urgent_interval_s)
            t0 = time.perf_counter()
            wait(submit(f"u{k}", "winning_post", 100_000 + k, 1))
            with lock:
                urgent_lat.append(time.perf_counter() - t0)

    def guard(fn, *a):
        try:
            fn(*a)
        except Exception as e:  # noqa: BLE001 -- reported after the run
            errors.append(repr(e))

    threads = [threading.Thread(target=guard, args=(bulk, c)) for c in range(clients)]
    threads.append(threading.Thread(target=guard, args=(urgents,)))
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"load run failed: {errors[:3]}")
    return time.perf_counter() - t0, bulk_lat, urgent_lat


def load(circuit_name="cube", preset="default", sectors=16, partitions=2, *, clients=4, urgent=8,
         urgent_interval_s=0.5, backend="device", max_batch=None, synthesis="process", workers=None,
         key_dir=None, prover=None) -> list[dict]:
    from cuzk_jax import keycache
    from cuzk_jax.circuits import base
    from cuzk_jax.engine import Engine, HostBackend
    from cuzk_jax.service.client import Client
    from cuzk_jax.service.config import ServiceConfig
    from cuzk_jax.service.server import Server

    circuit = base.get_circuit(circuit_name, preset)
    pk = keycache.load_or_setup(circuit, directory=key_dir)
    max_batch = max_batch or 2 * partitions
    settings = dict(max_batch=max_batch, synthesis=synthesis, prefetch=1)
    n_proofs = sectors * partitions + urgent
    common = {"circuit": circuit_name, "preset": preset, "sectors": sectors, "partitions": partitions,
              "clients": clients, "urgent": urgent, "urgent_interval_s": urgent_interval_s, "backend": backend,
              "max_batch": max_batch, "synthesis": synthesis}
    rows = []

    def engine():
        return Engine(backend=HostBackend() if backend == "host" else None, synthesis_workers=workers,
                      prover=prover, **settings)

    with engine() as eng:
        eng.preload(circuit, pk)
        eng.warm_up([circuit])
        eng.submit(circuit, sector=-1, partitions=max_batch).result()  # compile the batch shape
        wall, bulk, urg = _drive(
            lambda tag, kind, seed, n: eng.submit(circuit, sector=seed, partitions=n, priority=kind),
            lambda f: f.result(), sectors, partitions, clients, urgent, urgent_interval_s)
    rows.append({**common, "mode": "engine", "wall_s": wall, "proofs_per_min": 60 * n_proofs / wall,
                 **_latencies("urgent", urg), **_latencies("bulk", bulk)})

    with tempfile.TemporaryDirectory(prefix="cuzk-bench-") as tmp:
        cfg = ServiceConfig(address=f"unix:{os.path.join(tmp, 's.sock')}", journal=os.path.join(tmp, "j.sqlite"),
                            backend=backend, max_batch=max_batch, synthesis=synthesis, workers=workers or 0,
                            prover=prover or "", key_dir=key_dir or "")
        server = Server(cfg, engine=engine())
        address = server.start()
        try:
            server.service.engine.preload(circuit, pk)
            server.service.engine.warm_up([circuit])
            server.service.engine.submit(circuit, sector=-1, partitions=max_batch).result()
            local = threading.local()

            def client():
                if not hasattr(local, "c"):
                    local.c = Client(address)
                return local.c

            def submit(tag, kind, seed, n):
                client().submit(tag, circuit_name, preset, priority=kind, sample=(seed, n))
                return tag

            def wait(tag):
                job = client().wait(tag, 3600)
                if job.state != "done":
                    raise RuntimeError(f"job {tag}: {job.state} {job.error}")

            wall, bulk, urg = _drive(submit, wait, sectors, partitions, clients, urgent, urgent_interval_s)
        finally:
            server.stop()
    rows.append({**common, "mode": "service", "wall_s": wall, "proofs_per_min": 60 * n_proofs / wall,
                 "throughput_vs_engine": rows[0]["wall_s"] / wall, **_latencies("urgent", urg),
                 **_latencies("bulk", bulk)})
    return rows


def run(cfg) -> list[dict]:
    """``cuzk-bench --op=service`` (once scripts/bench.py lists the op): :func:`load` with ``--circuit --preset
    --sectors --partitions --max_batch --synthesis --workers --key_dir --prover``; ``--backend=host`` where the
    script defines it."""
    max_batch = [int(x) for x in getattr(cfg, "max_batch", [])]
    return load(cfg.circuit, cfg.preset or "default", int(cfg.sectors), int(cfg.partitions),
                backend=getattr(cfg, "backend", "device") or "device", max_batch=max_batch[0] if max_batch else None,
                synthesis=cfg.synthesis, workers=cfg.workers or None, key_dir=cfg.key_dir or None,
                prover=cfg.prover or None)
