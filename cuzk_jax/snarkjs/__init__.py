"""circom / snarkjs interoperability (BLS12-381): read circom and snarkjs files, prove with cuzk_jax, write
proofs that ``snarkjs groth16 verify`` accepts, and verify snarkjs proofs.

Typical use::

    from cuzk_jax import snarkjs
    zkey = snarkjs.read_zkey("circuit.zkey")             # snarkjs groth16 setup / zkey contribute output
    res = snarkjs.prove(zkey, snarkjs.read_wtns("witness.wtns"), backend="device")
    snarkjs.write_proof("proof.json", res.proof); snarkjs.write_public("public.json", res.public)
    snarkjs.verify("verification_key.json", "public.json", "proof.json")   # -> True

Modules: :mod:`.binfile` (the iden3 container), :mod:`.r1cs`, :mod:`.wtns`, :mod:`.zkey` (readers, all
refusing other curves and truncated/corrupt files with :class:`FormatError`, a ValueError), :mod:`.points`
(zkey point form = ops Montgomery limbs; host ints; py_arkworks), :mod:`.jsonio` (proof.json, public.json,
verification_key.json), :mod:`.prover` (snarkjs's Groth16 equations; host oracle backend), :mod:`.device` (XLA
backend), :mod:`.verifier` (pairing via py_arkworks), :mod:`.toolchain` (running circom2/snarkjs, cached
set-up), :mod:`.dev_setup` (INSECURE known-tau zkeys for benchmarks), :mod:`.export` (native cuzk_jax keys and
proofs -> verification_key.json / proof.json / public.json; loaded on first access).
Format facts are checked against snarkjs 0.7.6 / circom2 0.2.23 sources (see each module's docstring).
"""

import importlib

from .binfile import FormatError
from .jsonio import Proof, VerificationKey, read_proof, read_public, read_vk, write_proof, write_public, write_vk
from .prover import ProveResult, prove, prove_files
from .r1cs import R1cs, read_r1cs
from .verifier import check, verification_key_from_zkey, verify
from .wtns import read_wtns, write_wtns
from .zkey import Zkey, read_zkey

__all__ = [
    "FormatError", "Proof", "ProveResult", "R1cs", "VerificationKey", "Zkey", "check", "prove", "prove_files",
    "read_proof", "read_public", "read_r1cs", "read_vk", "read_wtns", "read_zkey", "verification_key_from_zkey",
    "verify", "write_proof", "write_public", "write_vk", "write_wtns", "export",
]

_LAZY_SUBMODULES = ("export", "device", "dev_setup", "toolchain")


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f".{name}", __name__)  # also binds the submodule on this package
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
