"""Compile time of each Pallas kernel on its own (GPU), and the size of its Triton IR.

  python scripts/kernel_compile.py --kernel=acc --group=g1 --out=acc-g1.json
  python scripts/kernel_compile.py --kernel=general_acc --lower_only   # IR size on a CPU
  python scripts/kernel_compile.py --kernel=ntt_r4 --lower_only        # the NTT step kernel

Times the two kernels of :mod:`cuzk_jax.ops.pallas.bucket` separately (the GPU default field: PTX carry-chain
blocks), at a small shape (compile time does not depend on the shape much), so the kernel that needs cutting down
is known; ``ntt_r2/r4`` time the NTT step kernel of :mod:`cuzk_jax.ops.pallas.ntt` (radix 2 runs the stage left
over, radix 4 the others) at ``--ntt_log_n``. Lowering alone (``--lower_only``) works on a CPU machine too and
reports the Triton IR line count, the proxy used to compare kernel variants without a GPU. JSON is written before
compilation starts and again after it ends, so a run killed by a time limit still records the lowering.
"""

import json
import os
import time

from absl import app, flags

flags.DEFINE_enum("kernel", "acc", ["acc", "general", "general_acc", "general_wrow", "general_shift", "ntt_r2",
                                    "ntt_r4"],
                  "which kernel: MSM accumulate, the general step with every mode, one mode of it, or an NTT step")
flags.DEFINE_integer("ntt_log_n", 16, "NTT size for the ntt_* kernels")
flags.DEFINE_enum("group", "g1", ["g1", "g2"], "group")
flags.DEFINE_integer("block", 64, "lanes per program")
flags.DEFINE_bool("lower_only", False, "lower for CUDA (works on a CPU) and count the Triton IR; do not compile")
flags.DEFINE_string("out", "", "JSON output path")
FLAGS = flags.FLAGS


def _count_triton_lines():
    """Patch the Pallas->Triton lowering to record the line count of every kernel module it builds."""
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
    return sizes


def main(argv):
    del argv
    import jax
    import jax.numpy as jnp

    from cuzk_jax.ops import curve as cv
    from cuzk_jax.ops.pallas import bucket as pk

    sizes = _count_triton_lines()
    ntt = FLAGS.kernel.startswith("ntt_")
    curve = cv.CURVES[FLAGS.group]
    Lc = 12 if FLAGS.group == "g1" else 24
    nrows, block, seg = 4 * Lc, FLAGS.block, 8
    n = 4 * block * seg
    opts = dict(block=block, num_warps=max(1, block // 32))
    if ntt:
        from cuzk_jax.ops.pallas import ntt as pntt

        k = {"ntt_r2": 1, "ntt_r4": 2}[FLAGS.kernel]
        nn = 1 << FLAGS.ntt_log_n
        args = (jnp.zeros((1, 8, nn), jnp.uint32), jnp.zeros((8, nn // 2), jnp.uint32), jnp.int32(1))
        fn = jax.jit(lambda x, w, st: pntt.step(x, w, st, log_n=FLAGS.ntt_log_n, k=k, triton=True))
    elif FLAGS.kernel == "acc":
        args = (jnp.int32(n), jnp.bool_(False), jnp.zeros((n,), jnp.int32), jnp.zeros((n,), jnp.int32),
                jnp.zeros((n, 2 * Lc), jnp.uint32), jnp.zeros((nrows, 2 * n), jnp.uint32))
        fn = jax.jit(lambda *a: pk.accumulate_bases(curve, *a, seg=seg, **opts))
    else:
        args = (jnp.zeros((pk.NPRM,), jnp.int32), jnp.zeros((n,), jnp.int32), jnp.zeros((nrows, n), jnp.uint32),
                jnp.zeros((nrows, n), jnp.uint32))
        modes = pk.MODES if FLAGS.kernel == "general" else (FLAGS.kernel.split("_")[1],)
        fn = jax.jit(lambda *a: pk.general_step(curve, *a, modes=modes, **opts))
    row = {"kernel": FLAGS.kernel, "backend": jax.default_backend()}
    row.update({"log_n": FLAGS.ntt_log_n} if ntt else {"group": FLAGS.group, "block": block})
    out = FLAGS.out or f"kernel-{FLAGS.kernel}{'' if ntt else '-' + FLAGS.group}.json"

    def write():
        with open(out, "w") as fh:
            json.dump(row, fh, indent=2)

    t0 = time.perf_counter()
    platforms = ("cuda",) if FLAGS.lower_only else None
    lowered = fn.trace(*args).lower(lowering_platforms=platforms) if platforms else fn.lower(*args)
    row.update(lower_s=round(time.perf_counter() - t0, 2), triton_ir_lines=list(sizes))
    print(row, flush=True)
    write()
    if FLAGS.lower_only:
        return
    t0 = time.perf_counter()
    lowered.compile()
    row["compile_s"] = round(time.perf_counter() - t0, 2)
    print(row, flush=True)
    write()
    os.sync()


if __name__ == "__main__":
    app.run(main)
