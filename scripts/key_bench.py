"""Time loading a cached proving key, with and without the subgroup test of its queries (the key cache skips it).

  python3 scripts/key_bench.py --circuit=porep_like --preset=domain20 --out=key-load.json

Needs the key in the cache (run scripts/setup.py or scripts/prove.py first). Each mode runs twice in one process:
the first load includes compiling the decode programs, the second is the steady cost.
"""

import json
import os
import time

from absl import app, flags

from cuzk_jax import cli

flags.DEFINE_string("circuit", "porep_like", "circuit name")
flags.DEFINE_string("preset", "tiny", "circuit preset")
flags.DEFINE_string("key_dir", "", "proving-key cache directory (default ~/.cache/cuzk_jax/keys)")
flags.DEFINE_list("modes", ["cache", "full"], "cache = subgroup_check=False (the key cache), full = every check")
flags.DEFINE_string("out", "", "write the rows as JSON here")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS


def main(argv):
    del argv
    import jax

    from cuzk_jax import bench, keycache
    from cuzk_jax.circuits import base
    from cuzk_jax.groth16.data_structures import ProvingKey

    cli.use_cache_dir(FLAGS.cache_dir)
    circuit = base.get_circuit(FLAGS.circuit, FLAGS.preset)
    path = keycache.key_path(circuit, circuit.r1cs(), FLAGS.key_dir or None)
    if not os.path.exists(path):
        raise ValueError(f"no cached key {path}: run scripts/setup.py --circuit={FLAGS.circuit} "
                         f"--preset={FLAGS.preset} first")
    with open(path, "rb") as fh:
        data = fh.read()
    rows = []
    for mode in FLAGS.modes:
        if mode not in ("cache", "full"):
            raise app.UsageError(f"unknown mode {mode!r}")
        for rep in ("first", "second"):
            t0 = time.perf_counter()
            pk = ProvingKey.from_bytes(data, subgroup_check=mode == "full")
            jax.block_until_ready(pk)
            rows.append({"preset": FLAGS.preset, "mode": mode, "load": rep, "mbytes": round(len(data) / 2**20, 1),
                         "seconds": round(time.perf_counter() - t0, 2)})
            del pk
            if FLAGS.out:  # after every row: a run stopped by a time limit keeps what it measured
                bench.write_json(FLAGS.out, {"environment": bench.environment(), "rows": rows})
    print(bench.format_table(rows))


if __name__ == "__main__":
    cli.run(main)
