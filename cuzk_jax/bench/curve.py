"""Curve-formula and point-encoding throughput (``scripts/bench.py --op=curve --group=g1,g2 --log_n=16,20``).

Rows per (group, log_n, impl): ``compile_s`` (lower + compile of the jitted program), ``median_ms`` over ``reps``
runs after ``warmup``, and ``per_s`` (point operations per second). ``impl``:

* ``xyzz_add_mixed`` / ``xyzz_add`` / ``xyzz_double`` / ``jacobian_add`` / ``jacobian_add_mixed``: one formula
  over ``2^log_n`` lanes (inputs resident on the device);
* ``to_affine``: Jacobian -> affine with one batch inversion;
* ``decode_device``: the jitted part of compressed decoding (sqrt, sign fix, subgroup test) on device arrays;
* ``decode_host``: :func:`cuzk_jax.points.decode` end to end from a ``(N, size)`` uint8 array (host packing,
  transfers, device program, error checks);
* ``encode_host``: :func:`cuzk_jax.points.encode_array` end to end.

Inputs: 256 distinct random subgroup points (reference ints, random projective Z) tiled to N lanes -- the
formulas are branch-free, so the values do not change the work.
"""

from __future__ import annotations

import random

import jax.numpy as jnp
import numpy as np

from cuzk_jax import bench
from cuzk_jax import encoding
from cuzk_jax import points as pts
from cuzk_jax.ops import curve as oc
from cuzk_jax.reference import constants as C
from cuzk_jax.reference import curve as rc
from cuzk_jax.reference.field import fq, fq2

IMPLS = ("xyzz_add_mixed", "xyzz_add", "xyzz_double", "jacobian_add", "jacobian_add_mixed", "to_affine",
         "decode_device", "decode_host", "encode_host")
_DISTINCT = 256


def _mont(vals, g):
    if g == "g1":
        return encoding.ints_to_limbs(vals, "fq", montgomery=True)
    return np.stack([encoding.ints_to_limbs([v[0] for v in vals], "fq", True),
                     encoding.ints_to_limbs([v[1] for v in vals], "fq", True)])


def _inputs(g: str, n: int, seed: int = 1):
    R = rc.CURVES[g]
    F = fq if g == "g1" else fq2
    rng = random.Random(seed)
    base = [R.mul(R.generator, rng.randrange(1, C.R)) for _ in range(_DISTINCT)]
    zs = [rng.randrange(1, C.P) if g == "g1" else (rng.randrange(1, C.P), rng.randrange(1, C.P)) for _ in base]
    zz = [F.square(z) for z in zs]
    zzz = [F.mul(a, z) for a, z in zip(zz, zs)]
    X = [F.mul(p[0], a) for p, a in zip(base, zz)]
    Y = [F.mul(p[1], b) for p, b in zip(base, zzz)]
    reps = -(-n // _DISTINCT)

    def tile(vals):
        arr = _mont(vals, g)
        return jnp.asarray(np.tile(arr, (1,) * (arr.ndim - 1) + (reps,))[..., :n])

    aff = oc.Affine(tile([p[0] for p in base]), tile([p[1] for p in base]), jnp.zeros((n,), bool))
    xyzz = oc.XYZZ(tile(X), tile(Y), tile(zz), tile(zzz))
    jac = oc.Jacobian(tile(X), tile(Y), tile(zs))  # (X ZZ, Y ZZZ, Z) is not Jacobian-consistent: fine for timing
    comp = np.frombuffer(b"".join(R.encode(p) for p in base), np.uint8).reshape(_DISTINCT, -1)
    comp = np.tile(comp, (reps, 1))[:n]
    return aff, xyzz, jac, comp


def _programs(curve, g):
    progs = {
        "xyzz_add_mixed": (curve.xyzz_add_mixed, lambda aff, xyzz, jac: (xyzz, aff)),
        "xyzz_add": (curve.xyzz_add, lambda aff, xyzz, jac: (xyzz, xyzz)),
        "xyzz_double": (curve.xyzz_double, lambda aff, xyzz, jac: (xyzz,)),
        "jacobian_add": (curve.jacobian_add, lambda aff, xyzz, jac: (jac, jac)),
        "jacobian_add_mixed": (curve.jacobian_add_mixed, lambda aff, xyzz, jac: (jac, aff)),
        "to_affine": (curve.to_affine, lambda aff, xyzz, jac: (jac,)),
    }
    return progs


def run(cfg) -> list[dict]:
    groups = list(getattr(cfg, "group", ["g1"]))
    log_ns = [int(v) for v in getattr(cfg, "log_n", ["16"])]
    impls = [i for i in (getattr(cfg, "impl", []) or IMPLS) if i in IMPLS]
    reps = int(getattr(cfg, "reps", 5))
    warmup = int(getattr(cfg, "warmup", 2))
    rows = []
    for g in groups:
        curve = oc.CURVES[g]
        for log_n in log_ns:
            n = 1 << log_n
            aff, xyzz, jac, comp = _inputs(g, n)
            progs = _programs(curve, g)
            for impl in impls:
                row = {"group": g, "log_n": log_n, "impl": impl}
                if impl in progs:
                    fn, args_of = progs[impl]
                    args = args_of(aff, xyzz, jac)
                    compiled, row["compile_s"] = bench.compile_timed(fn, *args)
                    t = bench.time_runs(compiled, args, reps=reps, warmup=warmup)
                elif impl == "decode_device":
                    prog = pts.decode_program(g, True, True)
                    deg = 1 if g == "g1" else 2
                    x = jnp.asarray(pts.coord_to_limbs(np.where(np.arange(comp.shape[1]) == 0, comp & 0x1F, comp), deg))
                    inf = jnp.zeros((n,), bool)
                    sort = jnp.asarray(((comp[:, 0] >> 5) & 1).astype(bool))
                    compiled, row["compile_s"] = bench.compile_timed(prog, x, x, inf, sort)
                    t = bench.time_runs(compiled, (x, x, inf, sort), reps=reps, warmup=warmup)
                elif impl == "decode_host":
                    t = bench.time_runs(lambda c: pts.decode(c, g), (comp,), reps=reps, warmup=warmup)
                elif impl == "encode_host":
                    t = bench.time_runs(lambda a: pts.encode_array(a, g), (aff,), reps=reps, warmup=warmup)
                row["median_ms"] = t["median_s"] * 1e3
                row["min_ms"] = t["min_s"] * 1e3
                row["per_s"] = n / t["median_s"]
                row.update(bench.profile_of(t))
                bench.emit(rows, row)
    return rows


if __name__ == "__main__":  # small CPU smoke run: python -m cuzk_jax.bench.curve
    import types

    cfg = types.SimpleNamespace(group=["g1"], log_n=["8"], impl=["xyzz_add_mixed", "decode_host", "encode_host"],
                                reps=2, warmup=1)
    print(bench.format_table(run(cfg)))
