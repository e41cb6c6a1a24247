"""Circuit-specific Groth16 setup (toxic waste from the OS CSPRNG) into the key cache or given paths.

  python3 scripts/setup.py --circuit=porep_like --preset=tiny     # or: cuzk-setup, python -m cuzk_jax setup

The key directory is checked (created, writable) before any work. Exit status: 0 ok, 2 bad usage or bad input
(one ``error:`` line on stderr).
"""

import os

from absl import flags

from cuzk_jax import cli

flags.DEFINE_string("circuit", "porep_like", "circuit name")
flags.DEFINE_string("preset", "", "circuit preset (default: the circuit's own, e.g. tiny for porep_like)")
cli.define_path("key_dir", "", "key directory (default: the key cache, ~/.cache/cuzk_jax/keys)")
flags.DEFINE_enum("setup_method", "auto", ["auto", "host", "device"], "setup implementation: device (every scalar and "
                  "point as device array programs), host (scalars as Python ints), auto (device on an accelerator, "
                  "host on CPU); the same key either way")
flags.DEFINE_enum("h_form", "", ["", "lagrange", "coefficients"], "form of a new key's H query: lagrange (the "
                  "default: the size-2n Lagrange basis at the odd points, one NTT fewer per proof) or coefficients "
                  "(bellman's tau^i Z(tau) / delta); empty: the default, and a cached key of either form is used")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS


def main(argv):
    del argv
    cli.use_cache_dir(FLAGS.cache_dir)
    from cuzk_jax import keycache
    from cuzk_jax.circuits import base

    cli.check_output_dir(FLAGS.key_dir or keycache.cache_dir(), "key_dir")  # before any work
    circuit = base.get_circuit(FLAGS.circuit, FLAGS.preset)
    r1cs = circuit.r1cs(cache=True)  # the compiled circuit file: synthesized once per shape, then loaded
    method = None if FLAGS.setup_method == "auto" else FLAGS.setup_method
    pk = keycache.load_or_setup(circuit, r1cs, directory=FLAGS.key_dir or None, progress=lambda m: print(m, flush=True),
                                method=method, h_form=FLAGS.h_form or None)
    path = keycache.key_path(circuit, r1cs, FLAGS.key_dir or None)
    print(f"proving key: {path} ({keycache.human_size(os.path.getsize(path))} on disk)\nverifying key: {path[:-3]}.vk\n"
          f"{r1cs.num_constraints} constraints, domain {pk.domain_size}, {pk.num_inputs} inputs, {pk.num_aux} private,"
          f" {pk.h_form} H query")


def run():
    cli.run(main)  # a ValueError (bad input) ends with one error line, exit status 2


if __name__ == "__main__":
    run()
