"""Prove a circom circuit with a snarkjs Groth16 zkey (BLS12-381); writes snarkjs's proof.json / public.json.

  python scripts/snarkjs_prove.py --zkey=circuit.zkey --wtns=witness.wtns --proof=proof.json --public=public.json
  npx snarkjs groth16 verify verification_key.json public.json proof.json     # -> OK!

The logic lives in cuzk_jax.snarkjs (prover.prove_files); this main only parses flags and reports.
"""

import json

from absl import app, flags

from cuzk_jax import cli

flags.DEFINE_string("zkey", None, "snarkjs Groth16 proving key (.zkey)", required=True)
flags.DEFINE_string("wtns", None, "witness file (.wtns, from `snarkjs wtns calculate` or circom's witness tool)",
                    required=True)
flags.DEFINE_string("proof", "proof.json", "output: proof in snarkjs's JSON layout")
flags.DEFINE_string("public", "public.json", "output: public signals in snarkjs's JSON layout")
flags.DEFINE_enum("backend", "device", ["device", "host"],
                  "device: XLA ops (GPU/TPU/CPU); host: Python ints + py_arkworks_bls12381 (slow oracle)")
flags.DEFINE_bool("check_points", True, "check that every zkey point is on its curve while reading")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS


def main(argv):
    del argv
    if FLAGS.backend == "device":
        cli.use_cache_dir(FLAGS.cache_dir)
    from cuzk_jax.snarkjs import prover

    res = prover.prove_files(FLAGS.zkey, FLAGS.wtns, FLAGS.proof, FLAGS.public, backend=FLAGS.backend,
                             check_points=FLAGS.check_points)
    print(json.dumps({"proof": FLAGS.proof, "public": FLAGS.public, "backend": FLAGS.backend,
                      "timings_s": {k: round(v, 4) for k, v in res.timings.items()}}))


if __name__ == "__main__":
    app.run(main)
