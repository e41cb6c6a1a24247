"""``--op=multigpu``: one sector and a stream of sectors on 1 and on all local devices, in one call.

For each device count ``n`` in ``{1, D}`` (``D`` = local devices; ``--impl`` picks the modes, default both) a
:class:`~cuzk_jax.engine.multidevice.MultiDeviceEngine` is built over the first ``n`` devices -- ``per_device``
(one engine per device, keys committed per device, every job split over the devices) or ``sharded`` (one engine,
batches sharded over a mesh) -- its key made resident on every device, and every batch shape compiled before the
clock starts (warm-up). Then:

* **sector**: one sector of ``--partitions`` partitions (10 x 2^20 with the default ``domain20`` preset) submitted
  alone: its latency;
* **stream**: ``--sectors`` sectors submitted at once: wall time, proofs per minute, and each device's busy time
  (the device phases on its engine's timeline, each ended by ``block_until_ready``) and busy fraction.

The engines verify every proof (pairing) before returning it, as in production; synthesis runs in the engines'
worker pools (``--synthesis``, ``--workers``: the total, shared out between per-device engines), overlapped with
the devices. Ratios (rows with ``n > 1``): ``ratio`` = stream throughput over the 1-device stream's;
``device_ratio`` = the 1-device busy seconds over the largest per-device busy seconds for the same stream -- the
scaling of the device work alone, which ``ratio`` reaches when synthesis keeps up. ``per_device`` and ``sharded``
rows of the same ``n`` answer which mode is faster (a last row ``mode=faster`` names it and by how much).
Batches: ``--max_batch`` (default ``--partitions``) per device (sharded: times ``n`` over the mesh), plus the shape
of one sector's share per device.

  cuzk-bench --op=multigpu                                   # 10 x 2^20 sectors on 1 and 2 GPUs
  cuzk-bench --op=multigpu --circuit=cube --partitions=2 --sectors=2 --synthesis=thread --workers=1   # CPU check
"""

from __future__ import annotations

import time

DEFAULTS = {"preset": "domain20", "sectors": 4, "max_wait_s": 1.0}
MODES = ("per_device", "sharded")


def _say(msg: str) -> None:
    print(msg, flush=True)


def measure(circuit, pk, devices, mode: str, partitions: int, sectors: list, *, max_batch: int | None = None,
            synthesis: str = "process", workers: int | None = None, max_wait_s: float = 1.0,
            prover_config=None) -> dict:
    """One row: warm a :class:`MultiDeviceEngine` of ``mode`` over ``devices``, then time one sector and a stream
    of ``sectors`` (module docstring). Every proof is verified by the engines before it is counted."""
    from cuzk_jax.engine.multidevice import MultiDeviceEngine, SHARDED

    n = len(devices)
    per = max_batch or partitions
    share = -(-partitions // n)  # the largest chunk of one sector on one device
    if mode == SHARDED and n > 1:
        sizes, mb = (share * n, per * n), per * n
    else:
        sizes, mb = (share, per), per
    with MultiDeviceEngine(mode, devices, max_batch=mb, batch_sizes=tuple(sorted(set(sizes))),
                           max_wait_s=max_wait_s, synthesis=synthesis, synthesis_workers=workers,
                           prover=prover_config) as eng:
        t0 = time.perf_counter()
        eng.preload(circuit, pk)
        t_key = time.perf_counter() - t0
        eng.warm_up([circuit])
        # warm-up (sector seeds below -1 are never measured): a full batch on every device, then one sector's share
        eng.submit(circuit, sector=-2, partitions=per * n).result()
        eng.submit(circuit, sector=-3, partitions=partitions).result()
        warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        one = eng.submit_sector(circuit, sector=sectors[0], partitions=partitions).result()
        sector_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        futs = [eng.submit_sector(circuit, sector=k, partitions=partitions) for k in sectors]
        results = [f.result() for f in futs]
        t1 = time.perf_counter()
        busy = eng.busy_seconds(since=t0, until=t1)
        st = eng.status()
    wall = t1 - t0
    proofs = len(sectors) * partitions
    return {"devices": n, "mode": eng.mode, "partitions": partitions, "sectors": len(sectors),
            "max_batch": eng.max_batch, "sector_s": sector_s, "stream_s": wall, "proofs_per_min": 60 * proofs / wall,
            "sectors_per_min": 60 * len(sectors) / wall, "busy_s": [round(b, 4) for b in busy],
            "busy_frac": [round(b / wall, 4) for b in busy], "max_busy_s": max(busy),
            "verified": bool(one.verified) and all(r.verified for r in results),
            # a replicated (sharded-mode) key's nbytes is one replica's: every device holds that much
            "key_bytes_per_device": ([st["engines"][0]["keys"]["resident_bytes"]] * n if len(st["engines"]) == 1
                                     else [e["keys"]["resident_bytes"] for e in st["engines"]]),
            "batches": [e["batch_sizes"] for e in st["engines"]], "key_s": t_key, "warmup_s": warm}


def run(cfg) -> list[dict]:
    """``cuzk-bench --op=multigpu``: :func:`measure` for 1 and all local devices, each mode of ``--impl``;
    ``--circuit --preset --partitions --sectors --first_sector --max_batch --synthesis --workers --max_wait_s
    --prover --key_dir``."""
    import jax

    from cuzk_jax.circuits import base
    from cuzk_jax.errors import BadInput

    from . import emit
    from .engine import _key

    modes = tuple(cfg.impl) or MODES
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise BadInput(f"--op=multigpu: --impl must be among {MODES}, got {bad}")
    circuit = base.get_circuit(cfg.circuit, cfg.preset or "tiny")
    r1cs = circuit.r1cs()
    pk = _key(circuit, r1cs, cfg.key_dir or None)
    devices = jax.local_devices()
    partitions, first = int(cfg.partitions), int(cfg.first_sector)
    sectors = list(range(first, first + int(cfg.sectors)))
    max_batch = int(cfg.max_batch[0]) if cfg.max_batch else None
    _say(f"multigpu: {circuit}: {r1cs.num_constraints} constraints, domain {pk.domain_size}, {len(devices)} local "
         f"device(s) ({devices[0].device_kind}); {len(sectors)} sectors x {partitions} partitions")
    common = {"circuit": cfg.circuit, "preset": circuit.preset, "constraints": r1cs.num_constraints,
              "domain": pk.domain_size}
    rows: list[dict] = []
    base_row = None
    for n in sorted({1, len(devices)}):
        for mode in (modes if n > 1 else modes[:1]):
            row = {**common, **measure(circuit, pk, devices[:n], mode, partitions, sectors, max_batch=max_batch,
                                       synthesis=cfg.synthesis, workers=cfg.workers or None,
                                       max_wait_s=cfg.max_wait_s, prover_config=cfg.prover or None)}
            if n == 1:
                base_row = row
            row["ratio"] = row["proofs_per_min"] / base_row["proofs_per_min"]
            row["sector_ratio"] = base_row["sector_s"] / row["sector_s"]
            row["device_ratio"] = base_row["max_busy_s"] / row["max_busy_s"] if row["max_busy_s"] else 0.0
            row["ok"] = row["verified"]
            _say(f"  {n} device(s), {row['mode']}: sector {row['sector_s']:.3f} s, stream {row['stream_s']:.3f} s "
                 f"({row['proofs_per_min']:.1f} proofs/min, x{row['ratio']:.2f}; device x{row['device_ratio']:.2f}), "
                 f"busy {row['busy_s']} s")
            emit(rows, row)
    multi = [r for r in rows if r["devices"] > 1]
    if len(multi) > 1:  # which mode is faster on all the devices (stream throughput), by how much
        best, other = sorted(multi, key=lambda r: -r["proofs_per_min"])[:2]
        emit(rows, {**common, "devices": best["devices"], "mode": "faster", "faster": best["mode"],
                    "by": best["proofs_per_min"] / other["proofs_per_min"], "ratio": best["ratio"]})
    return rows
