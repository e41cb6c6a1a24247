"""Field-multiplication throughput: XLA (unrolled / rolled CIOS) vs the Pallas kernel, A/B in one run.

Rows: field, log_n, impl, compile_s, median_ms, mul_per_s, and ``matches_xla`` (exact equality of the output with the
XLA unrolled path on the same inputs). ``chain4`` rows time four dependent multiplications in one program (the
situation inside curve formulas). ``ptx[:k=K]`` rows (GPU) time the compiled kernels' PTX product
block, ``K`` dependent products per element in one kernel (:func:`cuzk_jax.ops.pallas.field_mul.ptx_chain`),
checked against ``K`` chained XLA products. Inputs are random limbs with the top limb below the modulus' top limb, so every
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


#: dependent products per element of one ``ptx`` row (a kernel's fori_loop; ``ptx:k=K`` overrides)
PTX_CHAIN = 32


def _parse_impl(spec: str):
    """'pallas:b=256:w=4' -> ('pallas', {'block': 256, 'num_warps': 4}); 'ptx:k=32' -> ('ptx', {'k': 32})."""
    name, *opts = spec.split(":")
    kw = {}
    for o in opts:
        k, v = o.split("=")
        kw[{"b": "block", "w": "num_warps", "k": "k"}[k]] = int(v)
    return name, kw


def _fn(f, impl: str, kw: dict, chain: int):
    if impl in ("xla", "xla_rolled"):
        fs = f.with_schedule("unrolled" if impl == "xla" else "rolled")

        def one(a, b):
            return fs.mul(a, b)
    elif impl == "pallas":

        def one(a, b):
            return field_mul.mul(a, b, f.name, **kw)
    elif impl == "ptx":  # the compiled kernels' PTX product blocks, k dependent products in one kernel

        def one(a, b):
            return field_mul.ptx_chain(a, b, f.name, **{"k": PTX_CHAIN, **kw})
    else:
        raise ValueError(f"unknown field impl {impl!r}")

    def run(a, b):
        x = a
        for _ in range(chain):  # intentionally unrolled: this *measures* chained muls in one program
            x = one(x, b)
        return x

    return run


def _xla_chain(f, a, b, k: int):
    """``a * b^k / R^k`` by the XLA field (rolled products in a fori_loop): the ``ptx`` rows' reference."""
    fs = f.with_schedule("rolled")
    return jax.jit(lambda a, b: jax.lax.fori_loop(0, k, lambda _, x: fs.mul(x, b), a))(a, b)


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
                    if impl in ("pallas", "ptx") and not on_gpu:
                        continue
                    if impl == "ptx" and chain > 1:  # its kernel chains its products itself
                        continue
                    compiled, compile_s = bench.compile_timed(_fn(f, impl, kw, chain), a, b)
                    out = compiled(a, b)
                    if impl == "xla" and chain == 1:
                        ref_out = out
                    if impl == "ptx":  # against k chained XLA products
                        match = bool(jnp.array_equal(out, _xla_chain(f, a, b, kw.get("k", PTX_CHAIN))))
                    else:
                        match = bool(jnp.array_equal(out, ref_out)) if (ref_out is not None and chain == 1) else None
                    t = bench.time_runs(compiled, (a, b), reps=cfg.reps, warmup=cfg.warmup)
                    per = chain * (kw.get("k", PTX_CHAIN) if impl == "ptx" else 1)  # products per element
                    rate = n * per / t["median_s"]
                    bench.emit(rows, {
                        "field": fname, "log_n": log_n, "impl": spec, "chain": per,
                        "compile_s": round(compile_s, 2), "median_ms": t["median_s"] * 1e3,
                        "mul_per_s": rate, "vs_xla_ref": rate / REFERENCE["xla"],
                        "vs_cuda_ref": rate / REFERENCE["cuda"], "matches_xla": match, **bench.profile_of(t),
                    })
                    print(bench.brief(rows[-1]), flush=True)
    return rows
