"""Verify a snarkjs-format Groth16 proof (BLS12-381) with cuzk_jax's verifier (pairing by py_arkworks_bls12381).

  python scripts/snarkjs_verify.py --vk=verification_key.json --public=public.json --proof=proof.json

Prints "OK!" and exits 0 if the proof verifies, else prints the reason and exits 1 (malformed files: exit 2).
The logic lives in cuzk_jax.snarkjs.verifier.
"""

import sys

from absl import app, flags

from cuzk_jax import cli

flags.DEFINE_string("vk", "verification_key.json", "verification key (snarkjs `zkey export verificationkey`)")
flags.DEFINE_string("public", "public.json", "public signals")
flags.DEFINE_string("proof", "proof.json", "proof")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from cuzk_jax.snarkjs import jsonio, verifier

    try:
        reason = verifier.check(jsonio.read_vk(FLAGS.vk), jsonio.read_public(FLAGS.public),
                                jsonio.read_proof(FLAGS.proof))
    except ValueError as e:
        cli.fail(e)
    if reason is None:
        print("OK!")
        return
    print(f"Invalid proof: {reason}")
    sys.exit(1)


if __name__ == "__main__":
    app.run(main)
