"""Export native keys and proofs (:mod:`cuzk_jax.groth16`) to snarkjs's JSON files, so that
``snarkjs groth16 verify verification_key.json public.json proof.json`` accepts a proof made by
:func:`cuzk_jax.groth16.prover.prove` (or the engine) for a native circuit.

* :func:`verification_key` -- native :class:`~cuzk_jax.groth16.data_structures.VerifyingKey` -> snarkjs
  :class:`~cuzk_jax.snarkjs.jsonio.VerificationKey`, with ``vk_alphabeta_12 = e(alpha1, beta2)`` computed by the
  arkworks pairing in snarkjs's coefficient order (as ``snarkjs zkey export verificationkey`` writes it);
* :func:`proof` -- native :class:`~cuzk_jax.groth16.data_structures.Proof` -> snarkjs ``Proof``;
* :func:`write_verification_key`, :func:`write_proof`, :func:`write_public` -- the three files (through
  :mod:`.jsonio`'s writers); :func:`export` writes all three into a folder.

Conventions, checked (``tests/test_snarkjs_export.py`` has snarkjs verify the exported files):

* Both sides use affine points over the same curves and generators with canonical coordinates (not Montgomery);
  G2 coordinates are ``(c0, c1)`` of ``c0 + c1 u`` on both sides; infinity is ``None``.
* bellman/arkworks's ``ic`` and snarkjs's ``IC`` are the same list: ``IC[0]`` is the coefficient point of the
  constant ``one`` variable and ``IC[i]`` that of public input ``i`` in order, and both verifiers form
  ``IC[0] + sum_i x_i IC[i]`` (snarkjs ``groth16_verify.js``; :mod:`cuzk_jax.groth16.verifier`); ``nPublic`` is
  ``len(ic) - 1``.
* Both check ``e(A, B) = e(alpha, beta) e(IC(x), gamma) e(C, delta)`` with the same roles of A, B, C, so a proof
  needs no transformation; ``public.json`` is the witness's public inputs without the leading one
  (``Witness.public_inputs``).
"""

from __future__ import annotations

import os
from typing import Sequence

from cuzk_jax.errors import BadInput
from cuzk_jax.groth16 import data_structures as ds
from cuzk_jax.reference.constants import R

from . import jsonio
from .points import ark_module, g1_to_ark, g2_to_ark

__all__ = ["alphabeta", "export", "proof", "verification_key", "write_proof", "write_public",
           "write_verification_key"]


def alphabeta(alpha1, beta2) -> tuple[int, ...]:
    """``e(alpha1, beta2)`` as 12 canonical Fq ints in snarkjs's ``vk_alphabeta_12`` order ((c0, c1, c2) of Fq6 x
    (c0, c1) of Fq2, flattened as :func:`jsonio.vk_to_json` expects) -- the order of py_arkworks's GT bytes."""
    gt = ark_module().GT.pairing(g1_to_ark(alpha1), g2_to_ark(beta2))
    raw = bytes.fromhex(str(gt))
    return tuple(int.from_bytes(raw[48 * i:48 * (i + 1)], "little") for i in range(12))


def verification_key(vk: ds.VerifyingKey) -> jsonio.VerificationKey:
    """The snarkjs form of a native verifying key (``vk_alphabeta_12`` included)."""
    if not isinstance(vk, ds.VerifyingKey):
        raise BadInput(f"verification_key: expected a cuzk_jax.groth16 VerifyingKey, got {type(vk).__name__}")
    if not vk.ic:
        raise BadInput("verification_key: the key has no IC points")
    return jsonio.VerificationKey(n_public=len(vk.ic) - 1, alpha1=vk.alpha_g1, beta2=vk.beta_g2,
                                  gamma2=vk.gamma_g2, delta2=vk.delta_g2, ic=list(vk.ic),
                                  alphabeta=alphabeta(vk.alpha_g1, vk.beta_g2))


def proof(p: ds.Proof) -> jsonio.Proof:
    """The snarkjs form of a native proof (the same three points)."""
    if not isinstance(p, ds.Proof):
        raise BadInput(f"proof: expected a cuzk_jax.groth16 Proof, got {type(p).__name__}")
    return jsonio.Proof(a=p.a, b=p.b, c=p.c)


def _public(public_inputs: Sequence[int]) -> list[int]:
    out = []
    for i, v in enumerate(public_inputs):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < R:
            raise BadInput(f"public input {i}: expected an int in [0, r), got {v!r}")
        out.append(v)
    return out


def write_verification_key(path, vk: ds.VerifyingKey) -> None:
    """``verification_key.json`` for ``vk``."""
    jsonio.write_vk(path, verification_key(vk))


def write_proof(path, p: ds.Proof) -> None:
    """``proof.json`` for ``p``."""
    jsonio.write_proof(path, proof(p))


def write_public(path, public_inputs: Sequence[int]) -> None:
    """``public.json``: the public inputs (``Witness.public_inputs``: without the leading one), as decimal strings."""
    jsonio.write_public(path, _public(public_inputs))


def export(directory, vk: ds.VerifyingKey, p: ds.Proof, public_inputs: Sequence[int]) -> dict[str, str]:
    """Write ``verification_key.json``, ``proof.json`` and ``public.json`` into ``directory`` (created if
    missing); returns their paths by name (``vk``, ``proof``, ``public``)."""
    if len(public_inputs) != len(vk.ic) - 1:
        raise BadInput(f"export: {len(public_inputs)} public inputs for a key with {len(vk.ic) - 1}")
    os.makedirs(directory, exist_ok=True)
    paths = {"vk": os.path.join(directory, "verification_key.json"),
             "proof": os.path.join(directory, "proof.json"),
             "public": os.path.join(directory, "public.json")}
    write_verification_key(paths["vk"], vk)
    write_proof(paths["proof"], p)
    write_public(paths["public"], public_inputs)
    return paths
