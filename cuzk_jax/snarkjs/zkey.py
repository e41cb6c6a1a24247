"""Reader for snarkjs Groth16 proving keys (``.zkey``, version 1), BLS12-381 only.

Encoding, checked against snarkjs 0.7.6 ``src/zkey_new.js`` (writer) and ``src/zkey_utils.js`` (reader) and
``@iden3/binfileutils``; all integers little-endian:

=========  ==================================================================================================
section 1  u32 protocol (1 = Groth16; 2 = PLONK and 10 = FFLONK are refused)
section 2  u32 n8q (48), q, u32 n8r (32), r, u32 nVars, u32 nPublic (outputs + public inputs, not counting
           wire 0), u32 domainSize, then alpha1 (G1), beta1 (G1), beta2 (G2), gamma2 (G2), delta1 (G1),
           delta2 (G2)
section 3  IC: nPublic + 1 G1 points (not divided by gamma; gamma2 is the G2 generator)
section 4  u32 count, then count x {u32 matrix (0 = A, 1 = B), u32 constraint, u32 signal, 32-byte value}.
           ``value = coef * 2^512 mod r`` (``zkey_new.js`` ``writeCoef``: Fr.mul(coef, R^2) in Montgomery
           arithmetic), so one Montgomery multiplication with a normal-form witness value yields the Montgomery
           form of ``coef * w`` -- what ``groth16_prove.js`` ``buildABC1`` does. Per constraint its A terms then
           its B terms, then the rows ``(A, nConstraints + s, s, 1)`` for s = 0..nPublic that make the public
           inputs' polynomials independent. C is not stored.
section 5  A: nVars G1          section 6  B1: nVars G1          section 7  B2: nVars G2
section 8  C: nVars - nPublic - 1 G1 (private wires only, already divided by delta)
section 9  H: domainSize G1; point i is ``L_{2i+1}(tau) / delta * G`` for the Lagrange basis of the size-2n
           domain (the odd points), see :mod:`cuzk_jax.snarkjs.prover`
section 10 contributions (the circuit hash and the phase-2 contribution log; kept as raw bytes)
=========  ==================================================================================================

Points are in the zkey point form documented in :mod:`cuzk_jax.snarkjs.points` (Montgomery, infinity = zeros).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from cuzk_jax.reference import constants as C

from . import binfile
from .points import G1_BYTES, G2_BYTES, G1Affine, G1Array, G2Affine, G2Array, g1_array_from_bytes, \
    g1_ints, g1_to_ark, g2_array_from_bytes, g2_ints, g2_to_ark

PROTOCOLS = {1: "groth16", 2: "plonk", 10: "fflonk"}
R2_MONT = pow(2, 512, C.R)
R2_MONT_INV = pow(R2_MONT, -1, C.R)
_COEF = 12 + 32


@dataclass(frozen=True)
class Coefficients:
    """Zkey section 4 as arrays (file order): ``matrix``, ``constraint``, ``signal`` uint32 ``(count,)``;
    ``value`` uint32 ``(8, count)`` holding ``coef * 2^512 mod r`` exactly as stored (see module docstring)."""

    matrix: np.ndarray
    constraint: np.ndarray
    signal: np.ndarray
    value: np.ndarray

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def coef_ints(self) -> list[int]:
        """Coefficients in canonical form (the stored value divided by 2^512)."""
        raw = binfile.le_ints(binfile.limbs_to_le(self.value), 32) if len(self) else []
        return [v * R2_MONT_INV % C.R for v in raw]


@dataclass(frozen=True)
class Zkey:
    """A snarkjs Groth16 proving key over BLS12-381.

    Scalars are Python ints; header points are in host form (:mod:`.points`); the point sections are
    :class:`G1Array` / :class:`G2Array` in zkey (= ops Montgomery) form.
    """

    n_vars: int
    n_public: int
    domain_size: int
    alpha1: G1Affine
    beta1: G1Affine
    beta2: G2Affine
    gamma2: G2Affine
    delta1: G1Affine
    delta2: G2Affine
    ic: G1Array
    coeffs: Coefficients
    a: G1Array
    b1: G1Array
    b2: G2Array
    c: G1Array
    h: G1Array
    contributions: bytes

    @property
    def power(self) -> int:
        return self.domain_size.bit_length() - 1

    @property
    def n_constraints_bound(self) -> int:
        """Rows of the QAP actually used: every coefficient row is below this (``<= domain_size``)."""
        return int(self.coeffs.constraint.max()) + 1 if len(self.coeffs) else 0

    def ic_ints(self) -> list[G1Affine]:
        return g1_ints(self.ic)


def read_zkey(source, *, check_points: bool = True) -> Zkey:
    """Read a Groth16 ``.zkey`` (path or bytes). Raises :class:`binfile.FormatError` (a ValueError) for another
    protocol or curve and for truncated or corrupt files.

    Every count is checked against the bytes present before anything is allocated. The six header points are
    always checked (on the curve, in the subgroup, not infinity: they make the verification key).
    ``check_points`` (the default) also checks every point of the IC, A, B1, B2, C and H sections: curve equation
    and prime-order subgroup, in one batched device program per group (:func:`cuzk_jax.points.check_montgomery`),
    naming the section and the first bad point.
    """
    f = binfile.parse(source, "zkey", 1)
    sec1 = f.section(1, 4, "protocol header")
    proto = struct.unpack_from("<I", sec1)[0]
    if proto != 1:
        raise f.error(f"zkey is for protocol {PROTOCOLS.get(proto, proto)!r}; only Groth16 zkeys are supported")

    hdr = f.section(2, what="Groth16 header")
    if len(hdr) < 4:
        raise f.error("Groth16 header too short")
    n8q = struct.unpack_from("<I", hdr, 0)[0]
    if n8q not in (32, 48) or len(hdr) < 4 + n8q + 4:
        raise f.error(f"Groth16 header: unexpected base-field size n8q = {n8q}")
    q = int.from_bytes(bytes(hdr[4:4 + n8q]), "little")
    binfile.check_prime(f, n8q, q, scalar=False)
    n8r = struct.unpack_from("<I", hdr, 4 + n8q)[0]
    if n8r != 32 or len(hdr) < 8 + n8q + n8r:
        raise f.error(f"Groth16 header: unexpected scalar-field size n8r = {n8r}")
    r = int.from_bytes(bytes(hdr[8 + n8q:8 + n8q + n8r]), "little")
    binfile.check_prime(f, n8r, r)
    pos = 8 + n8q + n8r
    want = pos + 12 + 3 * G1_BYTES + 3 * G2_BYTES
    if len(hdr) != want:
        raise f.error(f"Groth16 header has {len(hdr)} bytes, expected {want} (truncated or corrupt file)")
    n_vars, n_public, domain = struct.unpack_from("<III", hdr, pos)
    pos += 12
    if domain < 2 or domain & (domain - 1) or domain.bit_length() - 1 >= C.FR_TWO_ADICITY:
        raise f.error(f"domainSize {domain} is not a power of two below 2^{C.FR_TWO_ADICITY}")
    if n_vars < 1 or n_public + 1 > n_vars:
        raise f.error(f"inconsistent counts: nVars = {n_vars}, nPublic = {n_public}")

    def take(size):
        nonlocal pos
        out = hdr[pos:pos + size]
        pos += size
        return out

    g1 = lambda what: g1_ints(g1_array_from_bytes(take(G1_BYTES), f, what))[0]  # noqa: E731
    g2 = lambda what: g2_ints(g2_array_from_bytes(take(G2_BYTES), f, what))[0]  # noqa: E731
    alpha1, beta1, beta2, gamma2, delta1, delta2 = (
        g1("alpha1"), g1("beta1"), g2("beta2"), g2("gamma2"), g1("delta1"), g2("delta2"))

    for what, p, to_ark in (("alpha1", alpha1, g1_to_ark), ("beta1", beta1, g1_to_ark), ("beta2", beta2, g2_to_ark),
                            ("gamma2", gamma2, g2_to_ark), ("delta1", delta1, g1_to_ark), ("delta2", delta2, g2_to_ark)):
        if p is None:
            raise f.error(f"Groth16 header: {what} is the point at infinity (corrupt file)")
        try:
            to_ark(p, checked=True)
        except Exception:  # arkworks raises on a point outside the prime-order subgroup
            raise f.error(f"Groth16 header: {what} is not in the prime-order subgroup (corrupt file)") from None

    # Sizes were checked against the section lengths (binfile.section(size=...)) before any array is made.
    ic = g1_array_from_bytes(f.section(3, (n_public + 1) * G1_BYTES, "IC"), f, "IC", False)
    coeffs = _read_coeffs(f, n_vars, domain)
    a = g1_array_from_bytes(f.section(5, n_vars * G1_BYTES, "A points"), f, "A points", False)
    b1 = g1_array_from_bytes(f.section(6, n_vars * G1_BYTES, "B1 points"), f, "B1 points", False)
    b2 = g2_array_from_bytes(f.section(7, n_vars * G2_BYTES, "B2 points"), f, "B2 points", False)
    c = g1_array_from_bytes(f.section(8, (n_vars - n_public - 1) * G1_BYTES, "C points"), f, "C points", False)
    h = g1_array_from_bytes(f.section(9, domain * G1_BYTES, "H points"), f, "H points", False)
    if check_points:
        _check_sections(f, "g1", [("IC", ic), ("A points", a), ("B1 points", b1), ("C points", c), ("H points", h)])
        _check_sections(f, "g2", [("B2 points", b2)])
    contributions = bytes(f.section(10, what="contributions")) if f.has(10) else b""
    return Zkey(n_vars, n_public, domain, alpha1, beta1, beta2, gamma2, delta1, delta2, ic, coeffs,
                a, b1, b2, c, h, contributions)


def _read_coeffs(f: binfile.BinFile, n_vars: int, domain: int) -> Coefficients:
    sec = f.section(4, what="coefficients")
    if len(sec) < 4:
        raise f.error("coefficients section too short")
    count = struct.unpack_from("<I", sec)[0]
    if len(sec) != 4 + count * _COEF:
        raise f.error(f"coefficients section has {len(sec)} bytes, expected {4 + count * _COEF} for {count} "
                      "coefficients (truncated or corrupt file)")
    rec = np.frombuffer(bytes(sec[4:]), np.uint8).reshape(count, _COEF)
    idx = np.ascontiguousarray(rec[:, :12]).view("<u4").reshape(count, 3).astype(np.uint32)
    value = np.ascontiguousarray(np.ascontiguousarray(rec[:, 12:]).view("<u4").reshape(count, 8).T).astype(np.uint32)
    matrix, constraint, signal = (np.ascontiguousarray(idx[:, k]) for k in range(3))
    for name, arr, bound in (("matrix", matrix, 2), ("constraint", constraint, domain), ("signal", signal, n_vars)):
        if count and int(arr.max()) >= bound:
            i = int(np.argmax(arr >= bound))
            raise f.error(f"coefficient {i}: {name} index {int(arr[i])} out of range (< {bound}) (corrupt file)")
    ok = binfile.all_below(value, C.R)
    if count and not ok.all():
        raise f.error(f"coefficient {int(np.argmin(ok))}: value >= r (corrupt file)")
    return Coefficients(matrix, constraint, signal, value)


def _check_sections(f: binfile.BinFile, group: str, sections) -> None:
    """Curve and subgroup check of several point sections in one device call; FormatError naming the first bad
    point's section and index."""
    from cuzk_jax import points as device_points

    sections = [(name, arr) for name, arr in sections if len(arr)]
    if not sections:
        return
    x = np.concatenate([arr.x for _, arr in sections], axis=-1)
    y = np.concatenate([arr.y for _, arr in sections], axis=-1)
    inf = np.concatenate([arr.inf for _, arr in sections])
    bad_curve, bad_sub = device_points.check_montgomery(x, y, inf, group, subgroup=True)

    def where(i):
        for name, arr in sections:
            if i < len(arr):
                return name, i
            i -= len(arr)
        raise AssertionError("index past the sections")  # pragma: no cover

    if bad_curve is not None:
        name, i = where(bad_curve)
        raise f.error(f"{name}: point {i} is not on the BLS12-381 {group.upper()} curve (corrupt file)")
    if bad_sub is not None:
        name, i = where(bad_sub)
        raise f.error(f"{name}: point {i} is not in the prime-order {group.upper()} subgroup (corrupt file)")
