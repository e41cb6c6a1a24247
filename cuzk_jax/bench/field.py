"""Field-multiplication throughput: XLA (unrolled / rolled CIOS) vs the Pallas kernel, A/B in one run.

Rows: field, log_n, impl, compile_s, median_ms, mul_per_s, and ``matches_xla`` (exact equality of the output with the
XLA unrolled path on the same inputs). ``chain4`` rows time four dependent multiplications in one program (the
situation inside curve formulas). Inputs are random limbs with the top limb below the modulus' top limb, so every
value is < p (valid Montgomery-form elements; uniformity is irrelevant for timing).
"""

from __future__ import annotations

import numpy as np

import jax
import jax.numpy as jnp

from cuzk_jax import bench
from cuzk_jax.ops import field as F
from cuzk_jax.ops.pallas import field_mul

# H200 reference points from the issue (12 x u32 CIOS Fq mul/s).
REFERENCE = {"cuda": 1.5e10, "pallas_straightforward": 9e9, "xla": 3.7e9}


def random_elements(f: F.PrimeField, n: int, seed: int) -> jax.Array:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 1 << 32, size=(f.limbs, n), dtype=np.uint64).astype(np.uint32)
    x[-1] %= np.uint32(f.p_limbs[-1])
    return jnp.asarray(x)


def _parse_impl(spec: str):
    """'pallas:b=256:w=4' -> ('pallas', {'block': 256, 'num_warps': 4})."""
    name, *opts = spec.split(":")
    kw = {}
    for o in opts:
        k, v = o.split("=")
        kw[{"b": "block", "w": "num_warps"}[k]] = int(v)
    return name, kw


def _fn(f, impl: str, kw: dict, chain: int):
    if impl in ("xla", "xla_rolled"):
        fs = f.with_schedule("unrolled" if impl == "xla" else "rolled")

        def one(a, b):
            return fs.mul(a, b)
    elif impl == "pallas":

        def one(a, b):
            return field_mul.mul(a, b, f.name, **kw)
    else:
        raise ValueError(f"unknown field impl {impl!r}")

    def run(a, b):
        x = a
        for _ in range(chain):  # intentionally unrolled: this *measures* chained muls in one program
            x = one(x, b)
        return x

    return run


def run(cfg) -> list[dict]:
    on_gpu = jax.default_backend() == "gpu"
    impls = list(cfg.impl) or (["xla", "xla_rolled", "pallas", "pallas:b=512:w=8", "pallas:b=128:w=4"] if on_gpu
                               else ["xla", "xla_rolled"])
    rows = []
    for fname in cfg.field:
        f = F.FIELDS[fname]
        if not isinstance(f, F.PrimeField):
            raise ValueError("--op=field benchmarks prime fields (fq, fr)")
        for log_n in map(int, cfg.log_n):
            n = 1 << log_n
            a, b = random_elements(f, n, 1), random_elements(f, n, 2)
            ref_out = None
            for chain in (1, 4):
                for spec in impls:
                    impl, kw = _parse_impl(spec)
                    if impl == "pallas" and not on_gpu:
                        continue
                    compiled, compile_s = bench.compile_timed(_fn(f, impl, kw, chain), a, b)
                    out = compiled(a, b)
                    if impl == "xla" and chain == 1:
                        ref_out = out
                    match = bool(jnp.array_equal(out, ref_out)) if (ref_out is not None and chain == 1) else None
                    t = bench.time_runs(compiled, (a, b), reps=cfg.reps, warmup=cfg.warmup)
                    rate = n * chain / t["median_s"]
                    bench.emit(rows, {
                        "field": fname, "log_n": log_n, "impl": spec, "chain": chain,
                        "compile_s": round(compile_s, 2), "median_ms": t["median_s"] * 1e3,
                        "mul_per_s": rate, "vs_xla_ref": rate / REFERENCE["xla"],
                        "vs_cuda_ref": rate / REFERENCE["cuda"], "matches_xla": match, **bench.profile_of(t),
                    })
                    print(bench.brief(rows[-1]), flush=True)
    return rows
