"""Synthesis-only benchmark: structure + per-partition witness synthesis, then device evaluation of A.z, B.z, C.z.

  python scripts/synth_bench.py --circuit=porep_like --preset=large --partitions=10
  python scripts/synth_bench.py --circuit=cube --partitions=2 --nodevice_eval

Prints a summary and writes JSON (default bench/results/synth-<circuit>-<preset>-<backend>-<date>.json).
The logic lives in cuzk_jax.circuits.bench.
"""

import json
import os

from absl import app, flags

from cuzk_jax import cli

flags.DEFINE_string("circuit", "porep_like", "circuit name (cube, merkle_inclusion, porep_like)")
flags.DEFINE_string("preset", None, "preset name (default: the circuit's default preset)")
flags.DEFINE_integer("partitions", 10, "partitions (witnesses of one R1CS shape)")
flags.DEFINE_integer("seed", 0, "sector seed for input sampling")
flags.DEFINE_integer("reps", 5, "timed device evaluations (median reported)")
flags.DEFINE_integer("warmup", 1, "untimed device evaluations")
flags.DEFINE_bool("device_eval", True, "evaluate the constraints on the default JAX device")
flags.DEFINE_enum("method", "scatter", ["scatter", "cumsum"], "segmented-sum method of the evaluator")
flags.DEFINE_integer("partition_chunk", 0, "evaluate the partitions this many at a time (0 = all at once)")
flags.DEFINE_integer("reference_check_max", 0, "also check partition 0 with the Python reference when the "
                     "circuit has at most this many constraints (0 = never)")
flags.DEFINE_string("out", "", "JSON output path ('' = default under bench/results)")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from cuzk_jax import bench
    from cuzk_jax.circuits import bench as synth_bench
    from cuzk_jax.circuits import get_circuit

    cli.use_cache_dir(FLAGS.cache_dir)
    preset = FLAGS.preset or get_circuit(FLAGS.circuit).preset
    env = bench.environment()
    result = synth_bench.run(FLAGS.circuit, preset, FLAGS.partitions, FLAGS.seed, FLAGS.reps, FLAGS.warmup,
                             FLAGS.device_eval, FLAGS.method, FLAGS.reference_check_max,
                             FLAGS.partition_chunk or None)
    out = FLAGS.out or os.path.join("bench", "results",
                                    f"synth-{FLAGS.circuit}-{preset}-{env['backend']}-{env['date'][:10]}.json")
    bench.write_json(out, {"environment": env, "flags": {k: FLAGS[k].value for k in (
        "circuit", "preset", "partitions", "seed", "reps", "warmup", "device_eval", "method",
        "partition_chunk")}, "result": result})
    short = {k: v for k, v in result.items() if not isinstance(v, (list, dict))}
    print(json.dumps(short, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    app.run(main)
