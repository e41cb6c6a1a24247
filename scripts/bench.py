"""Benchmarks: prints a table and writes JSON.

  python scripts/bench.py --op=field --field=fq,fr --log_n=20,22 --out=bench/results/field.json
  python scripts/bench.py --op=msm --group=g1,g2 --log_n=16,18,20

Each op lives in cuzk_jax/bench/<op>.py (``run(cfg) -> rows``); this main only parses flags and reports.
"""

import importlib
import os

from absl import app, flags, logging

from cuzk_jax import cli

OPS = ("field", "curve", "msm", "ntt", "h", "engine")

flags.DEFINE_list("op", ["field"], f"ops to benchmark, from {OPS}")
flags.DEFINE_list("field", ["fq"], "fields for --op=field (fq, fr, fq2)")
flags.DEFINE_list("group", ["g1"], "groups for --op=msm (g1, g2)")
flags.DEFINE_list("log_n", ["20"], "log2 of the problem sizes")
flags.DEFINE_list("impl", [], "implementations to compare (op-specific; empty = all available)")
flags.DEFINE_integer("batch", 1, "leading batch (partition) axis, where the op supports one")
flags.DEFINE_integer("reps", 5, "timed repetitions (median reported)")
flags.DEFINE_integer("warmup", 2, "untimed warm-up runs")
flags.DEFINE_string("out", "", "JSON output path (default: bench/results/<op>-<backend>-<date>.json)")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from cuzk_jax import bench

    cli.use_cache_dir(FLAGS.cache_dir)
    env = bench.environment()
    logging.info("environment: %s", env)
    all_rows = []
    out = FLAGS.out or os.path.join("bench", "results", f"{'-'.join(FLAGS.op)}-{env['backend']}-{env['date'][:10]}.json")
    flag_values = {k: FLAGS[k].value for k in ("op", "field", "group", "log_n", "impl", "batch", "reps", "warmup")}
    partial: list[dict] = []

    def write_partial(row):  # every finished row reaches the file at once: a killed run keeps what it measured
        partial.append(row)
        bench.write_json(out, {"environment": env, "flags": flag_values, "rows": partial, "complete": False})

    bench.add_row_sink(write_partial)
    for op in FLAGS.op:
        if op not in OPS:
            raise app.UsageError(f"unknown --op {op!r}; expected one of {OPS}")
        module = importlib.import_module(f"cuzk_jax.bench.{op}")
        rows = module.run(FLAGS)
        for r in rows:
            r.setdefault("op", op)
        all_rows += rows
        print(bench.format_table(rows), flush=True)
    bench.write_json(out, {"environment": env, "flags": flag_values, "rows": all_rows, "complete": True})
    print(f"wrote {out}")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
