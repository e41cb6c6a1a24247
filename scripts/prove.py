"""Prove sectors of a circuit (all partitions of a sector in one device batch) and verify the proofs.

  python3 scripts/prove.py --circuit=porep_like --preset=tiny --partitions=10 --sectors=1 --out=proofs/

Keys come from the key cache (setup on first use). Prints per-phase timing per sector; writes
``sector-<k>.proofs`` (192 bytes per partition) and ``sector-<k>.public.json`` under --out.
"""

import json
import os

from absl import app, flags

flags.DEFINE_string("circuit", "porep_like", "circuit name (cube, merkle_inclusion, porep_like)")
flags.DEFINE_string("preset", "tiny", "circuit preset")
flags.DEFINE_integer("partitions", 10, "partitions per sector (proved in one batch)")
flags.DEFINE_integer("sectors", 1, "number of sectors to prove")
flags.DEFINE_integer("first_sector", 0, "seed/index of the first sector")
flags.DEFINE_string("out", "proofs", "output directory for proofs and public inputs ('' = do not write)")
flags.DEFINE_string("key_dir", "", "proving-key cache directory (default ~/.cache/cuzk_jax/keys)")
flags.DEFINE_bool("verify", True, "verify every proof (pairing check through py_arkworks_bls12381)")
flags.DEFINE_string("msm_impl", "", "MSM implementation override (xla, pallas)")
flags.DEFINE_string("timings_json", "", "write per-sector timings to this JSON file")
flags.DEFINE_string("cache_dir", os.path.join(os.path.expanduser("~"), ".cache", "cuzk_jax", "xla"),
                    "persistent XLA compilation cache ('' to disable)")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    import jax

    from cuzk_jax import keycache
    from cuzk_jax.circuits import base
    from cuzk_jax.groth16 import sector

    if FLAGS.cache_dir:
        jax.config.update("jax_compilation_cache_dir", FLAGS.cache_dir)
    circuit = base.get_circuit(FLAGS.circuit, FLAGS.preset)
    print(f"circuit {circuit}: synthesizing structure ...", flush=True)
    r1cs = circuit.r1cs()
    print(f"  {r1cs.num_constraints} constraints, {r1cs.num_public} public inputs, {r1cs.num_aux} private", flush=True)
    pk = keycache.load_or_setup(circuit, r1cs, directory=FLAGS.key_dir or None, progress=lambda m: print(m, flush=True))
    rows, ok_all = [], True
    for k in range(FLAGS.first_sector, FLAGS.first_sector + FLAGS.sectors):
        print(f"sector {k}: proving {FLAGS.partitions} partitions ...", flush=True)
        res = sector.prove_sector(circuit, pk, FLAGS.partitions, k, verify=FLAGS.verify, msm_impl=FLAGS.msm_impl or None)
        if FLAGS.out:
            paths = sector.write_sector(FLAGS.out, circuit, res)
            print(f"  wrote {paths[0]} ({len(res.proof_bytes())} bytes) and {paths[1]}")
        print("  " + "  ".join(f"{name} {sec * 1e3:.1f}ms" for name, sec in res.timings.phases.items()))
        print(f"  total {res.timings.total:.3f}s" + ("" if res.verified is None else
                                                      f"; verified: {'OK' if res.verified else 'FAILED'}"), flush=True)
        ok_all &= res.verified is not False
        rows.append({"sector": k, **res.timings.as_dict(), "synthesis": res.synthesis_s, "verified": res.verified})
    if FLAGS.timings_json:
        with open(FLAGS.timings_json, "w") as fh:
            json.dump({"circuit": FLAGS.circuit, "preset": FLAGS.preset, "partitions": FLAGS.partitions,
                       "constraints": r1cs.num_constraints, "domain": pk.domain_size, "sectors": rows}, fh, indent=1)
    if not ok_all:
        raise SystemExit("some proofs did not verify")
    print(f"{FLAGS.sectors} sector(s) x {FLAGS.partitions} partitions proved" + (" and verified" if FLAGS.verify else ""))


def run():
    app.run(main)


if __name__ == "__main__":
    run()
