"""``--op=cost-curve``: how the per-partition prove time grows with the circuit, from ``--op=sector`` JSON files.

  python scripts/bench.py --op=cost-curve --inputs='bench/results/*-s20-d26-*.json,bench/results/*-s20-s32-*.json' \
      --plot=curve.png

Reads every ``--inputs`` file (comma-separated; shell-style patterns are expanded) written by ``--op=sector`` and
keeps, per (device, circuit, preset), its fastest proved rep: the warm figure, since a first rep compiles. A row per
size, smallest first: ``constraints``, ``domain``, ``per_partition_s`` (the rep's prove time over its partitions),
``ns_per_constraint``, and against the previous row ``constraints_ratio``, ``time_ratio`` and ``exponent`` --
``log(time ratio) / log(constraints ratio)``: 1 is linear growth, below 1 better than linear -- plus where the
figure came from (``source``, ``commit``, ``date``, ``rep``, ``variant``) and the rep's device / host peaks. Issue 19
asks for growth no worse than linear from 2^24 to 2^27.

``--plot=PATH``: the curve as a PNG (per-partition seconds against constraints, both axes logarithmic, with the
linear line through the smallest point; needs matplotlib, the ``plot`` extra). No device work: the op only reads.
A file that is missing, is not JSON, or holds no proved sector row is a usage error (exit 2) before any output.
"""

from __future__ import annotations

import glob
import json
import math
import os

DEFAULTS: dict = {}


def _paths(patterns) -> list[str]:
    from cuzk_jax.errors import BadInput

    if not patterns:
        raise BadInput("--op=cost-curve needs --inputs: the JSON files of --op=sector runs")
    out: list[str] = []
    for p in patterns:
        hits = sorted(glob.glob(os.path.expanduser(p)))
        if not hits:
            raise BadInput(f"--inputs: no file matches {p!r}")
        out += [h for h in hits if h not in out]
    return out


def _sector_rows(path: str) -> list[dict]:
    """The proved, verified sector reps of one file, each with the file's environment merged in."""
    from cuzk_jax.errors import BadInput

    try:
        with open(path) as f:
            doc = json.load(f)
        env, rows = doc.get("environment", {}), doc["rows"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise BadInput(f"--inputs: {path} is not a bench JSON file ({type(e).__name__}: {e})") from None
    keep = []
    for r in rows:
        if not isinstance(r, dict) or r.get("op") != "sector" or r.get("rep") == "prepare":
            continue
        if not r.get("ok") or not r.get("proofs") or not r.get("prove_s") or not r.get("constraints"):
            continue
        keep.append(dict(r, _source=os.path.basename(path), _env=env))
    return keep


def curve(paths) -> list[dict]:
    """The rows of the module docstring from the sector JSON files ``paths``."""
    from cuzk_jax.errors import BadInput

    best: dict = {}
    for path in paths:
        for r in _sector_rows(path):
            key = (r["_env"].get("device"), r.get("circuit"), r.get("preset"))
            per = r["prove_s"] / r["proofs"]
            if key not in best or per < best[key][0]:
                best[key] = (per, r)
    if not best:
        raise BadInput(f"--inputs: no proved --op=sector rep in {', '.join(paths)}")
    rows, prev = [], None
    for (device, circuit, preset), (per, r) in sorted(best.items(), key=lambda kv: (kv[0][0] or "",
                                                                                 kv[1][1]["constraints"])):
        m = int(r["constraints"])
        row = {"device": device, "circuit": circuit, "preset": preset, "constraints": m,
               "domain": r.get("domain"), "log_domain": int(r["domain"]).bit_length() - 1 if r.get("domain") else None,
               "partitions": r["proofs"], "per_partition_s": round(per, 4),
               "ns_per_constraint": round(per / m * 1e9, 2)}
        if prev is not None and prev["device"] == device:
            cr, tr = m / prev["constraints"], per / prev["per_partition_s"]
            row.update(constraints_ratio=round(cr, 3), time_ratio=round(tr, 3),
                       exponent=round(math.log(tr) / math.log(cr), 3) if cr > 1 and tr > 0 else None)
        row.update(source=r["_source"], commit=r["_env"].get("commit"), date=(r["_env"].get("date") or "")[:10],
                   rep=r.get("rep"), variant=r.get("variant"), device_peak_gib=r.get("device_peak_gib"),
                   host_peak_gib=r.get("host_peak_gib"))
        rows.append(row)
        prev = dict(row, per_partition_s=per)
    return rows


def plot(rows: list[dict], path: str) -> str:
    """The curve of ``rows`` as a PNG at ``path`` (one line per device), with the linear line through each device's
    smallest point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for device in dict.fromkeys(r["device"] for r in rows):
        pts = [r for r in rows if r["device"] == device]
        xs, ys = [r["constraints"] for r in pts], [r["per_partition_s"] for r in pts]
        ax.plot(xs, ys, "o-", label=f"{device}: per partition")
        ax.plot(xs, [ys[0] * x / xs[0] for x in xs], ":", color="gray", label="linear from the smallest")
        for r in pts:
            name = f"2^{r['log_domain']}" if r["log_domain"] is not None else r["preset"]
            ax.annotate(f"{name} ({r['commit']})" if r.get("commit") else name,
                        (r["constraints"], r["per_partition_s"]), textcoords="offset points", xytext=(4, -10),
                        fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("constraints per partition")
    ax.set_ylabel("prove time per partition (s, warm)")
    ax.set_title("Cost curve: --op=sector, fastest rep per preset")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run(cfg) -> list[dict]:
    from cuzk_jax import bench

    rows = curve(_paths(getattr(cfg, "inputs", None)))
    target = getattr(cfg, "plot", "")
    if target:
        try:
            print(f"cost-curve: wrote {plot(rows, target)}", flush=True)
        except ImportError:
            print("cost-curve: matplotlib not installed (pip install cuzk_jax[plot]): no PNG", flush=True)
    out: list[dict] = []
    for row in rows:
        bench.emit(out, dict(row, op="cost-curve"))
    return out
