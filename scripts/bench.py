"""Benchmarks: prints a table and writes JSON (``cuzk-bench``, ``python -m cuzk_jax bench``).

  python scripts/bench.py --op=field --field=fq,fr --log_n=20,22 --out=bench/results/field.json
  python scripts/bench.py --op=msm --group=g1,g2 --log_n=16,18,20
  python scripts/bench.py --op=engine --preset=tiny --sectors=4 --partitions=10 --max_batch=20,40
  python scripts/bench.py --op=keyload --preset=domain20             # a cached key, with / without subgroup checks
  python scripts/bench.py --op=synth --circuit=porep_like --preset=large --partitions=10
  python scripts/bench.py --op=snarkjs --log_n=12,16 --impl=snarkjs,device --export_dir=bench/snarkjs_artifacts
  python scripts/bench.py --op=kernel-compile --kernel=acc,general_acc --group=g1,g2   # Pallas kernel compile time
  python scripts/bench.py --op=check-msm --group=g1,g2 --log_n=12 --impl=pallas    # the MSM against arkworks
  python scripts/bench.py --op=sector --preset=domain24 --partitions=10 --prover=device_budget=120GiB,split=auto
  python scripts/bench.py --op=service --backend=host --sectors=16       # the daemon under load vs the engine
  python scripts/bench.py --op=multigpu                                   # 1 vs all local devices (docs/multi_device.md)
  python scripts/bench.py --op=cost-curve --inputs='bench/results/*-sector-*.json' --plot=curve.png
  python scripts/bench.py --op=soak --proofs=10000 --soak_faults=kill=0.01,crash=0.002,cancel=0.02,unsat=0.02

Each op lives in cuzk_jax/bench/<op>.py (``-`` read as ``_``; ``run(cfg) -> rows``; an op's ``DEFAULTS`` replace
the defaults of the flags not given); this main only parses flags and reports. Every finished row reaches the JSON
at once, so a run stopped by a time limit keeps what it measured. Exit status 1 when a row has ``ok: false`` (a
failed check). The ``--out`` path is checked before any measurement; the JSON is replaced atomically.
Exit status: 0 ok, 1 a row is not ok, 2 bad usage or bad input (one ``error:`` line on stderr).
"""

import importlib
import os
import types

from absl import app, flags

from cuzk_jax import cli

OPS = ("field", "curve", "msm", "ntt", "h", "engine", "keyload", "synth", "snarkjs", "kernel-compile", "check-msm",
       "soak", "kinds", "sector", "multigpu", "setup", "service", "memory", "stage", "cost-curve")

flags.DEFINE_list("op", ["field"], f"ops to benchmark, from {OPS}")
flags.DEFINE_list("field", ["fq"], "fields for --op=field (fq, fr, fq2)")
flags.DEFINE_list("group", ["g1"], "groups for --op=msm (g1, g2)")
flags.DEFINE_list("log_n", ["20"], "log2 of the problem sizes (--op=snarkjs: 12,16)")
flags.DEFINE_list("impl", [], "implementations to compare (op-specific; empty = all available; --op=snarkjs: "
                  "snarkjs, device, device_arkmsm, host)")
flags.DEFINE_integer("batch", 1, "leading batch (partition) axis, where the op supports one (soak: the engine's "
                     "largest device batch, default 50)")
flags.DEFINE_bool("profile", False, "trace one more run of every timed op (--op=sector: its last rep) with JAX's "
                  "profiler and record its kernels per program and HLO op in the row (cuzk_jax.bench.profile)")
flags.DEFINE_integer("reps", 5, "timed repetitions (median reported)")
flags.DEFINE_integer("warmup", 2, "untimed warm-up runs")
cli.define_path("out", "", "JSON output path (default: bench/results/<op>-<backend>-<date>.json)")
# --op=engine, keyload, synth: the circuit
flags.DEFINE_string("circuit", "porep_like", "circuit name (cube, merkle_inclusion, porep_like)")
flags.DEFINE_string("preset", None, "circuit preset (default: tiny; --op=synth: the circuit's default)")
flags.DEFINE_integer("partitions", 10, "partitions per sector / witnesses of one shape")
cli.define_path("key_dir", "", "proving-key cache directory (default ~/.cache/cuzk_jax/keys)")
# --op=engine
flags.DEFINE_integer("sectors", 4, "engine: sectors proved in each run; sector --stream: sectors streamed (default 3)")
flags.DEFINE_bool("stream", False, "sector: prove --sectors sectors through the engine (synthesis by --workers "
                  "processes overlapped with proving, host witnesses within host_budget) instead of --reps over "
                  "witnesses made ahead")
flags.DEFINE_integer("first_sector", 0, "engine: seed of the first sector")
flags.DEFINE_list("max_batch", [], "engine: batch sizes to compare, one engine run each (default 2 x partitions)")
flags.DEFINE_enum("synthesis", "process", ["process", "thread"], "engine: synthesis worker kind")
flags.DEFINE_integer("workers", 0, "engine: synthesis workers (0 = cores - 1)")
flags.DEFINE_float("max_wait_s", 30.0, "engine: longest wait of a ready partition for its batch to fill")
flags.DEFINE_list("variants", [], "sector: prover-config overrides to A/B in the same process, one per item, keys "
                  "of one variant joined by '+' (e.g. prefetch=on,msm=pallas:acc_seg=64+batch=2): every rep "
                  "also runs each over the same resident key and plan")
flags.DEFINE_string("prover", "", "engine: prover configuration, passed through as given (see prove --help)")
flags.DEFINE_list("fill", ["predict"], "engine: batch-forming rules to compare, one run each (predict: batch by what "
                  "is about to be ready; wait: the fixed --max_wait_s)")
flags.DEFINE_enum("backend", "device", ["device", "host"], "service: the daemon's engine backend (host: Python ints)")
flags.DEFINE_enum("fixed_base", "auto", ["auto", "affine", "bucket", "jacobian"], "sector: fixed-base method of "
                  "the device setup (development_setup points=; auto: the platform's default per group)")
flags.DEFINE_bool("synth_compare", False, "engine: also measure synthesis throughput of thread vs process pools")
# --op=keyload
flags.DEFINE_list("modes", ["cache", "full"], "keyload: cache = no subgroup test (the key cache), full = every check")
# --op=synth
flags.DEFINE_integer("seed", 0, "synth: sector seed for input sampling")
flags.DEFINE_bool("device_eval", True, "synth: evaluate the constraints on the default JAX device")
flags.DEFINE_integer("partition_chunk", 0, "synth: evaluate the partitions this many at a time (0 = all at once)")
flags.DEFINE_integer("reference_check_max", 0, "synth: also check partition 0 with the Python reference when the "
                     "circuit has at most this many constraints (0 = never)")
# --op=snarkjs
flags.DEFINE_enum("setup", "auto", ["auto", "ceremony", "insecure"], "snarkjs: proving keys from a snarkjs "
                  "ceremony, an INSECURE known-tau dev setup, or auto (ceremony up to 2^12 or when a ptau is cached)")
cli.define_path("artifacts_dir", "", "snarkjs: use exported circuit files from here instead of building (no Node)")
cli.define_path("export_dir", "", "snarkjs: copy the built circuit files here (to carry them to another machine)")
flags.DEFINE_bool("export_zkey", True, "snarkjs: export the zkey (else, for insecure keys, the r1cs)")
flags.DEFINE_list("baseline", [], "snarkjs: JSONs of earlier runs whose snarkjs rows give the ratio")
# --op=kernel-compile
flags.DEFINE_list("kernel", ["acc"], "kernel-compile: acc, general, general_acc, general_wrow, general_shift (MSM, per "
                  "--group), ntt_pass (one NTT pass kernel, per --log_n)")
flags.DEFINE_integer("block", 64, "kernel-compile: lanes per program of the MSM kernels")
flags.DEFINE_bool("lower_only", False, "kernel-compile: lower for CUDA (works on a CPU) and count the Triton IR only")
# --op=check-msm
flags.DEFINE_bool("check_batch", True, "check-msm: also check a 3-partition MSM (per-partition bases)")
flags.DEFINE_bool("check_xla", False, "check-msm: also compare with the XLA fallback (on a GPU: minutes of compiling)")
# --op=soak
flags.DEFINE_integer("proofs", 10_000, "soak: proofs to make (jobs of 1..--partitions partitions; default 2 there)")
flags.DEFINE_enum("soak_backend", "device", ["device", "host"], "soak: the engine's backend (device: the prove "
                  "pipeline on the default JAX platform; host: Python ints)")
flags.DEFINE_string("soak_faults", "kill=0.01,crash=0.002,cancel=0.02,unsat=0.02", "soak: fault probabilities per "
                    "job: kill (a synthesis worker exits, once), crash (every time), cancel (future.cancel()), unsat "
                    "(a witness violates the R1CS)")
flags.DEFINE_integer("soak_inflight", 0, "soak: most jobs outstanding at once (0 = 4 x --batch)")
flags.DEFINE_string("soak_note", "", "soak: a note stored in the row (e.g. why --proofs is not the default)")
# --op=cost-curve
flags.DEFINE_list("inputs", [], "cost-curve: JSON files of --op=sector runs (shell-style patterns expanded)")
flags.DEFINE_string("plot", "", "cost-curve: write the curve as this PNG (needs matplotlib)")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS


def op_config(op: str, module) -> types.SimpleNamespace:
    """The flag values for ``op``: the op's ``DEFAULTS`` for flags not given on the command line."""
    defaults = getattr(module, "DEFAULTS", {})
    values = {f.name: f.value for f in FLAGS.get_flags_for_module(FLAGS.find_module_defining_flag("op"))}
    values.update({k: v for k, v in defaults.items() if not FLAGS[k].present})
    values["baseline"] = ",".join(os.path.expanduser(p) for p in values["baseline"])
    values["op"] = op
    return types.SimpleNamespace(**values)


def main(argv):
    del argv
    from cuzk_jax import bench

    bad = [op for op in FLAGS.op if op not in OPS]
    if bad:
        raise app.UsageError(f"unknown --op {','.join(bad)}; expected one of {','.join(OPS)}")
    cli.use_cache_dir(FLAGS.cache_dir)
    bench.set_profiling(FLAGS.profile)
    env = bench.environment()
    print(f"environment: {env}", flush=True)
    name = f"{'-'.join(FLAGS.op)}-{env['backend']}-{env['date'][:10]}.json"
    out = FLAGS.out or os.path.join("bench", "results", name)
    cli.check_output_file(out, "out")  # before any measurement
    flag_values: dict = {"op": FLAGS.op}  # and each op's configuration
    rows: list[dict] = []

    def write_partial(row):
        rows.append(row)
        bench.write_json(out, {"environment": env, "flags": flag_values, "rows": rows, "complete": False})

    bench.add_row_sink(write_partial)
    for op in FLAGS.op:
        module = importlib.import_module(f"cuzk_jax.bench.{op.replace('-', '_')}")
        cfg = op_config(op, module)
        cfg.out = out
        flag_values[op] = {k: v for k, v in vars(cfg).items() if k not in ("op", "out", "cache_dir")}
        op_rows = module.run(cfg)
        for r in op_rows:
            r.setdefault("op", op)
        rows += [r for r in op_rows if not any(r is seen for seen in rows)]  # those not already emitted
        short = [{k: v for k, v in r.items() if not (isinstance(v, dict) or isinstance(v, list) and len(v) > 4)}
                 for r in op_rows]  # long lists and nested results go to the JSON only
        print(bench.format_table(short), flush=True)
    bench.write_json(out, {"environment": env, "flags": flag_values, "rows": rows, "complete": True})
    print(f"wrote {out}")
    failed = sum(r.get("ok") is False for r in rows)
    if failed:
        print(f"{failed} row(s) not ok", flush=True)
        return 1


def run():
    cli.run(main)  # usage errors and bad input: one error line, exit status 2


if __name__ == "__main__":
    run()
