"""Groth16 verification through py_arkworks_bls12381 (code we did not write checks the proofs we make).

Single proof (Groth 2016, section 3.2):
    e(A, B) = e(alpha, beta) * e(IC(x), gamma) * e(C, delta),  IC(x) = ic[0] + sum_i x_i ic[i+1]
checked as one multi-pairing ``e(A, B) e(-alpha, beta) e(-IC(x), gamma) e(-C, delta) == 1``.

Batch (the standard random-linear-combination batch check, e.g. bellman ``verify_proofs_batch``): with random
128-bit ``rho_k`` from the OS CSPRNG,
    prod_k e(rho_k A_k, B_k) * e(-(sum rho_k) alpha, beta) * e(-sum rho_k IC(x_k), gamma) * e(-sum rho_k C_k, delta) == 1
-- K + 3 pairings instead of 4K. A false batch result says "some proof is bad"; :func:`verify_each` says which.
"""

from __future__ import annotations

import secrets
from typing import Sequence

from cuzk_jax.encoding import parse_field_element
from cuzk_jax.errors import BadInput
from cuzk_jax.reference.constants import R

from .data_structures import Proof, VerifyingKey


def _ark():
    try:
        import py_arkworks_bls12381 as ark
    except ImportError as e:  # pragma: no cover - exercised only without the dependency
        raise ImportError("Groth16 verification needs py-arkworks-bls12381 (pip install py-arkworks-bls12381)") from e
    return ark


def _scalar(ark, v: int):
    return ark.Scalar.from_le_bytes((v % R).to_bytes(32, "little"))


def _check_inputs(vk: VerifyingKey, public_inputs: Sequence[int]) -> list[int]:
    """Public inputs as canonical ints; BadInput (a ValueError) for a wrong count or any value that is not an int
    (or canonical decimal string) in [0, r): no floats, booleans or values >= r (never reduced silently)."""
    if isinstance(public_inputs, (str, bytes)) or not hasattr(public_inputs, "__len__"):
        raise BadInput(f"public inputs must be a sequence of ints, got {type(public_inputs).__name__}")
    if len(public_inputs) != len(vk.ic) - 1:
        raise BadInput(f"expected {len(vk.ic) - 1} public inputs, got {len(public_inputs)}")
    return [parse_field_element(x, f"public input {i}", error=BadInput) for i, x in enumerate(public_inputs)]


def _ic_combination(ark, vk_ark, weights):
    """``sum_j weights[j] ic[j]`` (``weights[0]`` for ``ic[0]``, the constant one's point) as one arkworks
    multi-exponentiation: a WindowPoSt partition has ~26k public inputs, and a point-by-point sum in Python took
    seconds. The ic points come from the verifying key, already checked on load (hence ``_unchecked``)."""
    return ark.G1Point.multiexp_unchecked(vk_ark["ic"], [_scalar(ark, w) for w in weights])


def verify(vk: VerifyingKey, public_inputs: Sequence[int], proof: Proof) -> bool:
    """True iff ``proof`` is valid for ``public_inputs`` (canonical ints, without the leading 1) under ``vk``."""
    ark = _ark()
    xs = _check_inputs(vk, public_inputs)
    v = vk.arkworks()
    try:
        a, b, c = proof.arkworks()
    except ValueError:
        return False  # not valid curve points in the subgroup: not a valid proof
    ic = _ic_combination(ark, v, [1, *xs])
    return bool(ark.GT.pairing_check([a, -v["alpha_g1"], -ic, -c], [b, v["beta_g2"], v["gamma_g2"], v["delta_g2"]]))


def verify_batch(vk: VerifyingKey, public_inputs: Sequence[Sequence[int]], proofs: Sequence[Proof]) -> bool:
    """True iff every proof verifies (probabilistic batch check, soundness error about 2^-128)."""
    ark = _ark()
    if len(public_inputs) != len(proofs):
        raise ValueError(f"{len(proofs)} proofs but {len(public_inputs)} public-input vectors")
    if not proofs:
        return True
    v = vk.arkworks()
    g1s, g2s = [], []
    # the public-input terms of all proofs fold into one multi-exponentiation: sum_p rho_p IC(x_p) has the
    # weight sum_p rho_p x_(p,j) on ic[j]
    weights = [0] * len(vk.ic)
    c_acc = None
    for xs, proof in zip(public_inputs, proofs):
        xs = _check_inputs(vk, xs)
        try:
            a, b, c = proof.arkworks()
        except ValueError:
            return False
        rho = secrets.randbits(128) | 1
        g1s.append(a * _scalar(ark, rho))
        g2s.append(b)
        weights[0] += rho
        for j, x in enumerate(xs, 1):
            weights[j] = (weights[j] + rho * x) % R
        cw = c * _scalar(ark, rho)
        c_acc = cw if c_acc is None else c_acc + cw
    alpha_w = weights[0]
    ic_acc = _ic_combination(ark, v, weights)
    g1s += [-(v["alpha_g1"] * _scalar(ark, alpha_w)), -ic_acc, -c_acc]
    g2s += [v["beta_g2"], v["gamma_g2"], v["delta_g2"]]
    return bool(ark.GT.pairing_check(g1s, g2s))


def verify_each(vk: VerifyingKey, public_inputs: Sequence[Sequence[int]], proofs: Sequence[Proof]) -> list[bool]:
    if len(public_inputs) != len(proofs):
        raise ValueError(f"{len(proofs)} proofs but {len(public_inputs)} public-input vectors")
    return [verify(vk, xs, p) for xs, p in zip(public_inputs, proofs)]
