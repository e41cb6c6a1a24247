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

Split and streamed variants (:mod:`cuzk_jax.ops.msm_split`), A/B against the plain MSM on the same scalars:
``split:<spec>`` runs :func:`~cuzk_jax.ops.msm_split.msm_split` (capacity from :func:`classify` /
:func:`capacity_for`, done once before timing and timed on its own as ``classify_ms``: the pipeline pays it per
call); ``stream:<spec>`` / ``stream_split:<spec>`` run :func:`~cuzk_jax.ops.msm_split.msm_streamed` with the bases
in host memory (numpy), ``chunk=K`` points per chunk as log2 (default ``log_n - 2``), scalars on the device (add
``host_scalars=1`` to stream them too); the time is the whole call, transfers included. Any spec takes
``dist=porep`` (52 % zeros, 47 % ones, 1 % uniform others, as the A/B/L MSMs of ``porep_like``) or ``dist=dense``
(the default). Rows of these variants get ``ab_vs`` (the plain spec on the same scalars) and ``ab_speedup`` (its
median over this row's: > 1 means faster) when that plain spec ran, and ``matches_plain``; ``stream_split`` rows
also ``resident_vs`` / ``resident_speedup`` against the resident ``split:`` row; ``est_device_gib`` is
:func:`~cuzk_jax.ops.msm_split.msm_device_bytes` for the row's path. ``split-ab`` expands to the platform kernel
``K`` as ``K, split:K`` on dense and porep scalars plus ``stream:K`` and ``stream_split:K`` on porep scalars.

Layout options (plain and split): ``rows=1`` converts the bases to :class:`~cuzk_jax.ops.msm.BaseRows` once
before timing (the resident key's layout on the Pallas path: no per-call copy into the kernels' layout);
``short=K`` drops the last ``K`` points (``N = 2^log_n - K``: the H query has ``n - 1`` bases, the witness queries
whatever their used columns number), so an :class:`~cuzk_jax.ops.curve.Affine` row pays the MSM's padding copy as
the prover's did. Rows of these options are compared (``ab_vs``) with the spec without them.

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
from cuzk_jax.errors import BadInput
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


VARIANTS = ("split", "stream", "stream_split")
DISTS = ("dense", "porep")


def parse_variant(spec: str) -> dict:
    """``"split:pallas:dist=porep:c=16"`` -> ``{"kind": "split", "config": MsmConfig("pallas"), "window": 16,
    "dist": "porep", "chunk": None, "host_scalars": False, "plain": "pallas:c=16"}``: the variant prefix (``plain``
    when absent), the options this bench adds (``dist=``, ``chunk=`` as log2, ``host_scalars=``), and ``plain`` the
    spec of the plain MSM it is compared with (the rest, as :func:`parse_spec` reads it)."""
    parts = spec.split(":")
    kind = parts[0] if parts[0] in VARIANTS else "plain"
    if kind != "plain":
        parts = parts[1:]
    out = {"kind": kind, "dist": "dense", "chunk": None, "host_scalars": False, "rows": False, "short": 0}
    rest = []
    for part in parts:
        key, _, val = part.partition("=")
        if key == "dist":
            if val not in DISTS:
                raise ValueError(f"bad dist {val!r} in {spec!r}; expected one of {DISTS}")
            out["dist"] = val
        elif key == "chunk":
            if not val.isdigit():
                raise ValueError(f"bad chunk {part!r} in {spec!r}: expected log2 of the points per chunk")
            out["chunk"] = int(val)
        elif key == "host_scalars":
            out["host_scalars"] = val not in ("0", "false", "")
        elif key == "rows":
            out["rows"] = val not in ("0", "false", "")
        elif key == "short":
            if not val.isdigit():
                raise ValueError(f"bad short {part!r} in {spec!r}: expected a number of points")
            out["short"] = int(val)
        else:
            rest.append(part)
    if (out["rows"] or out["short"]) and kind not in ("plain", "split"):
        raise ValueError(f"rows= / short= apply to plain and split MSMs, not {kind!r} ({spec!r})")
    out["plain"] = ":".join(rest) or "xla"
    out["config"], out["window"] = parse_spec(out["plain"])
    return out


def expand_specs(specs: list[str], on_gpu: bool) -> list[str]:
    """``split-ab`` -> the A/B set of the platform kernel (module docstring); other specs as they are."""
    out = []
    for spec in specs:
        if spec == "split-ab":
            k = "pallas" if on_gpu else "xla"
            out += [k, f"split:{k}", f"{k}:dist=porep", f"split:{k}:dist=porep", f"stream:{k}:dist=porep",
                    f"stream_split:{k}:dist=porep"]
        else:
            out.append(spec)
    return out


def porep_scalars(scalars, seed: int = 1):
    """PoRep-like scalars from dense ones of the same shape: 52 % zero, 47 % one, 1 % kept (uniform below r)."""
    u = jax.random.uniform(jax.random.PRNGKey(seed), scalars.shape[1:])
    one = jnp.zeros_like(scalars).at[0].set(1)
    return jax.block_until_ready(jnp.where(u < 0.52, jnp.uint32(0), jnp.where(u < 0.99, one, scalars)))


def msm_callable(group: str, spec: str):
    """``(bases, scalars) -> Jacobian`` for any spec of this bench (plain, ``split:``, ``stream:``,
    ``stream_split:``; ``pre:`` and ``sort`` excluded), with per-call sizing (classify) for the split variants --
    for checks, not for timing."""
    from cuzk_jax.ops import msm_split as S

    v = parse_variant(spec)
    kw = {} if v["window"] is None else {"window": v["window"]}
    if v["kind"] == "plain":
        return M.msm_jit(group, v["config"], **kw)
    if v["kind"] == "split":
        return lambda b, s: S.msm_split_auto(b, s, group, config=v["config"], **kw)[0]

    def streamed(b, s):
        hb = cv.Affine(*(np.asarray(a) for a in b))
        if hb.inf.ndim != 1:
            raise ValueError("streamed MSM: shared bases only")
        n = hb.inf.shape[0]
        chunk = 1 << v["chunk"] if v["chunk"] is not None else max(64, n // 4)
        return S.msm_streamed(hb, np.asarray(s) if v["host_scalars"] else s, group, config=v["config"],
                              chunk=chunk, split=v["kind"] == "stream_split", **kw)

    return streamed


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


def _layout(group: str, v: dict, bases, scalars):
    """(bases, scalars) of a ``rows=`` / ``short=`` row: the last ``short`` points dropped (copies made once, before
    timing), the bases as :class:`~cuzk_jax.ops.msm.BaseRows` with ``rows``."""
    k = v["short"]
    if k:
        n = int(bases.inf.shape[-1]) - k
        if n <= 0:
            raise ValueError(f"short={k} leaves no points")
        bases = cv.Affine(bases.x[..., :n], bases.y[..., :n], bases.inf[..., :n])
        scalars = scalars[..., :n]
    if v["rows"]:
        bases = M.base_rows(group, bases)
    return jax.block_until_ready((bases, scalars))


def _layout_partner(spec: str) -> str:
    """The spec a ``rows=1`` row is compared with: the same without ``rows=`` (``short=`` kept)."""
    return ":".join(p for p in spec.split(":") if not p.startswith("rows="))


def _same_point(curve, a, b) -> bool:
    """Equal as points, compared on the host (no extra Fq program to compile on the device)."""
    from cuzk_jax.groth16 import host_curve

    return host_curve.from_device(curve, a) == host_curve.from_device(curve, b)


def _timed_streamed(fn, args, reps: int, warmup: int) -> tuple[float, dict]:
    """(first call seconds -- compile included --, bench.time_runs of the rest) for a host-driven call."""
    import time

    t0 = time.perf_counter()
    bench.block(fn(*args))
    first = time.perf_counter() - t0
    return first, bench.time_runs(fn, args, reps=reps, warmup=warmup)


def _variant(group: str, log_n: int, batch: int, spec: str, v: dict, bases, scalars, row: dict):
    """(callable, args, compiled?) for a split / streamed spec; fills the row's sizing columns."""
    import time

    from cuzk_jax.ops import msm_split as S

    kw = {} if v["window"] is None else {"window": v["window"]}
    n = 1 << log_n
    t0 = time.perf_counter()
    counts = np.asarray(S.classify_jit(scalars, S.inf_mask(bases)))
    row["classify_ms"] = (time.perf_counter() - t0) * 1e3  # first call: includes its (small) compile
    fr = S.fractions(counts.reshape(3, -1))
    row.update({f"frac_{k}": round(fr[k], 4) for k in S.KINDS})
    if v["kind"] == "split":
        cap = S.capacity_for(counts.reshape(3, -1))
        row["capacity"] = cap
        row["est_device_gib"] = S.msm_device_bytes(n, batch, group, "split", capacity=cap,
                                                   config=v["config"]) / 2**30
        t0 = time.perf_counter()
        for _ in range(3):
            jax.block_until_ready(S.classify_jit(scalars, S.inf_mask(bases)))
        row["classify_ms"] = (time.perf_counter() - t0) / 3 * 1e3  # warm, as the pipeline pays it
        return S.msm_split_jit(group, v["config"], capacity=cap, **kw), (bases, scalars), True
    chunk = 1 << (v["chunk"] if v["chunk"] is not None else max(6, log_n - 2))
    hb = cv.Affine(*(np.asarray(a) for a in bases))
    sc = np.asarray(scalars) if v["host_scalars"] else scalars
    split = v["kind"] == "stream_split"
    path = ("streamed_split" if split else "streamed") + ("" if v["host_scalars"] else "_device_scalars")
    row.update({"chunk": chunk, "path": path,
                "est_device_gib": S.msm_device_bytes(n, batch, group, path, chunk, config=v["config"]) / 2**30})

    def fn(b, s):
        return S.msm_streamed(b, s, group, config=v["config"], chunk=chunk, split=split, **kw)

    return fn, (hb, sc), False


def run(cfg) -> list[dict]:
    from cuzk_jax.ops import msm_split as S

    on_gpu = jax.default_backend() == "gpu"
    specs = expand_specs(list(cfg.impl) or (["pallas", "xla"] if on_gpu else ["xla"]), on_gpu)
    for spec in specs:  # a malformed --impl is a usage error before any measurement (exit 2), not a row
        if spec != "sort" and not spec.startswith("pre:"):
            try:
                parse_variant(spec)
            except ValueError as e:
                raise BadInput(f"--impl={spec}: {e}") from None
    batch = int(getattr(cfg, "batch", 1) or 1)
    rows = []
    for group in cfg.group:
        curve = M.curve_of(group)
        for log_n in map(int, cfg.log_n):
            bases, dense = device_inputs(group, log_n, batch)
            inputs = {"dense": dense}
            outs, tables, times = {}, {}, {}
            for spec in specs:
                row = {"group": group, "log_n": log_n, "batch": batch, "impl": spec}
                try:
                    v = parse_variant(spec) if spec != "sort" and not spec.startswith("pre:") else \
                        {"kind": "plain", "dist": "dense", "plain": spec}
                    if v["dist"] not in inputs:
                        inputs[v["dist"]] = porep_scalars(dense)
                    scalars = inputs[v["dist"]]
                    row["dist"] = v["dist"]
                    args = (bases, scalars)
                    if v.get("short") or v.get("rows"):
                        args, partner = _layout(group, v, bases, scalars), _layout_partner(spec)
                        row.update(n=M.num_bases(args[0]), layout="rows" if v["rows"] else "affine")
                        if partner != spec and partner in specs:
                            row["ab_vs"] = partner
                    compiled_path = True
                    if spec == "sort":
                        fn = _sort_jit(batch, log_n)
                    elif spec.startswith("pre:"):
                        fn, table, row["window"], row["precompute_s"] = _precomputed(group, log_n, spec[4:], bases,
                                                                                            tables)
                        args = (table, scalars)
                        row["table_points"] = int(table.inf.shape[0])
                    elif v["kind"] == "plain":
                        fn = M.msm_jit(group, v["config"], **({} if v["window"] is None else
                                                             {"window": v["window"]}))
                        row["est_device_gib"] = S.msm_device_bytes(1 << log_n, batch, group, "plain",
                                                                   config=v["config"]) / 2**30
                    else:
                        fn, args, compiled_path = _variant(group, log_n, batch, spec, v, *args, row)
                    if compiled_path:
                        compiled, compile_s = bench.compile_timed(fn, *args)
                        out = compiled(*args)
                        jax.block_until_ready(out)
                        t = bench.time_runs(compiled, args, reps=cfg.reps, warmup=cfg.warmup)
                    else:
                        compile_s, t = _timed_streamed(fn, args, cfg.reps, cfg.warmup)
                        out = fn(*args)
                except Exception as e:  # keep the A/B going; the row records the failure
                    row.update({"error": f"{type(e).__name__}: {str(e)[:300]}"})
                    bench.emit(rows, row)
                    print(bench.brief(row), flush=True)
                    continue
                if spec == "sort":
                    row.update({"compile_s": round(compile_s, 2), "median_ms": t["median_s"] * 1e3,
                                "min_ms": t["min_s"] * 1e3, "pairs": int(out[0].shape[0])},
                               **bench.profile_of(t))
                    bench.emit(rows, row)
                    print(bench.brief(row), flush=True)
                    continue
                outs[spec] = out
                ref = REFERENCE_MS.get(group, {}).get(log_n)
                ms = t["median_s"] * 1e3
                times[(v["dist"], spec)] = ms
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
                row.update(bench.profile_of(t))
                partner = row.get("ab_vs")
                if partner is not None and (v["dist"], partner) in times:  # the same MSM in the other layout
                    row["ab_speedup"] = times[(v["dist"], partner)] / ms
                    row["matches_plain"] = _same_point(curve, out, outs[partner])
                elif v["kind"] != "plain":  # A/B against the plain spec on the same scalars, when it ran first
                    partner = v["plain"] if v["dist"] == "dense" else f"{v['plain']}:dist={v['dist']}"
                    if (v["dist"], partner) in times:
                        row["ab_vs"] = partner
                        row["ab_speedup"] = times[(v["dist"], partner)] / ms
                        row["matches_plain"] = _same_point(curve, out, outs[partner])
                    if v["kind"] == "stream_split":  # streamed vs resident, both split
                        resident = f"split:{partner}"
                        if (v["dist"], resident) in times:
                            row["resident_vs"] = resident
                            row["resident_speedup"] = times[(v["dist"], resident)] / ms
                bench.emit(rows, row)
                print(bench.brief(row), flush=True)
            # A/B reference: the XLA row, else the plain Pallas one (the precomputed rows are checked against it);
            # only rows on the same (dense) scalars
            base_spec = next((s for s in specs if s.startswith("xla") and "dist=" not in s),
                             "pallas" if "pallas" in specs else None)
            if base_spec in outs:
                for r in rows:
                    if (r["group"] == group and r["log_n"] == log_n and r["impl"] in outs
                            and r.get("dist", "dense") == "dense" and r["impl"] != "sort"):
                        key = "matches_xla" if base_spec.startswith("xla") else "matches_pallas"
                        r[key] = _same_point(curve, outs[r["impl"]], outs[base_spec])
    return rows
