"""snarkjs's JSON files for Groth16 over BLS12-381: ``proof.json``, ``public.json``, ``verification_key.json``.

Layout (snarkjs 0.7.6 ``groth16_prove.js`` / ``zkey_export_verificationkey.js``, ffjavascript ``toObject``):
numbers are decimal strings; points are written projectively with ``z = 1`` (``[x, y, "1"]``; G2
``[[x.c0, x.c1], [y.c0, y.c1], ["1", "0"]]``) and the point at infinity as ``["0", "1", "0"]`` (G2:
``[["0","0"], ["1","0"], ["0","0"]]``). On reading we also accept Jacobian coordinates with any nonzero z
(``x = X/Z^2``, ``y = Y/Z^3``, as ffjavascript's ``fromObject``) and 2-element affine lists.

* ``proof.json``: ``pi_a`` (G1), ``pi_b`` (G2), ``pi_c`` (G1), ``protocol: "groth16"``, ``curve: "bls12381"``.
* ``public.json``: the public signals ``w[1..nPublic]`` (outputs first, then public inputs).
* ``verification_key.json``: ``protocol``, ``curve``, ``nPublic``, ``vk_alpha_1``, ``vk_beta_2``, ``vk_gamma_2``,
  ``vk_delta_2``, ``vk_alphabeta_12`` (``e(alpha1, beta2)`` in Fq12 = Fq6[w]/(w^2 - v), Fq6 = Fq2[v]/(v^3 - (1+u)),
  as ``[c0, c1]`` of ``[c0, c1, c2]`` of ``[c0, c1]`` decimal strings -- the same coefficient order as
  py_arkworks_bls12381's GT bytes), ``IC`` (nPublic + 1 G1 points).

Malformed files (missing keys, non-decimal numbers, values out of range, wrong shapes, another protocol or curve,
JSON nested too deeply) raise :class:`~cuzk_jax.errors.FormatError` (a ``ValueError``) naming the file and the
field. Numbers go through :func:`cuzk_jax.encoding.parse_field_element` (decimal strings or JSON integers of
canonical elements; public signals must be below r). Points are *not* checked against the curve here: that is the
verifier's job (an off-curve proof point is an invalid proof, not a malformed file).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Sequence

from cuzk_jax.encoding import parse_field_element
from cuzk_jax.errors import FormatError
from cuzk_jax.fileio import atomic_write, load_json
from cuzk_jax.reference import constants as C
from cuzk_jax.reference.field import fq, fq2

from .points import G1Affine, G2Affine

Q = C.P


@dataclass(frozen=True)
class Proof:
    """A Groth16 proof in host form (canonical affine ints; ``None`` is the point at infinity)."""

    a: G1Affine
    b: G2Affine
    c: G1Affine


@dataclass(frozen=True)
class VerificationKey:
    """snarkjs Groth16 verification key. ``alphabeta`` is e(alpha1, beta2) as 12 Fq ints (or None if absent)."""

    n_public: int
    alpha1: G1Affine
    beta2: G2Affine
    gamma2: G2Affine
    delta2: G2Affine
    ic: list[G1Affine]
    alphabeta: tuple[int, ...] | None = None


# ------------------------------------------------------------------------------------------------------------
# Encoding helpers
# ------------------------------------------------------------------------------------------------------------


def _dec(v: int) -> str:
    return str(int(v))


def g1_to_json(p: G1Affine) -> list[str]:
    return ["0", "1", "0"] if p is None else [_dec(p[0]), _dec(p[1]), "1"]


def g2_to_json(p: G2Affine) -> list[list[str]]:
    if p is None:
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    return [[_dec(p[0][0]), _dec(p[0][1])], [_dec(p[1][0]), _dec(p[1][1])], ["1", "0"]]


class _Ctx:
    """Error context: every ValueError names the file and the JSON path of the bad value."""

    def __init__(self, name: str):
        self.name = name

    def err(self, where: str, msg: str) -> FormatError:
        return FormatError(f"{self.name}: {where}: {msg}")

    def num(self, v: Any, where: str, field: str) -> int:
        """A canonical element of ``field`` ("fq" / "fr"): a decimal string or a JSON integer (one shared rule,
        :func:`cuzk_jax.encoding.parse_field_element`: no floats, booleans, signs, underscores or spaces)."""
        return parse_field_element(v, f"{self.name}: {where}", field=field, error=FormatError)

    def seq(self, v: Any, where: str, lengths: Sequence[int]) -> list:
        if not isinstance(v, list) or len(v) not in lengths:
            raise self.err(where, f"expected a list of {' or '.join(map(str, lengths))} elements, got {v!r:.80}")
        return v

    def fq2(self, v: Any, where: str):
        a = self.seq(v, where, (2,))
        return (self.num(a[0], where + "[0]", "fq"), self.num(a[1], where + "[1]", "fq"))

    def g1(self, v: Any, where: str) -> G1Affine:
        a = self.seq(v, where, (2, 3))
        x, y = self.num(a[0], where + "[0]", "fq"), self.num(a[1], where + "[1]", "fq")
        z = self.num(a[2], where + "[2]", "fq") if len(a) == 3 else 1
        if z == 0:
            return None
        if z == 1:
            return (x, y)
        zi = fq.inv(z)
        return (x * zi * zi % Q, y * zi * zi * zi % Q)

    def g2(self, v: Any, where: str) -> G2Affine:
        a = self.seq(v, where, (2, 3))
        x, y = self.fq2(a[0], where + "[0]"), self.fq2(a[1], where + "[1]")
        z = self.fq2(a[2], where + "[2]") if len(a) == 3 else (1, 0)
        if z == (0, 0):
            return None
        if z == (1, 0):
            return (x, y)
        zi = fq2.inv(z)
        zi2 = fq2.square(zi)
        return (fq2.mul(x, zi2), fq2.mul(y, fq2.mul(zi2, zi)))

    def key(self, obj: dict, k: str):
        if not isinstance(obj, dict):
            raise FormatError(f"{self.name}: expected a JSON object, got {type(obj).__name__}")
        if k not in obj:
            raise FormatError(f"{self.name}: missing key {k!r}")
        return obj[k]

    def check_tag(self, obj: dict, key: str, want: str, required: bool = True):
        if key not in obj and not required:
            return
        v = self.key(obj, key)
        if not isinstance(v, str) or v.lower() != want:
            raise self.err(key, f"is {v!r}; cuzk_jax handles {want!r} only")


def _load(source) -> tuple[str, Any]:
    """``source``: a path, a JSON string/bytes, or an already-parsed object."""
    if isinstance(source, (dict, list)):
        return "<json>", source
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not source.lstrip().startswith(("{", "["))):
        path = os.fspath(source)
        try:
            with open(path) as fh:
                text = fh.read()
        except OSError as e:
            raise FormatError(f"{path}: cannot read file ({e.strerror or e})") from None
        except UnicodeDecodeError as e:
            raise FormatError(f"{path}: not valid JSON (not UTF-8 text: {e.reason})") from None
        except ValueError as e:  # a path with a NUL byte
            raise FormatError(f"{path[:80]!r}: cannot read file ({e})") from None
        name = path
    elif isinstance(source, (str, bytes, bytearray)):
        text, name = source, "<json>"
    else:
        raise FormatError(f"expected a path, JSON text or parsed JSON, got {type(source).__name__}")
    return name, load_json(text, name, FormatError)  # depth-bounded: hostile nesting cannot crash the process


def _dump(path, obj) -> None:
    """Write JSON atomically (:func:`cuzk_jax.fileio.atomic_write`), as snarkjs does: ``JSON.stringify(obj, null,
    1)``."""
    atomic_write(path, json.dumps(obj, indent=1))


# ------------------------------------------------------------------------------------------------------------
# proof.json
# ------------------------------------------------------------------------------------------------------------


def proof_to_json(proof: Proof) -> dict:
    return {"pi_a": g1_to_json(proof.a), "pi_b": g2_to_json(proof.b), "pi_c": g1_to_json(proof.c),
            "protocol": "groth16", "curve": "bls12381"}


def read_proof(source) -> Proof:
    name, obj = _load(source)
    ctx = _Ctx(name)
    ctx.check_tag(obj, "protocol", "groth16")
    ctx.check_tag(obj, "curve", "bls12381", required=False)
    return Proof(ctx.g1(ctx.key(obj, "pi_a"), "pi_a"), ctx.g2(ctx.key(obj, "pi_b"), "pi_b"),
                 ctx.g1(ctx.key(obj, "pi_c"), "pi_c"))


def write_proof(path, proof: Proof) -> None:
    _dump(path, proof_to_json(proof))


# ------------------------------------------------------------------------------------------------------------
# public.json
# ------------------------------------------------------------------------------------------------------------


def public_to_json(public: Sequence[int]) -> list[str]:
    return [_dec(v) for v in public]


def read_public(source) -> list[int]:
    """Public signals as ints: canonical decimal strings (or JSON integers) of field elements in ``[0, r)``.
    Anything else -- a float, a boolean, ``"3_5"``, a value ``>= r`` -- is a malformed file
    (:class:`~cuzk_jax.errors.FormatError` naming the index), a usage error rather than an invalid proof."""
    name, obj = _load(source)
    ctx = _Ctx(name)
    if not isinstance(obj, list):
        raise FormatError(f"{name}: expected a JSON list of decimal strings")
    return [ctx.num(v, f"[{i}]", "fr") for i, v in enumerate(obj)]


def write_public(path, public: Sequence[int]) -> None:
    _dump(path, public_to_json(public))


# ------------------------------------------------------------------------------------------------------------
# verification_key.json
# ------------------------------------------------------------------------------------------------------------


def vk_to_json(vk: VerificationKey) -> dict:
    out = {"protocol": "groth16", "curve": "bls12381", "nPublic": vk.n_public,
           "vk_alpha_1": g1_to_json(vk.alpha1), "vk_beta_2": g2_to_json(vk.beta2),
           "vk_gamma_2": g2_to_json(vk.gamma2), "vk_delta_2": g2_to_json(vk.delta2)}
    if vk.alphabeta is not None:
        ab = [_dec(v) for v in vk.alphabeta]
        out["vk_alphabeta_12"] = [[ab[6 * i + 2 * j:6 * i + 2 * j + 2] for j in range(3)] for i in range(2)]
    out["IC"] = [g1_to_json(p) for p in vk.ic]
    return out


def read_vk(source) -> VerificationKey:
    name, obj = _load(source)
    ctx = _Ctx(name)
    ctx.check_tag(obj, "protocol", "groth16")
    ctx.check_tag(obj, "curve", "bls12381")
    n_public = ctx.key(obj, "nPublic")
    if isinstance(n_public, bool) or not isinstance(n_public, int) or not 0 <= n_public < 1 << 32:
        raise ctx.err("nPublic", f"expected a non-negative integer, got {n_public!r}")
    ic_raw = ctx.key(obj, "IC")
    if not isinstance(ic_raw, list) or len(ic_raw) != n_public + 1:
        raise ctx.err("IC", f"expected nPublic + 1 = {n_public + 1} points")
    ic = [ctx.g1(p, f"IC[{i}]") for i, p in enumerate(ic_raw)]
    alphabeta = None
    if "vk_alphabeta_12" in obj:
        raw = ctx.seq(obj["vk_alphabeta_12"], "vk_alphabeta_12", (2,))
        vals = []
        for i in range(2):
            c6 = ctx.seq(raw[i], f"vk_alphabeta_12[{i}]", (3,))
            for j in range(3):
                vals += ctx.fq2(c6[j], f"vk_alphabeta_12[{i}][{j}]")
        alphabeta = tuple(vals)
    return VerificationKey(
        n_public,
        ctx.g1(ctx.key(obj, "vk_alpha_1"), "vk_alpha_1"),
        ctx.g2(ctx.key(obj, "vk_beta_2"), "vk_beta_2"),
        ctx.g2(ctx.key(obj, "vk_gamma_2"), "vk_gamma_2"),
        ctx.g2(ctx.key(obj, "vk_delta_2"), "vk_delta_2"),
        ic, alphabeta)


def write_vk(path, vk: VerificationKey) -> None:
    _dump(path, vk_to_json(vk))
