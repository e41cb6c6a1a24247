"""Engine vs sequential sector proving (issue 7's GPU run): throughput, JSON rows and a timeline PNG.

  python scripts/engine_gpu.py --preset=medium --sectors=4 --partitions=10 --max_batch=10,20 \
      --out_dir=bench/results

Proves the same sectors twice -- one after another (serial synthesis + one batch per sector) and through the
engine (synthesis pool, cross-sector batches, overlap) -- after compiling every shape; verifies every proof;
writes <out_dir>/engine-<circuit>-<preset>-<backend>.json and .png. The logic is in cuzk_jax/bench/engine.py.
"""

import os

from absl import app, flags

from cuzk_jax import cli

flags.DEFINE_string("circuit", "porep_like", "circuit name")
flags.DEFINE_string("preset", "medium", "circuit preset (porep_like: small ~2^13.6, medium ~2^19 constraints)")
flags.DEFINE_integer("sectors", 4, "sectors proved in each run")
flags.DEFINE_integer("partitions", 10, "partitions per sector")
flags.DEFINE_integer("first_sector", 0, "seed of the first sector")
flags.DEFINE_list("max_batch", ["10", "20"], "engine batch sizes to compare (one engine run each; 10 = overlap "
                  "only, 20 = overlap + cross-sector batching)")
flags.DEFINE_enum("synthesis", "process", ["process", "thread"], "synthesis worker kind")
flags.DEFINE_integer("workers", 0, "synthesis workers (0 = cores - 1)")
flags.DEFINE_float("max_wait_s", 30.0, "engine: longest wait of a ready partition for its batch to fill")
flags.DEFINE_string("msm_impl", "", "MSM implementation override (xla, pallas, pre[:impl][:c=K]; see prove.py)")
flags.DEFINE_bool("synth_compare", True, "also measure synthesis throughput of thread vs process pools")
flags.DEFINE_string("out_dir", os.path.join("bench", "results"), "directory for the JSON and PNG")
flags.DEFINE_string("name", "", "output base name (default engine-<circuit>-<preset>-<backend>)")
flags.DEFINE_string("key_dir", "", "proving-key cache directory (default ~/.cache/cuzk_jax/keys)")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from cuzk_jax import bench
    from cuzk_jax.bench import engine

    cli.use_cache_dir(FLAGS.cache_dir)
    rows = engine.compare(FLAGS.circuit, FLAGS.preset, FLAGS.sectors, FLAGS.partitions,
                          tuple(int(x) for x in FLAGS.max_batch), synthesis=FLAGS.synthesis,
                          workers=FLAGS.workers or None, max_wait_s=FLAGS.max_wait_s, msm_impl=FLAGS.msm_impl or None,
                          key_dir=FLAGS.key_dir or None, out_dir=FLAGS.out_dir, name=FLAGS.name or None,
                          synth_compare=FLAGS.synth_compare, first_sector=FLAGS.first_sector)
    print(bench.format_table(rows), flush=True)


if __name__ == "__main__":
    app.run(main)
