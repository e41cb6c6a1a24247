"""Verify Groth16 proofs: cuzk_jax's sector files, or a snarkjs proof.json.

  python3 scripts/verify.py --vk=~/.cache/cuzk_jax/keys/porep_like-tiny-XXXX.vk --public=proofs/sector-0.public.json
      --proofs=proofs/sector-0.proofs
  python3 scripts/verify.py --vk=verification_key.json --public=public.json --proof=proof.json   # snarkjs files

Sector mode (``--proofs``): ``--vk`` is a cuzk_jax ``.vk`` file, ``--public`` the JSON prove.py wrote; every
partition is reported, exit status 1 if any proof is invalid. snarkjs mode (``--proof``): ``--vk`` is snarkjs's
``verification_key.json``; prints "OK!" (exit 0) or the reason (exit 1). Malformed files: one error line, exit 2.
Pairings by py_arkworks_bls12381 in both modes.
"""

import sys

from absl import app, flags

from cuzk_jax import cli

cli.define_path("vk", None, "verifying key: cuzk_jax .vk file, or snarkjs verification_key.json with --proof")
cli.define_path("proofs", None, "cuzk_jax proof file (192 bytes per partition)")
cli.define_path("proof", None, "snarkjs proof.json (instead of --proofs)")
cli.define_path("public", None, "public inputs: prove.py's sector JSON, or snarkjs public.json with --proof")
flags.mark_flags_as_required(["vk", "public"])
FLAGS = flags.FLAGS


def _verify_snarkjs() -> None:
    from cuzk_jax.snarkjs import jsonio, verifier

    try:
        reason = verifier.check(jsonio.read_vk(FLAGS.vk), jsonio.read_public(FLAGS.public),
                                jsonio.read_proof(FLAGS.proof))
    except (ValueError, OSError) as e:
        cli.fail(e)
    if reason is not None:
        print(f"Invalid proof: {reason}")
        sys.exit(1)
    print("OK!")


def _verify_sector() -> None:
    from cuzk_jax.groth16 import sector, verifier
    from cuzk_jax.groth16.data_structures import VerifyingKey

    try:
        with open(FLAGS.vk, "rb") as fh:
            vk = VerifyingKey.from_bytes(fh.read())
        proofs, publics = sector.read_sector(FLAGS.proofs, FLAGS.public)
    except (ValueError, OSError) as e:
        cli.fail(e)
    results = verifier.verify_each(vk, publics, proofs)
    for i, ok in enumerate(results):
        print(f"partition {i}: {'OK' if ok else 'INVALID'}")
    if not all(results):
        print(f"{results.count(False)} of {len(results)} proofs are invalid")
        sys.exit(1)
    print(f"all {len(results)} proofs verified")


def main(argv):
    del argv
    if bool(FLAGS.proof) == bool(FLAGS.proofs):
        raise app.UsageError("give exactly one of --proofs (cuzk_jax sector file) and --proof (snarkjs proof.json)")
    (_verify_snarkjs if FLAGS.proof else _verify_sector)()


def run():
    cli.run(main)  # usage errors and malformed files: one error line, exit status 2


if __name__ == "__main__":
    run()
