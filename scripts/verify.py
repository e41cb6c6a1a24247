"""Verify proofs written by scripts/prove.py against a verifying key.

  python3 scripts/verify.py --vk=~/.cache/cuzk_jax/keys/porep_like-tiny-XXXX.vk --proofs=proofs/sector-0.proofs \
      --public=proofs/sector-0.public.json
"""

from absl import app, flags

flags.DEFINE_string("vk", None, "verifying key file (.vk)")
flags.DEFINE_string("proofs", None, "proof file (192 bytes per partition)")
flags.DEFINE_string("public", None, "public-input JSON written by prove.py")
flags.mark_flags_as_required(["vk", "proofs", "public"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from cuzk_jax.groth16 import sector, verifier
    from cuzk_jax.groth16.data_structures import VerifyingKey

    with open(FLAGS.vk, "rb") as fh:
        vk = VerifyingKey.from_bytes(fh.read())
    proofs, publics = sector.read_sector(FLAGS.proofs, FLAGS.public)
    results = verifier.verify_each(vk, publics, proofs)
    for i, ok in enumerate(results):
        print(f"partition {i}: {'OK' if ok else 'INVALID'}")
    if not all(results):
        raise SystemExit(f"{results.count(False)} of {len(results)} proofs are invalid")
    print(f"all {len(results)} proofs verified")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
