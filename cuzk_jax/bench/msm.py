"""MSM benchmark: ``scripts/bench.py --op=msm --group=g1,g2 --log_n=16,18,20,22,24 [--impl=...] [--batch=P]``.

For every (group, log_n, impl): compile time (lower + compile, timed separately), then the median of ``--reps``
runs after ``--warmup`` runs, each ended by ``block_until_ready``; inputs are resident on the device (the reference
figures below are sppark's "points resident" ones). Pallas and the XLA fallback run on the same inputs in one run
(A/B); ``matches_xla`` (or ``matches_pallas`` when no XLA row ran) says whether their results are identical points.

Impl specs (``--impl``, comma separated; default ``pallas,xla`` on GPU, ``xla`` elsewhere): an
:class:`~cuzk_jax.ops.config.MsmConfig` string (``xla``, ``pallas``, ``pallas:seg=64:block=64:warps=2:acc_seg=16``;
``stages=k`` runs only kernel 1 and the first ``k`` of the 5 later stages, a phase-timing knob whose result is not
the MSM), optionally with ``c=K`` for the window. ``pre:<spec>`` (e.g. ``pre:pallas``, ``pre:pallas:c=16``) runs
the MSM over precomputed window tables (:mod:`cuzk_jax.ops.msm_precomputed`; window from its rule unless ``c=``):
the table is built once per window before timing (``precompute_s`` on the row that built it, not in the median), as
a resident key would hold it; its row's ``table_points`` says how many points that costs. The spec ``sort`` is a
phase row, not an MSM: it times steps 1-3 alone (digits, keys and the ``lax.sort`` of the (bucket, point) pairs)
for the plan the MSM uses, so the rest of an MSM row is the bucket work.

Inputs: ``2^min(log_n, 14)`` distinct points ``k_i G`` (random ``k_i``, computed on the host with
py_arkworks_bls12381 if installed, else with the reference curve for a smaller set) are tiled to ``2^log_n`` bases
on the device; scalars are uniform random 255-bit values below r drawn on the device (``jax.random``, benchmark
only). Repeated bases do not change the work (every pair is a mixed addition); the small base table makes base
gathers friendlier to the cache than distinct bases would be, which we note rather than hide.
"""

from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax import bench
from cuzk_jax import encoding as enc
from cuzk_jax.ops import curve as cv
from cuzk_jax.ops import msm as M
from cuzk_jax.ops.config import MsmConfig
from cuzk_jax.reference import constants as C

# sppark on an H200, median of 5, points resident on the device (issue 3), in ms.
REFERENCE_MS = {
    "g1": {16: 6.9, 18: 20.5, 20: 22.6, 22: 57.8, 24: 178.0},
    "g2": {16: 11.3, 18: 33.4, 20: 50.2, 22: 146.0},
}
TARGET_MS = {("g1", 20): 40.0, ("g1", 24): 400.0, ("g2", 20): 150.0}
MAX_DISTINCT_LOG = 14

def parse_spec(spec: str) -> tuple[MsmConfig, int | None]:
    """``"pallas:seg=64:c=16"`` -> ``(MsmConfig("pallas", seg=64), 16)``: the MSM config (its one parser) and the
    window (``c=K``, None when absent)."""
    window = None
    parts = []
    for part in spec.split(":"):
        if part.startswith("c="):
            if not part[2:].isdigit():
                raise ValueError(f"bad window {part!r} in {spec!r}")
            window = int(part[2:])
        else:
            parts.append(part)
    return MsmConfig.parse(":".join(parts)), window


def host_points(group: str, count: int, seed: int) -> list:
    """``count`` random reference affine points of ``group`` (seeded; multiples of the generator by arkworks)."""
    rng = random.Random(seed)
    try:
        import py_arkworks_bls12381 as pa

        P = pa.G1Point if group == "g1" else pa.G2Point
        out = []
        for _ in range(count):
            b = (P() * pa.Scalar.from_le_bytes(rng.randrange(1, C.R).to_bytes(32, "little"))).to_xy_bytes_le()
            v = [int.from_bytes(b[48 * i : 48 * i + 48], "little") for i in range(len(b) // 48)]
            out.append((v[0], v[1]) if group == "g1" else ((v[0], v[1]), (v[2], v[3])))
        return out
    except ImportError:
        from cuzk_jax.reference import curve as rc

        curve = rc.g1 if group == "g1" else rc.g2
        return [curve.mul(curve.generator, rng.randrange(1, C.R)) for _ in range(min(count, 64))]


def device_affine(group: str, refs) -> cv.Affine:
    """Reference affine points (none at infinity) -> a device :class:`~cuzk_jax.ops.curve.Affine` (Montgomery)."""
    if group == "g1":
        x = enc.ints_to_limbs([p[0] for p in refs], "fq", montgomery=True)
        y = enc.ints_to_limbs([p[1] for p in refs], "fq", montgomery=True)
    else:
        x = np.stack([enc.ints_to_limbs([p[0][j] for p in refs], "fq", True) for j in range(2)])
        y = np.stack([enc.ints_to_limbs([p[1][j] for p in refs], "fq", True) for j in range(2)])
    return cv.Affine(jnp.asarray(x), jnp.asarray(y), jnp.zeros((len(refs),), bool))


def device_inputs(group: str, log_n: int, batch: int = 1, seed: int = 0):
    """Resident bases (tiled from a distinct set, see the module docstring) and random canonical scalars."""
    n = 1 << log_n
    base = device_affine(group, host_points(group, 1 << min(log_n, MAX_DISTINCT_LOG), seed))
    m = base.inf.shape[0]
    reps = -(-n // m)
    tile = lambda a: jnp.tile(a, (1,) * (a.ndim - 1) + (reps,))[..., :n]  # noqa: E731
    bases = cv.Affine(tile(base.x), tile(base.y), tile(base.inf))
    key = jax.random.PRNGKey(seed)
    shape = (8, batch, n) if batch > 1 else (8, n)
    s = jax.random.bits(key, shape, jnp.uint32)
    top = (C.R >> 224) & 0xFFFFFFFF
    s = s.at[7].set(s[7] % jnp.uint32(top))  # top limb below r's: every value < r
    return jax.block_until_ready(bases), jax.block_until_ready(s)


def _sort_jit(batch: int, log_n: int):
    """Steps 1-3 of the MSM alone (signed digits, keys, sort) for the plan :func:`ops.msm.msm` picks."""
    n = M.padded_size(1 << log_n)
    plan = M.Plan(G=batch, n=n, c=M.window_bits(n), shared_bases=True)

    def sort(bases, scalars):
        del bases
        sc = scalars if scalars.ndim == 3 else scalars[:, None]
        return M.sorted_pairs(sc, plan)

    return jax.jit(sort)


def _precomputed(group: str, log_n: int, spec: str, bases, tables: dict):
    """(jitted MSM over the table, the table, window, seconds to build the table incl. its compile -- None when
    ``tables``, the tables already built for these bases keyed by window, had it)."""
    import time

    from cuzk_jax.ops import msm_precomputed as MP

    config, window = parse_spec(spec)
    c = window or MP.window_bits(1 << log_n)
    secs = None
    if c not in tables:
        tables.clear()  # one table at a time: a 2^24 one is tens of GB
        t0 = time.perf_counter()
        tables[c] = jax.block_until_ready(MP.precompute(bases, group, c=c, config=config))
        secs = round(time.perf_counter() - t0, 2)
    fn = MP.msm_jit(group, c, config)
    return fn, tables[c], c, secs


def _same_point(curve, a, b) -> bool:
    """Equal as points, compared on the host (no extra Fq program to compile on the device)."""
    from cuzk_jax.groth16 import host_curve

    return host_curve.from_device(curve, a) == host_curve.from_device(curve, b)


def run(cfg) -> list[dict]:
    on_gpu = jax.default_backend() == "gpu"
    specs = list(cfg.impl) or (["pallas", "xla"] if on_gpu else ["xla"])
    batch = int(getattr(cfg, "batch", 1) or 1)
    rows = []
    for group in cfg.group:
        curve = M.curve_of(group)
        for log_n in map(int, cfg.log_n):
            bases, scalars = device_inputs(group, log_n, batch)
            outs, tables = {}, {}
            for spec in specs:
                row = {"group": group, "log_n": log_n, "batch": batch, "impl": spec}
                args = (bases, scalars)
                try:
                    if spec == "sort":
                        fn = _sort_jit(batch, log_n)
                    elif spec.startswith("pre:"):
                        fn, table, row["window"], row["precompute_s"] = _precomputed(group, log_n, spec[4:], bases,
                                                                                            tables)
                        args = (table, scalars)
                        row["table_points"] = int(table.inf.shape[0])
                    else:
                        config, window = parse_spec(spec)
                        fn = M.msm_jit(group, config, window=window)
                    compiled, compile_s = bench.compile_timed(fn, *args)
                    out = compiled(*args)
                    jax.block_until_ready(out)
                    t = bench.time_runs(compiled, args, reps=cfg.reps, warmup=cfg.warmup)
                except Exception as e:  # keep the A/B going; the row records the failure
                    row.update({"error": f"{type(e).__name__}: {str(e)[:300]}"})
                    bench.emit(rows, row)
                    print(row, flush=True)
                    continue
                if spec == "sort":
                    row.update({"compile_s": round(compile_s, 2), "median_ms": t["median_s"] * 1e3,
                                "min_ms": t["min_s"] * 1e3, "pairs": int(out[0].shape[0])})
                    bench.emit(rows, row)
                    print(row, flush=True)
                    continue
                outs[spec] = out
                ref = REFERENCE_MS.get(group, {}).get(log_n)
                ms = t["median_s"] * 1e3
                row.update({
                    "compile_s": round(compile_s, 2),
                    "median_ms": ms,
                    "min_ms": t["min_s"] * 1e3,
                    "ms_per_partition": ms / batch,
                    "sppark_ms": ref,
                    "ratio_to_sppark": (ms / batch / ref) if ref else None,
                    "target_ms": TARGET_MS.get((group, log_n)),
                })
                if row["target_ms"] is not None:
                    row["meets_target"] = ms / batch <= row["target_ms"]
                bench.emit(rows, row)
                print(row, flush=True)
            # A/B reference: the XLA row, else the plain Pallas one (the precomputed rows are checked against it)
            base_spec = next((s for s in specs if s.startswith("xla")), "pallas" if "pallas" in specs else None)
            if base_spec in outs:
                for r in rows:
                    if r["group"] == group and r["log_n"] == log_n and r["impl"] in outs:
                        key = "matches_xla" if base_spec.startswith("xla") else "matches_pallas"
                        r[key] = _same_point(curve, outs[r["impl"]], outs[base_spec])
    return rows
