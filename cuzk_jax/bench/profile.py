"""Where a benchmark's device time goes: the kernels of a traced run, summed per XLA program and per HLO op.

``with device_trace() as tr: ...`` records the block with JAX's profiler (``jax.profiler.trace``: CUPTI on a GPU,
the thunk executor's events on a CPU) into a temporary directory, reads the ``.xplane.pb`` back with
``jax.profiler.ProfileData`` (no TensorBoard or xprof needed) and deletes it; ``tr.summary`` is then a JSON-able
dict:

* ``kernel_ms``: the sum of the durations of every event that names an XLA program (``hlo_module`` stat) -- on a
  GPU the kernels and copies of the device planes (``/device:GPU:k``), on a CPU (no device plane) the XLA thunks of
  the host plane. Kernels of concurrent streams overlap, so this can exceed the wall time; ``span_ms`` is the time
  from the first such event's start to the last one's end.
* ``modules``: per XLA program (``jit_<name>``), its summed ms and event count, largest first (``top`` of them).
* ``ops``: per (program, HLO op, kernel) -- a fusion, a sort, a custom call (Pallas / Triton kernels appear as the
  custom call's op; ``kernel`` is the launched kernel's name where it differs from the op's) -- its summed ms and
  count, largest first (``top`` of them). XLA on a GPU replays runs of kernels as CUDA graphs (op
  ``command_buffer_N``): set ``XLA_FLAGS=--xla_gpu_enable_command_buffer=`` for one event per kernel.
* ``busy_ms``: the union of those events' intervals (``span_ms - busy_ms``: the device idle, e.g. waiting for
  the host); ``unnamed``: device events that name no program (copies between host and device), per name.

The ``--profile`` flag of ``scripts/bench.py`` turns it on: :func:`cuzk_jax.bench.time_runs` then traces one more
run after the timed ones (the timed runs are never traced: CUPTI adds overhead per launch), and ``--op=sector``
traces its last rep. Tracing holds every event in host memory until the trace ends: a 2^27 sector prove is
~10^5 kernels, tens of MB.
"""

from __future__ import annotations

import collections
import contextlib
import glob
import os
import shutil
import tempfile

import jax

__all__ = ["device_trace", "summarize", "table"]

TOP = 25


class Trace:
    """What :func:`device_trace` hands out: ``summary`` (a dict, module docstring) once the block has ended."""

    def __init__(self):
        self.summary: dict | None = None


@contextlib.contextmanager
def device_trace(top: int = TOP):
    """Trace the block with ``jax.profiler.trace``; afterwards ``.summary`` holds :func:`summarize`'s dict. Only one
    trace may run at a time in a process (the profiler's rule); the caller blocks on its results inside the block."""
    tmp = tempfile.mkdtemp(prefix="cuzk-trace-")
    tr = Trace()
    try:
        with jax.profiler.trace(tmp):
            yield tr
        files = sorted(glob.glob(os.path.join(tmp, "**", "*.xplane.pb"), recursive=True))
        tr.summary = summarize(files, top) if files else {"error": "the profiler wrote no trace"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _events(files, other: list):
    """(plane name, event name, start ns, duration ns, hlo_module, hlo_op) of every leaf event that names a program.

    Leaf: on the host plane an XLA:CPU control-flow thunk (``while``, ``conditional``) spans the thunks of its body
    on the same line, so an event that contains the next one of its line is a parent and is left out (summing both
    would count the body twice); GPU kernels of one stream never nest. Device events that name no program (host /
    device copies, the profiler's own) are appended to ``other`` as (name, duration ns)."""
    from jax.profiler import ProfileData

    for path in files:
        data = ProfileData.from_file(path)
        for plane in data.planes:
            for line in plane.lines:
                evs = []
                for ev in line.events:
                    stats = dict(ev.stats)
                    module = stats.get("hlo_module")
                    if module:
                        evs.append((plane.name, ev.name, ev.start_ns, ev.duration_ns, str(module),
                                    str(stats.get("hlo_op", ev.name))))
                    elif plane.name.startswith("/device:") and ev.duration_ns > 0:
                        other.append((ev.name, ev.duration_ns))
                evs.sort(key=lambda e: (e[2], -e[3]))
                for i, e in enumerate(evs):
                    nxt = evs[i + 1] if i + 1 < len(evs) else None
                    if nxt is None or nxt[2] >= e[2] + e[3]:
                        yield e


def summarize(files, top: int = TOP) -> dict:
    """The module docstring's summary of the trace files (device planes when any event lies on one, else host)."""
    other: list = []
    evs = list(_events(files, other))
    device = [e for e in evs if e[0].startswith("/device:")]
    evs = device or evs
    if not evs:
        return {"kernel_ms": 0.0, "span_ms": 0.0, "busy_ms": 0.0, "events": 0, "source": "none", "modules": [],
                "ops": [], "unnamed": []}
    mod = collections.defaultdict(lambda: [0.0, 0])
    ops = collections.defaultdict(lambda: [0.0, 0])
    unnamed = collections.defaultdict(lambda: [0.0, 0])
    for _, name, _, dur, module, op in evs:
        for acc, key in ((mod, module), (ops, (module, op, name if name != op else ""))):
            acc[key][0] += dur
            acc[key][1] += 1
    for name, dur in other:
        unnamed[name][0] += dur
        unnamed[name][1] += 1
    ivs = sorted((e[2], e[2] + e[3]) for e in evs)
    busy, cur_s, cur_e = 0, ivs[0][0], ivs[0][1]
    for a, b in ivs[1:]:
        if a > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    busy += cur_e - cur_s
    ms = 1e-6

    def ranked(acc):
        return sorted(acc.items(), key=lambda kv: -kv[1][0])[:top]

    return {
        "kernel_ms": round(sum(e[3] for e in evs) * ms, 3),
        "span_ms": round((max(b for _, b in ivs) - ivs[0][0]) * ms, 3),
        "busy_ms": round(busy * ms, 3),
        "events": len(evs),
        "source": "device" if device else "host",
        "modules": [{"module": k, "ms": round(v[0] * ms, 3), "count": v[1]} for k, v in ranked(mod)],
        "ops": [{"module": k[0], "op": k[1], "kernel": k[2], "ms": round(v[0] * ms, 3), "count": v[1]}
                for k, v in ranked(ops)],
        "unnamed": [{"name": k, "ms": round(v[0] * ms, 3), "count": v[1]} for k, v in ranked(unnamed)][:10],
    }


def table(summary: dict, rows: int = 12) -> str:
    """A few lines for a log: the largest ops with their share of ``kernel_ms``."""
    if not summary or "ops" not in summary:
        return f"profile: {summary.get('error', 'none') if summary else 'none'}"
    total = summary["kernel_ms"] or 1.0
    out = [f"profile ({summary['source']}): {summary['kernel_ms']} ms in {summary['events']} events, busy "
           f"{summary['busy_ms']} of {summary['span_ms']} ms"]
    for o in summary["ops"][:rows]:
        kern = f" [{o['kernel'][:60]}]" if o.get("kernel") else ""
        out.append(f"  {o['ms']:>10.3f} ms {100 * o['ms'] / total:5.1f} %  x{o['count']:<6d} {o['module']} / "
                   f"{o['op']}{kern}")
    for u in summary.get("unnamed", [])[:3]:
        out.append(f"  {u['ms']:>10.3f} ms (no program) x{u['count']:<6d} {u['name'][:60]}")
    return "\n".join(out)
