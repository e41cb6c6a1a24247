"""One-call GPU check of the MSM: Pallas kernels vs the XLA path (and arkworks), then the benchmark.

  python scripts/gpu_check_msm.py                                  # check at 2^12, then bench g1,g2 at 16..24
  python scripts/gpu_check_msm.py --bench_log_n=16,20 --group=g1   # a shorter run
  python scripts/gpu_check_msm.py --skip_bench                     # correctness only
  python scripts/gpu_check_msm.py --skip_check --impl=pallas,pallas:seg=32:block=128:warps=4

The check runs random inputs and edge cases (all-zero scalars, zeros and ones, one repeated scalar, bases at
infinity) at ``2^check_log_n`` points through both implementations and compares the points exactly (and with
py_arkworks_bls12381's multiexp when it is installed). The bench is cuzk_jax/bench/msm.py; its rows are printed as
a table and written as JSON (default bench/results/msm-<backend>-<date>.json).
"""

import os
import random
import time

from absl import app, flags

from cuzk_jax import cli

flags.DEFINE_list("group", ["g1", "g2"], "groups")
flags.DEFINE_integer("check_log_n", 12, "log2 of the point count for the correctness check")
flags.DEFINE_list("bench_log_n", ["16", "18", "20", "22", "24"], "log2 sizes for the benchmark")
flags.DEFINE_list("impl", [], "bench impl specs (default pallas,xla); see cuzk_jax/bench/msm.py")
flags.DEFINE_list("check_impl", ["pallas"], "impl specs checked against xla")
flags.DEFINE_integer("batch", 1, "partitions per MSM in the bench")
flags.DEFINE_integer("reps", 5, "timed repetitions")
flags.DEFINE_integer("warmup", 2, "warm-up runs")
flags.DEFINE_bool("skip_check", False, "skip the correctness check")
flags.DEFINE_bool("check_batch", True, "also check a 3-partition MSM (per-partition bases)")
flags.DEFINE_bool("check_xla", False, "also compare with the XLA fallback (on GPU its compile takes minutes)")
flags.DEFINE_bool("skip_bench", False, "skip the benchmark")
flags.DEFINE_string("out", "", "JSON output path")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS


def check(group: str, log_n: int, specs, results: list) -> bool:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from cuzk_jax import encoding as enc
    from cuzk_jax.bench import msm as bmsm
    from cuzk_jax.groth16 import host_curve
    from cuzk_jax.ops import curve as cv
    from cuzk_jax.ops import msm as M
    from cuzk_jax.ops.config import MsmConfig
    from cuzk_jax.reference.constants import R

    n = 1 << log_n
    curve = cv.CURVES[group]
    rng = random.Random(42)
    refs = bmsm._host_points(group, n, 42)
    refs = (refs * (-(-n // len(refs))))[:n]
    bases = bmsm._affine(group, refs)
    inf_mask = np.zeros(n, bool)
    inf_mask[::7] = True
    inf_bases = cv.Affine(bases.x, bases.y, jnp.asarray(inf_mask))
    no_inf = np.zeros(n, bool)
    cases = {
        "random": (bases, no_inf, [rng.randrange(R) for _ in range(n)]),
        "all_zero": (bases, no_inf, [0] * n),
        "zeros_ones": (bases, no_inf, [rng.choice([0, 1, 1]) for _ in range(n)]),
        "same_scalar": (bases, no_inf, [rng.randrange(R)] * n),
        "inf_bases": (inf_bases, inf_mask, [rng.randrange(R) for _ in range(n)]),
        "max_scalar": (bases, no_inf, [R - 1] * (n // 2) + [rng.randrange(R) for _ in range(n - n // 2)]),
    }
    xla = M.msm_jit(group, MsmConfig("xla")) if FLAGS.check_xla else None
    ok = True
    for spec in specs:
        config, window = bmsm.parse_spec(spec)
        fn = M.msm_jit(group, config, window=window)
        for name, (b, inf, sc) in cases.items():
            s = jnp.asarray(enc.ints_to_limbs(sc, "fr"))
            row = {"check": name, "group": group, "log_n": log_n, "impl": spec}
            t0 = time.perf_counter()
            try:
                got = jax.block_until_ready(fn(b, s))
            except Exception as e:  # report and go on with the other groups
                row["error"] = f"{type(e).__name__}: {str(e)[:2000]}"
                print(f"[check] {group} 2^{log_n} {spec:<24} {name:<12} FAILED TO RUN: {row['error']}", flush=True)
                results.append(row)
                ok = False
                break
            row["first_call_s"] = round(time.perf_counter() - t0, 2)  # includes compilation on the first case
            row["arkworks"] = _arkworks(group, refs, sc, inf, host_curve.from_device(curve, got)[0])
            ok &= row["arkworks"] is not False
            if xla is not None:
                want = jax.block_until_ready(xla(b, s))
                row["matches_xla"] = host_curve.from_device(curve, got) == host_curve.from_device(curve, want)
                ok &= row["matches_xla"]
            results.append(row)
            print(f"[check] {row}", flush=True)
    if FLAGS.check_batch:
        P = 3
        bx = jnp.stack([bases.x, jnp.roll(bases.x, 1, axis=-1), jnp.roll(bases.x, 2, axis=-1)], axis=-2)
        by = jnp.stack([bases.y, jnp.roll(bases.y, 1, axis=-1), jnp.roll(bases.y, 2, axis=-1)], axis=-2)
        infs = np.zeros((P, n), bool)
        infs[1, ::5] = True
        bb = cv.Affine(bx, by, jnp.asarray(infs))
        sc = [[rng.randrange(R) for _ in range(n)], [rng.choice([0, 1]) for _ in range(n)], [rng.randrange(R)] * n]
        s = jnp.stack([jnp.asarray(enc.ints_to_limbs(v, "fr")) for v in sc], axis=1)
        for spec in specs:
            config, window = bmsm.parse_spec(spec)
            fn = M.msm_jit(group, config, window=window)
            row = {"check": f"batch_{P}", "group": group, "log_n": log_n, "impl": spec}
            try:
                got = host_curve.from_device(curve, jax.block_until_ready(fn(bb, s)))
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {str(e)[:500]}"
                print(f"[check] {row}", flush=True)
                results.append(row)
                ok = False
                continue
            # partition p uses the bases rolled by p (refs rolled the same way) and its own infinity mask
            row["arkworks"] = all(
                _arkworks(group, refs[-p:] + refs[:-p] if p else refs, sc[p], infs[p], got[p]) is not False
                for p in range(P))
            ok &= row["arkworks"]
            results.append(row)
            print(f"[check] {row}", flush=True)
    return ok


def _arkworks(group, refs, scalars, inf, got):
    """True / False: ``got`` (host affine point or None) equals py_arkworks_bls12381's multiexp; None if the
    package is missing."""
    try:
        import py_arkworks_bls12381 as pa
    except ImportError:
        return None
    from cuzk_jax.reference.curve import g1 as ref_g1, g2 as ref_g2


    P = pa.G1Point if group == "g1" else pa.G2Point
    pts, sc = [], []
    for p, s, i in zip(refs, scalars, inf):
        if i:
            continue
        b = p[0].to_bytes(48, "little") + p[1].to_bytes(48, "little") if group == "g1" else b"".join(
            v.to_bytes(48, "little") for v in (*p[0], *p[1]))
        pts.append(P.from_xy_bytes_unchecked_le(b))
        sc.append(pa.Scalar.from_le_bytes(s.to_bytes(32, "little")))
    want = P.multiexp_unchecked(pts, sc).to_compressed_bytes()
    return (ref_g1 if group == "g1" else ref_g2).encode(got) == want


def main(argv):
    del argv
    from cuzk_jax import bench
    from cuzk_jax.bench import msm as bmsm

    cli.use_cache_dir(FLAGS.cache_dir)
    env = bench.environment()
    print("environment:", env, flush=True)
    out = FLAGS.out or os.path.join("bench", "results", f"msm-{env['backend']}-{env['date'][:10]}.json")
    checks: list[dict] = []
    rows: list[dict] = []
    state = {"check_passed": None}

    def write(complete=False):  # rewritten after every row: a run stopped by a time limit keeps its results
        bench.write_json(out, {"environment": env, "check_passed": state["check_passed"],
                               "flags": {k: FLAGS[k].value for k in ("group", "bench_log_n", "impl", "batch", "reps",
                                                                     "warmup", "check_log_n", "check_impl")},
                               "checks": checks, "rows": rows, "complete": complete})

    bench.add_row_sink(lambda row: (rows.append(row), write()))
    ok = True
    if not FLAGS.skip_check:
        for g in FLAGS.group:
            ok &= check(g, FLAGS.check_log_n, FLAGS.check_impl, checks)
            write()
        state["check_passed"] = bool(ok)
        print("CHECK", "PASSED" if ok else "FAILED", flush=True)
        write()
    if not FLAGS.skip_bench:

        class Cfg:
            group = FLAGS.group
            log_n = FLAGS.bench_log_n
            impl = FLAGS.impl
            batch = FLAGS.batch
            reps = FLAGS.reps
            warmup = FLAGS.warmup

        bmsm.run(Cfg)  # its rows reach `rows` through the sink
        for r in rows:
            r.setdefault("op", "msm")
        print(bench.format_table(rows), flush=True)
    write(complete=True)
    print(f"wrote {out}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    app.run(main)
