"""Verify Groth16 proofs: cuzk_jax's sector files, or a snarkjs proof.json.

  python3 scripts/verify.py --vk=~/.cache/cuzk_jax/keys/porep_like-tiny-XXXX.vk --public=proofs/sector-0.public.json
      --proofs=proofs/sector-0.proofs
  python3 scripts/verify.py --vk=verification_key.json --public=public.json --proof=proof.json   # snarkjs files

Sector mode (``--proofs``): ``--vk`` is a cuzk_jax ``.vk`` file, ``--public`` the JSON prove.py wrote; every
partition is reported, exit status 1 if any proof is invalid. snarkjs mode (``--proof``): ``--vk`` is snarkjs's
``verification_key.json``; prints "OK!" (exit 0) or the reason (exit 1). Pairings by py_arkworks_bls12381 in both
modes.

Exit status: 0 every proof verified; 1 a proof did not verify; 2 bad usage or a malformed / unreadable input file
(a public input >= r, a float, null, deeply nested JSON, a truncated proof file, ...): one ``error:`` line on
stderr naming the file, never a traceback.
"""

import sys

from absl import app, flags

from cuzk_jax.errors import CuzkError

from cuzk_jax import cli

cli.define_path("vk", None, "verifying key: cuzk_jax .vk file, or snarkjs verification_key.json with --proof")
cli.define_path("proofs", None, "cuzk_jax proof file (192 bytes per partition)")
cli.define_path("proof", None, "snarkjs proof.json (instead of --proofs)")
cli.define_path("public", None, "public inputs: prove.py's sector JSON, or snarkjs public.json with --proof")
flags.mark_flags_as_required(["vk", "public"])
FLAGS = flags.FLAGS

# What reading a malformed or hostile file may raise besides the parsers' own FormatError: all mean "bad input"
# (exit 2), whichever parser let them through.
MALFORMED = (CuzkError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError, OverflowError,
             UnicodeError, MemoryError, OSError)


def _read(what: str, path: str, reader):
    """``reader(path)``, any malformed-input exception turned into one error line naming the file, exit 2."""
    try:
        return reader(path)
    except MALFORMED as e:
        if isinstance(e, CuzkError):  # the parsers' own errors name the file and the field
            cli.fail(e)
        if isinstance(e, ValueError) and not isinstance(e, UnicodeError):
            cli.fail(e if str(path) in str(e) else f"{path}: {e}")
        if isinstance(e, OSError):
            cli.fail(f"{path}: cannot read file ({e.strerror or e})")
        detail = "nested too deeply" if isinstance(e, RecursionError) else f"{type(e).__name__}: {e}"
        cli.fail(f"{path}: malformed {what} ({detail})")


def _verify_snarkjs() -> None:
    from cuzk_jax.snarkjs import jsonio, verifier

    vk = _read("verification key", FLAGS.vk, jsonio.read_vk)
    public = _read("public inputs", FLAGS.public, jsonio.read_public)
    proof = _read("proof", FLAGS.proof, jsonio.read_proof)
    try:
        reason = verifier.check(vk, public, proof)
    except MALFORMED as e:  # e.g. the number of public inputs does not match the key: bad input, not a bad proof
        cli.fail(f"{FLAGS.public}: {e}")
    if reason is not None:
        print(f"Invalid proof: {reason}")
        sys.exit(1)
    print("OK!")


def _verify_sector() -> None:
    from cuzk_jax.groth16 import sector, verifier
    from cuzk_jax.groth16.data_structures import VerifyingKey

    def read_vk(path):
        with open(path, "rb") as fh:
            return VerifyingKey.from_bytes(fh.read())

    vk = _read("verifying key", FLAGS.vk, read_vk)
    proofs, publics = _read("proof or public-input file", FLAGS.proofs,
                            lambda path: sector.read_sector(path, FLAGS.public))
    try:
        results = verifier.verify_each(vk, publics, proofs)
    except MALFORMED as e:  # e.g. a public input >= r, or too few of them for the key: bad input
        cli.fail(f"{FLAGS.public}: {e}")
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
