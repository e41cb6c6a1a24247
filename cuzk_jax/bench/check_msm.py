"""``--op=check-msm``: the MSM on the device against py_arkworks_bls12381's multiexp (and optionally the XLA path).

  python scripts/bench.py --op=check-msm --group=g1,g2 --log_n=12 --impl=pallas      # the defaults
  python scripts/bench.py --op=check-msm,msm --log_n=16                            # check, then benchmark

Random inputs and edge cases (all-zero scalars, zeros and ones, one repeated scalar, bases at infinity, scalars
r - 1) at ``2^log_n`` points through each ``--impl`` spec (:func:`cuzk_jax.bench.msm.parse_spec`; ``split:<spec>``,
``stream:<spec>`` and ``stream_split:<spec>`` run :mod:`cuzk_jax.ops.msm_split`'s paths), compared exactly;
``--check_batch`` adds a 3-partition MSM with per-partition bases, ``--check_xla`` the XLA fallback (on a GPU its
compile takes minutes). Every row has ``ok``; the bench main exits 1 when a row is not ok.
"""

from __future__ import annotations

import random
import time

from cuzk_jax import bench

DEFAULTS = {"group": ["g1", "g2"], "log_n": ["12"], "impl": ["pallas"]}


def _add(results: list, row: dict) -> None:
    row["ok"] = "error" not in row and row.get("arkworks") is not False and row.get("matches_xla") is not False
    bench.emit(results, row)


def run(cfg) -> list[dict]:
    rows: list[dict] = []
    for group in cfg.group:
        for log_n in map(int, cfg.log_n):
            ok = check(group, log_n, list(cfg.impl), rows, check_batch=cfg.check_batch, check_xla=cfg.check_xla)
            print(f"CHECK {group} 2^{log_n}", "PASSED" if ok else "FAILED", flush=True)
    return rows


def check(group: str, log_n: int, specs, results: list, *, check_batch: bool = True, check_xla: bool = False) -> bool:
    """Check each MSM spec at ``2^log_n`` points of ``group``; rows go to ``results`` (and the row sinks)."""
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
    refs = bmsm.host_points(group, n, 42)
    refs = (refs * (-(-n // len(refs))))[:n]
    bases = bmsm.device_affine(group, refs)
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
    xla = M.msm_jit(group, MsmConfig("xla")) if check_xla else None
    ok = True
    for spec in specs:
        fn = bmsm.msm_callable(group, spec)  # plain, split:, stream:, stream_split: (bench.msm's grammar)
        for name, (b, inf, sc) in cases.items():
            s = jnp.asarray(enc.ints_to_limbs(sc, "fr"))
            row = {"check": name, "group": group, "log_n": log_n, "impl": spec}
            t0 = time.perf_counter()
            try:
                got = jax.block_until_ready(fn(b, s))
            except Exception as e:  # report and go on with the other groups
                row["error"] = f"{type(e).__name__}: {str(e)[:2000]}"
                print(f"[check] {group} 2^{log_n} {spec:<24} {name:<12} FAILED TO RUN: {row['error']}", flush=True)
                _add(results, row)
                ok = False
                break
            row["first_call_s"] = round(time.perf_counter() - t0, 2)  # includes compilation on the first case
            row["arkworks"] = _arkworks(group, refs, sc, inf, host_curve.from_device(curve, got)[0])
            ok &= row["arkworks"] is not False
            if xla is not None:
                want = jax.block_until_ready(xla(b, s))
                row["matches_xla"] = host_curve.from_device(curve, got) == host_curve.from_device(curve, want)
                ok &= row["matches_xla"]
            _add(results, row)
            print(f"[check] {row}", flush=True)
    if check_batch:
        P = 3
        bx = jnp.stack([bases.x, jnp.roll(bases.x, 1, axis=-1), jnp.roll(bases.x, 2, axis=-1)], axis=-2)
        by = jnp.stack([bases.y, jnp.roll(bases.y, 1, axis=-1), jnp.roll(bases.y, 2, axis=-1)], axis=-2)
        infs = np.zeros((P, n), bool)
        infs[1, ::5] = True
        bb = cv.Affine(bx, by, jnp.asarray(infs))
        sc = [[rng.randrange(R) for _ in range(n)], [rng.choice([0, 1]) for _ in range(n)], [rng.randrange(R)] * n]
        s = jnp.stack([jnp.asarray(enc.ints_to_limbs(v, "fr")) for v in sc], axis=1)
        for spec in specs:
            if spec.startswith("stream"):  # streamed MSMs take shared bases only
                continue
            fn = bmsm.msm_callable(group, spec)
            row = {"check": f"batch_{P}", "group": group, "log_n": log_n, "impl": spec}
            try:
                got = host_curve.from_device(curve, jax.block_until_ready(fn(bb, s)))
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {str(e)[:500]}"
                print(f"[check] {row}", flush=True)
                _add(results, row)
                ok = False
                continue
            # partition p uses the bases rolled by p (refs rolled the same way) and its own infinity mask
            row["arkworks"] = all(
                _arkworks(group, refs[-p:] + refs[:-p] if p else refs, sc[p], infs[p], got[p]) is not False
                for p in range(P))
            ok &= row["arkworks"]
            _add(results, row)
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
