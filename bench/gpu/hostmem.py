"""Host-side diagnostic for the device machine: where concurrent witness synthesis spends its time.

    python3 bench/gpu/hostmem.py --preset=sector32g --workers=15 --gib=2 [--parts=memory,files] \
        --out=$OUT/hostmem.json

``--parts``:

* ``memory`` (``workers`` processes, ``gib`` GiB each): writing fresh tmpfs files with ``pwrite`` (every page
  allocated and zeroed by the kernel first) against rewriting the same files (pages present), a shared mapping of
  present pages, one file written by every process in disjoint ranges (the split synthesis's pattern: tmpfs takes
  the file's lock per write), ``posix_fallocate``, and anonymous memory touched fresh against reused.
* ``files`` (``cuzk_jax.engine.synthesis.span_task`` on the ``porep_like`` workers of ``worker_pool``): one
  partition by one worker; one partition split over every worker into one file: fresh, into the same pages
  again, through the workers' mappings instead of ``pwrite``, into a file allocated first (``posix_fallocate``
  beside the sampling, as ``_sample_with_fallocate`` times); ``min(10, workers)`` whole partitions at once, each
  into its own file, fresh and again. (A file per span plus the parent's assembly was measured in session 31 and
  removed: bench/results/REMOVED_VARIANTS.md.)

Prints a table and writes JSON (system facts included: CPU count, transparent huge page settings, memory)."""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

SHM = "/dev/shm"


def _pwrite_range(path, nbytes, off, chunk=1 << 18):
    """Write ``nbytes`` at ``off`` of ``path`` in ``chunk``-byte ``os.pwrite`` calls (as the synthesis writers do);
    the seconds it took."""
    from cuzk_jax.circuits import zfile

    buf = np.full(chunk // 4, 7, np.uint32)
    fd = os.open(path, os.O_WRONLY)
    t = time.perf_counter()
    try:
        for o in range(off, off + nbytes, chunk):
            zfile.pwrite_all(fd, buf, o)
    finally:
        os.close(fd)
    return time.perf_counter() - t


def _map_range(path, nbytes, off):
    t = time.perf_counter()
    m = np.memmap(path, np.uint32, "r+", offset=off, shape=(nbytes // 4,))
    m[:] = 7
    del m
    return time.perf_counter() - t


def _anon(nbytes):
    t = time.perf_counter()
    a = np.ones(nbytes // 4, np.uint32)
    fresh = time.perf_counter() - t
    t = time.perf_counter()
    np.add(a, 1, out=a)
    return fresh, time.perf_counter() - t


def _fallocate(path):
    t = time.perf_counter()
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    return time.perf_counter() - t


def _span_mapped(circuit, inputs, lo, hi, out):
    """What ``span_task`` does (challenges ``lo .. hi - 1`` into the shared file ``out``), the columns stored
    through a plain shared mapping (``zfile.map_shared`` with a descriptor: not an ``np.memmap``, so
    ``fill_instances`` stores into it instead of calling ``os.pwrite``). Returns ``span_task``'s shape of result."""
    from cuzk_jax.circuits import zfile
    from cuzk_jax.circuits.porep_like import fill_instances, synthesize_batch

    t0 = time.perf_counter()
    k = np.arange(lo, hi)
    cs, counts = synthesize_batch(circuit, [inputs], (np.zeros_like(k), k))
    fd = os.open(out, os.O_RDWR)
    try:
        z = zfile.map_shared(out, (8, 1, os.fstat(fd).st_size // 32), fd=fd)
    finally:
        os.close(fd)
    fill_instances(cs, counts, z, np.zeros_like(k), k, True)
    del z
    return counts, ("mapped", t0, time.perf_counter())


def _sample_with_fallocate(circuit, p, seed, path):
    """Sampling with the shared file's pages allocated by a thread beside it: the sampling's time both ways."""
    import threading
    t = time.perf_counter()
    circuit.sample_inputs(p, seed)
    alone = time.perf_counter() - t
    box = {}
    th = threading.Thread(target=lambda: box.update(t=_fallocate(path)))
    t = time.perf_counter()
    th.start()
    circuit.sample_inputs(p, seed)
    sampled = time.perf_counter() - t
    th.join()
    return alone, sampled, time.perf_counter() - t, box["t"]


def _new(nbytes):
    """A new sparse file of ``nbytes`` where the engine puts its shared witness files (``zfile.new_file``:
    ``/dev/shm`` when it has room)."""
    from cuzk_jax.circuits import zfile

    fd, path = zfile.new_file(nbytes, prefix="hostmem-")
    os.close(fd)
    return path


def _system():
    def read(p):
        try:
            return open(p).read().strip()
        except OSError:
            return None
    mem = {ln.split(":")[0]: ln.split(":")[1].strip() for ln in (read("/proc/meminfo") or "").splitlines()[:8]}
    st = os.statvfs(SHM)
    return {"cpus": os.cpu_count(), "thp": read("/sys/kernel/mm/transparent_hugepage/enabled"),
            "thp_shmem": read("/sys/kernel/mm/transparent_hugepage/shmem_enabled"), "meminfo": mem,
            "shm_free_gib": round(st.f_bavail * st.f_frsize / 2**30, 1)}


def _memory(pool, P, per, row):
    def timed(name, fn, *args):
        t = time.perf_counter()
        each = list(pool.map(fn, *args))
        row(name, time.perf_counter() - t, P * per, each)

    files = [_new(per) for _ in range(P)]
    timed("pwrite fresh files", _pwrite_range, files, [per] * P, [0] * P)
    timed("pwrite same files again", _pwrite_range, files, [per] * P, [0] * P)
    timed("mmap write existing pages", _map_range, files, [per] * P, [0] * P)
    for f in files:
        os.unlink(f)
    one = _new(per * P)
    timed("pwrite one file, disjoint ranges", _pwrite_range, [one] * P, [per] * P, [k * per for k in range(P)])
    timed("pwrite one file again", _pwrite_range, [one] * P, [per] * P, [k * per for k in range(P)])
    timed("mmap one file's existing pages", _map_range, [one] * P, [per] * P, [k * per for k in range(P)])
    os.unlink(one)
    files = [_new(per) for _ in range(P)]
    timed("fallocate fresh files", _fallocate, files)
    for f in files:
        os.unlink(f)
    one = _new(per * P)
    timed("mmap one fresh file, disjoint ranges", _map_range, [one] * P, [per] * P, [k * per for k in range(P)])
    os.unlink(one)
    t = time.perf_counter()
    r = list(pool.map(_anon, [per] * P))
    w = time.perf_counter() - t
    row("anon fresh (np.ones)", w, P * per, [x[0] for x in r])
    row("anon warm (np.add in place)", max(x[1] for x in r), P * per, [x[1] for x in r])
    f = _new(per)
    alone = _pwrite_range(f, per, 0)
    row("pwrite fresh, one process alone", alone, per, [alone])
    os.unlink(f)


def _files(c, pool, P, row, res):
    from cuzk_jax.circuits.porep_like import block_counts
    from cuzk_jax.engine.synthesis import drop_shared, new_shared_file, span_bounds, span_task

    n = block_counts(c)["num_vars"]
    C = c.params["challenges"]
    t = time.perf_counter()
    inputs = c.sample_inputs(0, 0)
    res["sample_s"] = round(time.perf_counter() - t, 3)

    def spans(name, jobs, task=span_task):
        t = time.perf_counter()
        futs = [pool.submit(task, c, inputs, lo, hi, path) for lo, hi, path in jobs]
        each = [f.result()[1] for f in futs]
        row(name, time.perf_counter() - t, sum(32 * n * (hi - lo) // C for lo, hi, _ in jobs),
            [e[2] - e[1] for e in each])

    f1 = new_shared_file(n)
    spans("partition, 1 worker, fresh file", [(0, C, f1)])
    spans("partition, 1 worker, same file again", [(0, C, f1)])
    drop_shared(f1)
    b = span_bounds(C, P)
    f1 = new_shared_file(n)
    spans(f"partition split {len(b)} ways, fresh file", [(lo, hi, f1) for lo, hi in b])
    spans(f"partition split {len(b)} ways, same file again", [(lo, hi, f1) for lo, hi in b])
    spans(f"partition split {len(b)} ways, same file again, mapped writes", [(lo, hi, f1) for lo, hi in b],
          _span_mapped)
    drop_shared(f1)
    f1 = new_shared_file(n)
    spans(f"partition split {len(b)} ways, fresh file, mapped writes", [(lo, hi, f1) for lo, hi in b], _span_mapped)
    drop_shared(f1)
    f1 = new_shared_file(n)
    r = pool.submit(_sample_with_fallocate, c, 0, 0, f1).result()
    res["sample_beside_fallocate"] = {"sample_alone_s": round(r[0], 3), "sample_beside_s": round(r[1], 3),
                                      "both_s": round(r[2], 3), "fallocate_s": round(r[3], 3)}
    print(res["sample_beside_fallocate"], flush=True)
    spans(f"partition split {len(b)} ways, fallocated file", [(lo, hi, f1) for lo, hi in b])
    drop_shared(f1)
    k = min(10, P)
    fs = [new_shared_file(n) for _ in range(k)]
    spans(f"{k} partitions at once, fresh files", [(0, C, f) for f in fs])
    spans(f"{k} partitions at once, same files again", [(0, C, f) for f in fs])
    for f in fs:
        drop_shared(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="sector32g")
    ap.add_argument("--workers", type=int, default=15)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--parts", default="memory,files")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import concurrent.futures as cf
    import multiprocessing as mp

    parts = set(a.parts.split(","))
    if not parts or parts - {"memory", "files"}:
        ap.error(f"--parts: a comma-separated subset of memory,files, got {a.parts!r}")
    if a.workers < 1 or a.gib <= 0:
        ap.error("--workers needs at least 1 and --gib a positive size")
    P, per = a.workers, int(a.gib * 2**30)
    rows, res = [], {"system": _system(), "workers": P, "per_bytes": per, "preset": a.preset, "parts": sorted(parts)}
    print(res["system"], flush=True)

    def row(name, wall, nbytes, each):
        r = {"case": name, "wall_s": round(wall, 3), "GBps": round(nbytes / wall / 1e9, 2) if nbytes else None,
             "task_max_s": round(max(each), 3), "task_min_s": round(min(each), 3)}
        rows.append(r)
        print(r, flush=True)

    if "memory" in parts:
        with cf.ProcessPoolExecutor(P, mp_context=mp.get_context("spawn")) as pool:
            list(pool.map(time.sleep, [0.3] * P))
            _memory(pool, P, per, row)
    if "files" in parts:
        from cuzk_jax.circuits.porep_like import PorepLike, warm_pool, worker_pool

        c = PorepLike(a.preset)
        t = time.perf_counter()
        warm_pool(c, P)
        res["warm_pool_s"] = round(time.perf_counter() - t, 3)
        pool = worker_pool(c, P)
        _files(c, pool, P, row, res)
        pool.shutdown(wait=True)
    res["rows"] = rows
    w = max(len(r["case"]) for r in rows)
    print(f"\n{'case':<{w}}  wall_s  GB/s  task_max_s  task_min_s")
    for r in rows:
        print(f"{r['case']:<{w}}  {r['wall_s']:6.2f}  {r['GBps'] or 0:5.2f}  {r['task_max_s']:10.2f}  "
              f"{r['task_min_s']:10.2f}")
    if a.out:
        res["commit"] = os.environ.get("CUZK_BENCH_COMMIT", "unknown")
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
