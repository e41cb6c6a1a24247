"""``--op=kernel-compile``: compile time of each Pallas kernel on its own (GPU), and the size of its Triton IR.

  python scripts/bench.py --op=kernel-compile --kernel=acc,general_acc --group=g1,g2
  python scripts/bench.py --op=kernel-compile --kernel=general_acc --lower_only   # IR size on a CPU
  python scripts/bench.py --op=kernel-compile --kernel=ntt_pass --log_n=20 --lower_only   # one NTT pass kernel

Times the two kernels of :mod:`cuzk_jax.ops.pallas.bucket` separately (the GPU default field: PTX carry-chain
blocks), at a small shape (compile time does not depend on the shape much), so the kernel that needs cutting down
is known; ``ntt_pass`` times one pass kernel of :mod:`cuzk_jax.ops.pallas.ntt` (the default 8-point
sub-transform per lane with the four-step twiddle, :func:`~cuzk_jax.ops.pallas.ntt.sub_transform`) at each
``--log_n``. Lowering alone (``--lower_only``) works on a CPU machine too and reports the Triton IR line count, the proxy used to compare kernel variants without a GPU. A row is emitted (and
written) when lowering ends and completed with ``compile_s`` after compilation, so a run killed by a time limit
still records the lowering. The persistent compilation cache is off while this op runs (it would time a cache hit).
"""

from __future__ import annotations

import time

from cuzk_jax import bench

KERNELS = ("acc", "general", "general_acc", "general_wrow", "general_shift", "ntt_pass")
DEFAULTS = {"log_n": ["16"]}
_triton_sizes: list | None = None


def _count_triton_lines() -> list:
    """Patch the Pallas->Triton lowering (once per process) to record the line count of every kernel module it
    builds."""
    global _triton_sizes
    if _triton_sizes is not None:
        return _triton_sizes
    from jax._src.pallas.triton import lowering as L
    from jax._src.pallas.triton import pallas_call_registration as R

    sizes = []
    orig = L.lower_jaxpr_to_triton_module

    def wrapped(*a, **k):
        res = orig(*a, **k)
        sizes.append(len(str(res.module.operation).splitlines()))
        return res

    L.lower_jaxpr_to_triton_module = wrapped
    R.lowering.lower_jaxpr_to_triton_module = wrapped
    _triton_sizes = sizes
    return sizes


def _program(kernel: str, group: str, log_n: int, block: int):
    """(jitted function, example arguments, row keys) for one kernel."""
    import jax
    import jax.numpy as jnp

    from cuzk_jax.ops import curve as cv
    from cuzk_jax.ops.pallas import bucket as pk

    if kernel.startswith("ntt_"):
        from cuzk_jax.ops.pallas import ntt as pntt

        s, nn = 3, 1 << log_n  # the GPU default's sub-transform size (NttConfig sub=3)
        args = (jnp.zeros((8, 1, 1 << s, nn >> s), jnp.uint32), jnp.zeros((nn // 2, 8), jnp.uint32))
        fn = jax.jit(lambda x, w: pntt.sub_transform(x, w, s=s, n=nn, R_=1, twiddle=True, triton=True))
        return fn, args, {"log_n": log_n}
    curve = cv.CURVES[group]
    Lc = 12 if group == "g1" else 24
    nrows, seg = 4 * Lc, 8
    n = 4 * block * seg
    opts = dict(block=block, num_warps=max(1, block // 32))
    if kernel == "acc":
        args = (jnp.int32(n), jnp.bool_(False), jnp.zeros((n,), jnp.int32), jnp.zeros((n,), jnp.int32),
                jnp.zeros((n, 2 * Lc), jnp.uint32), jnp.zeros((nrows, 2 * n), jnp.uint32))
        fn = jax.jit(lambda *a: pk.accumulate_bases(curve, *a, seg=seg, **opts))
    else:
        args = (jnp.zeros((pk.NPRM,), jnp.int32), jnp.zeros((n,), jnp.int32), jnp.zeros((nrows, n), jnp.uint32),
                jnp.zeros((nrows, n), jnp.uint32))
        modes = pk.MODES if kernel == "general" else (kernel.split("_")[1],)
        fn = jax.jit(lambda *a: pk.general_step(curve, *a, modes=modes, **opts))
    return fn, args, {"group": group, "block": block}


def run(cfg) -> list[dict]:
    import jax

    bad = [k for k in cfg.kernel if k not in KERNELS]
    if bad:
        raise ValueError(f"unknown --kernel {','.join(bad)}; expected some of {','.join(KERNELS)}")
    sizes = _count_triton_lines()
    rows: list[dict] = []
    cache = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        for kernel in cfg.kernel:
            shapes = [("g1", int(n)) for n in cfg.log_n] if kernel.startswith("ntt_") else [(g, 0) for g in cfg.group]
            for group, log_n in shapes:
                fn, args, keys = _program(kernel, group, log_n, cfg.block)
                row = {"kernel": kernel, **keys, "backend": jax.default_backend()}
                first = len(sizes)
                t0 = time.perf_counter()
                lowered = (fn.trace(*args).lower(lowering_platforms=("cuda",)) if cfg.lower_only
                           else fn.lower(*args))
                row.update(lower_s=round(time.perf_counter() - t0, 2), triton_ir_lines=list(sizes[first:]))
                print(row, flush=True)
                bench.emit(rows, row)
                if not cfg.lower_only:
                    t0 = time.perf_counter()
                    lowered.compile()
                    row["compile_s"] = round(time.perf_counter() - t0, 2)
                    print(row, flush=True)
    finally:
        jax.config.update("jax_enable_compilation_cache", cache)
    return rows
