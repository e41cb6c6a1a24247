"""Groth16 verification of snarkjs-format proofs (BLS12-381), with the pairing computed by py_arkworks_bls12381.

Follows snarkjs 0.7.6 ``groth16_verify.js`` (Groth 2016, eprint 2016/260, section 3.2):

    cpub = IC[0] + sum_i public[i] * IC[i+1]
    e(-pi_a, pi_b) * e(cpub, gamma2) * e(pi_c, delta2) * e(alpha1, beta2) == 1

checked as one multi-pairing (``GT.pairing_check``). Like snarkjs it rejects public values ``>= r`` and proof
points off the curve; in addition it rejects proof points outside the prime-order subgroups (arkworks'
checked decoding), which snarkjs does not test.
"""

from __future__ import annotations

from typing import Sequence

from cuzk_jax.errors import BadInput, FormatError
from cuzk_jax.reference import constants as C

from . import jsonio
from .jsonio import Proof, VerificationKey
from .points import g1_on_curve, g1_to_ark, g2_on_curve, g2_to_ark, ark_module


def verification_key_from_zkey(zkey) -> VerificationKey:
    """The verification key snarkjs's ``zkey export verificationkey`` writes, including ``vk_alphabeta_12``."""
    alphabeta = _alphabeta(ark_module(), zkey.alpha1, zkey.beta2)
    return VerificationKey(zkey.n_public, zkey.alpha1, zkey.beta2, zkey.gamma2, zkey.delta2, zkey.ic_ints(),
                           alphabeta)


def _alphabeta(ark, alpha1, beta2) -> tuple[int, ...]:
    gt = ark.GT.pairing(g1_to_ark(alpha1), g2_to_ark(beta2))
    raw = bytes.fromhex(str(gt))  # 12 Fq coefficients, 48 bytes LE each, in snarkjs's (c0, c1, c2) x (c0, c1) order
    return tuple(int.from_bytes(raw[48 * i:48 * (i + 1)], "little") for i in range(12))


def check_vk(vk: VerificationKey) -> None:
    """Refuse an unusable verification key with :class:`~cuzk_jax.errors.FormatError` naming the point:
    the point at infinity as alpha, beta, gamma, delta or any IC point (a degenerate pairing equation; no setup
    produces one), a point off its curve or outside the prime-order subgroup (arkworks' checked decoding), an IC
    list whose length is not ``nPublic + 1``, and a ``vk_alphabeta_12`` that is not ``e(alpha1, beta2)``.
    The result is remembered on the key object, so verifying many proofs checks the key once."""
    if vk.__dict__.get("_checked"):
        return
    if len(vk.ic) != vk.n_public + 1:
        raise FormatError(f"verification key: {len(vk.ic)} IC points for nPublic = {vk.n_public}")
    pts = [("vk_alpha_1", vk.alpha1, g1_on_curve, g1_to_ark), ("vk_beta_2", vk.beta2, g2_on_curve, g2_to_ark),
           ("vk_gamma_2", vk.gamma2, g2_on_curve, g2_to_ark), ("vk_delta_2", vk.delta2, g2_on_curve, g2_to_ark)] + \
        [(f"IC[{i}]", p, g1_on_curve, g1_to_ark) for i, p in enumerate(vk.ic)]
    for name, p, on_curve, to_ark in pts:
        if p is None:
            raise FormatError(f"verification key: {name} is the point at infinity")
        if not on_curve(p):
            raise FormatError(f"verification key: {name} is not on the curve")
        try:
            to_ark(p, checked=True)
        except Exception:  # arkworks raises on a point outside the subgroup
            raise FormatError(f"verification key: {name} is not in the prime-order subgroup") from None
    if vk.alphabeta is not None and tuple(vk.alphabeta) != _alphabeta(ark_module(), vk.alpha1, vk.beta2):
        raise FormatError("verification key: vk_alphabeta_12 is not e(vk_alpha_1, vk_beta_2)")
    object.__setattr__(vk, "_checked", True)


def check(vk: VerificationKey, public: Sequence[int], proof: Proof) -> str | None:
    """``None`` if the proof verifies, else the reason it is rejected.

    Raises ``ValueError`` if the public-signal count does not match the key, and
    :class:`~cuzk_jax.errors.FormatError` if the key itself is unusable (:func:`check_vk`): a bad key or a usage
    error, not a bad proof.
    """
    ark = ark_module()
    if len(public) != vk.n_public:
        raise BadInput(f"public.json has {len(public)} signals, the verification key expects {vk.n_public}")
    check_vk(vk)
    for i, v in enumerate(public):
        if isinstance(v, bool) or not isinstance(v, int):
            raise BadInput(f"public signal {i} is not an int: {v!r:.40}")
        if not 0 <= v < C.R:
            return f"public signal {i} is not below the scalar-field order r"
    for name, p, on_curve, to_ark in (("pi_a", proof.a, g1_on_curve, g1_to_ark),
                                      ("pi_b", proof.b, g2_on_curve, g2_to_ark),
                                      ("pi_c", proof.c, g1_on_curve, g1_to_ark)):
        if not on_curve(p):
            return f"{name} is not on the curve"
        try:
            to_ark(p, checked=True)
        except Exception:  # arkworks raises on subgroup failure
            return f"{name} is not in the prime-order subgroup"
    pts = [g1_to_ark(p, checked=False) for p in vk.ic]
    cpub = pts[0]
    if public:
        cpub = cpub + ark.G1Point.multiexp_unchecked(pts[1:], [ark.Scalar(v) for v in public])
    ok = ark.GT.pairing_check(
        [-g1_to_ark(proof.a), cpub, g1_to_ark(proof.c), g1_to_ark(vk.alpha1)],
        [g2_to_ark(proof.b), g2_to_ark(vk.gamma2), g2_to_ark(vk.delta2), g2_to_ark(vk.beta2)])
    return None if ok else "pairing check failed"


def verify(vk, public, proof) -> bool:
    """Verify; each argument is a parsed object or anything :mod:`.jsonio` reads (path, JSON text, dict/list)."""
    vk = vk if isinstance(vk, VerificationKey) else jsonio.read_vk(vk)
    public = list(public) if _is_ints(public) else jsonio.read_public(public)
    proof = proof if isinstance(proof, Proof) else jsonio.read_proof(proof)
    return check(vk, public, proof) is None


def _is_ints(x) -> bool:
    return isinstance(x, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in x)
