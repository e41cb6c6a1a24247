"""Side-by-side: `snarkjs groth16 prove` vs cuzk_jax on the same zkey/witness; prints a table, writes JSON.

  # CPU host (Node installed): builds + caches the circuits and keys, times both, exports files for the GPU
  python scripts/snarkjs_bench.py --log_n=12,16 --impl=snarkjs,device --export_dir=bench/snarkjs_artifacts
  # GPU host (no Node): same files, cuzk_jax only, snarkjs figures from the CPU run's JSON
  python scripts/snarkjs_bench.py --log_n=12,16 --impl=device --artifacts_dir=bench/snarkjs_artifacts \
      --baseline=bench/results/snarkjs-cpu-12.json,bench/results/snarkjs-cpu-16.json

The logic is in cuzk_jax/snarkjs/bench.py (what is timed and how is documented there).
"""

import os

from absl import app, flags

from cuzk_jax import cli

flags.DEFINE_list("log_n", ["12", "16"], "log2 of the domain sizes (circuit fills ~2^k constraints)")
flags.DEFINE_list("impl", ["snarkjs", "device"], "snarkjs, device (XLA), device_arkmsm (XLA QAP/H + arkworks "
                  "MSMs), host (Python ints + arkworks: the oracle)")
flags.DEFINE_integer("reps", 3, "timed repetitions (median reported)")
flags.DEFINE_integer("warmup", 1, "untimed warm-up runs")
flags.DEFINE_enum("setup", "auto", ["auto", "ceremony", "insecure"],
                  "proving keys: snarkjs ceremony, INSECURE known-tau dev setup, or auto (ceremony up to 2^12 or "
                  "when a ptau is cached)")
flags.DEFINE_string("artifacts_dir", "", "use exported circuit files from here instead of building (no Node)")
flags.DEFINE_string("export_dir", "", "copy the built circuit files here (to carry them to another machine)")
flags.DEFINE_bool("export_zkey", True, "export the zkey (else, for insecure keys, the r1cs to regenerate it from)")
flags.DEFINE_string("baseline", "", "comma-separated JSONs of earlier runs whose snarkjs rows give the ratio")
flags.DEFINE_string("out", "", "JSON path (default bench/results/snarkjs-<backend>-<date>.json)")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from cuzk_jax import bench
    from cuzk_jax.snarkjs import bench as sbench

    cli.use_cache_dir(FLAGS.cache_dir)
    env = bench.environment()
    out = FLAGS.out or os.path.join("bench", "results", f"snarkjs-{env['backend']}-{env['date'][:10]}.json")
    flag_values = {k: FLAGS[k].value for k in ("log_n", "impl", "reps", "warmup", "setup")}
    partial: list[dict] = []

    def write_partial(row):  # a run stopped by a time limit keeps its finished rows
        partial.append(row)
        bench.write_json(out, {"environment": env, "flags": flag_values, "rows": partial, "complete": False})

    bench.add_row_sink(write_partial)
    rows = sbench.run([int(k) for k in FLAGS.log_n], FLAGS.impl, reps=FLAGS.reps, warmup=FLAGS.warmup,
                      setup=FLAGS.setup, artifacts_dir=FLAGS.artifacts_dir, export_dir=FLAGS.export_dir,
                      export_zkey=FLAGS.export_zkey, baseline=FLAGS.baseline)
    cols = ["log_n", "constraints", "setup", "impl", "median_s", "first_s", "qap_evals_s", "h_s", "msm_s",
            "verified", "speedup_vs_snarkjs"]
    print(bench.format_table([{c: r[c] for c in cols if c in r} for r in rows]))
    bench.write_json(out, {"environment": env, "flags": flag_values, "rows": rows, "complete": True})
    print(f"wrote {out}")


if __name__ == "__main__":
    app.run(main)
