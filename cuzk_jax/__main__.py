"""``python -m cuzk_jax {prove,setup,verify,bench,serve,client} [flags]`` (installed as ``cuzk-jax``): the same mains
as ``cuzk-prove`` etc.;
``serve`` runs the proving daemon, ``client`` talks to it (docs/service.md).

``python -m cuzk_jax <command> --help`` lists the command's flags.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {"prove": "prove sectors, or a circom circuit from snarkjs files",
            "setup": "circuit-specific Groth16 setup into the key cache",
            "verify": "verify cuzk_jax sector proofs or a snarkjs proof.json",
            "bench": "benchmarks (--op=field,curve,msm,ntt,h,engine,keyload,synth,snarkjs,kernel-compile,"
                     "check-msm,soak,kinds,sector,multigpu,setup,service)"}
# The daemon and its client (docs/service.md): ``serve`` is scripts/serve.py, ``client`` an argparse CLI.
SERVICE_COMMANDS = {"serve": "the proving daemon: gRPC API, priorities, job journal, metrics",
                    "client": "client of the daemon: submit, wait, poll, cancel, status, preload, evict, metrics"}


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv if argv is None else argv)
    every = {**COMMANDS, **SERVICE_COMMANDS}
    if len(argv) < 2 or argv[1] not in every:
        usage = "usage: python -m cuzk_jax {" + ",".join(every) + "} [flags]   (<command> --help for its flags)"
        if len(argv) >= 2 and argv[1] in ("-h", "--help", "help"):
            print(usage + "\n" + "\n".join(f"  {k:8s}{v}" for k, v in every.items()))
            sys.exit(0)
        what = f"unknown command {argv[1]!r}" if len(argv) >= 2 else "no command"
        print(f"error: {what}; {usage}", file=sys.stderr)
        sys.exit(2)
    command = argv[1]
    if command == "client":  # argparse, not absl: no flags of the scripts to share
        from cuzk_jax.service import client

        sys.exit(client.main(argv[2:]))
    module = importlib.import_module(f"cuzk_jax.scripts.{command}")
    sys.argv = [f"python -m cuzk_jax {command}", *argv[2:]]  # absl parses sys.argv; error hints name the command
    module.run()


if __name__ == "__main__":
    main()
