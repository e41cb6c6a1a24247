"""INSECURE development set-up: a snarkjs-compatible Groth16 ``.zkey`` made directly from an ``.r1cs`` with
known toxic waste (tau, alpha, beta, delta derived from a seed) -- no powers-of-tau ceremony.

**For benchmarks and tests only.** Anyone who knows the seed can forge proofs for this key. It exists because
``snarkjs powersoftau prepare phase2`` doubles in cost per power (~2 min at 2^12, most of an hour at 2^16 on
two cores), which makes the large side-by-side benchmarks impractical; ``snarkjs groth16 prove`` and our prover
consume this key exactly like a ceremony key, and ``snarkjs zkey export verificationkey`` / ``groth16 verify``
work on it.

It computes what ``snarkjs groth16 setup`` (``zkey_new.js``) followed by one phase-2 contribution computes, with
the Lagrange basis evaluated at a known tau instead of taken from a ptau file. Domain ``n = 2^p`` with
``p = bitlen(nConstraints + nPublic)``, roots ``w = 5^((r-1)/n)`` (snarkjs's), constraint ``c`` <-> ``L_c``;
rows ``nConstraints + s`` (``s <= nPublic``) add ``L_(m+s)`` to the A polynomial of wire ``s``:

* ``u_j, v_j, w_j`` = A, B, C polynomials of wire j at tau;
* sections: A_j = u_j G1, B1_j = v_j G1, B2_j = v_j G2, IC_j = (beta u_j + alpha v_j + w_j) G1 (``j <= nPublic``;
  gamma = 1, gamma2 = the G2 generator, as snarkjs), C_j = (beta u_j + alpha v_j + w_j) / delta G1 (private j),
  H_i = L^(2n)_(2i+1)(tau) / delta G1 (the odd points of the size-2n domain);
* the coefficient section is the one ``zkey_new.js`` writes: per constraint its A terms then its B terms (file
  order), then ``(A, m + s, s, 1)``; values ``coef * 2^512 mod r``.

Scalar multiplications run on the host through py_arkworks_bls12381 (about 5 nVars + n of them).
"""

from __future__ import annotations

import hashlib
import struct

from cuzk_jax.reference import constants as C

from . import binfile
from .points import g1_to_zkey_bytes, g1_from_ark, g2_to_zkey_bytes, g2_from_ark, ark_module
from .r1cs import R1cs

R = C.R
SNARKJS_GENERATOR = 5


def lagrange_at(tau: int, n: int) -> list[int]:
    """``L_i(tau)`` for the size-n domain of snarkjs's roots: ``(tau^n - 1)/n * w^i / (tau - w^i)``."""
    from cuzk_jax.groth16.generator import lagrange_at as _lagrange_at

    return _lagrange_at(n, tau, SNARKJS_GENERATOR)


def toxic_waste(seed: int) -> dict[str, int]:
    """tau, alpha, beta, delta from the seed (nonzero; tau outside the 2^32-root subgroup)."""
    out = {}
    for name in ("tau", "alpha", "beta", "delta"):
        k = 0
        while True:
            h = hashlib.sha512(f"cuzk_jax INSECURE dev setup {seed} {name} {k}".encode()).digest()
            v = int.from_bytes(h, "little") % R
            if v and pow(v, 1 << 32, R) != 1:
                out[name] = v
                break
            k += 1
    return out


def coefficient_section(r1cs: R1cs) -> tuple[bytes, list[tuple[int, int, int, int]]]:
    """Section 4 bytes as ``zkey_new.js`` writes them, and the entries ``(matrix, row, wire, coef)``."""
    entries = []
    for m, mat in ((0, r1cs.a), (1, r1cs.b)):
        for row, col, v, k in zip(mat.rows.tolist(), mat.cols.tolist(), mat.val_ints(), range(mat.nnz)):
            entries.append((row, m, k, col, v))
    entries.sort()  # by constraint, then A before B, then file order
    out = [(m, row, col, v) for row, m, _, col, v in entries]
    out += [(0, r1cs.n_constraints + s, s, 1) for s in range(r1cs.n_public + 1)]
    r2 = pow(2, 512, R)
    body = struct.pack("<I", len(out)) + b"".join(
        struct.pack("<III", m, row, col) + (v * r2 % R).to_bytes(32, "little") for m, row, col, v in out)
    return body, out


def insecure_zkey(r1cs: R1cs, seed: int = 0, log=None) -> bytes:
    """The ``.zkey`` bytes (see the module docstring). INSECURE: the seed determines the toxic waste."""
    ark = ark_module()
    m, n_pub, n_vars = r1cs.n_constraints, r1cs.n_public, r1cs.n_wires
    power = (m + n_pub).bit_length()
    if power >= C.FR_TWO_ADICITY:
        raise ValueError(f"circuit too large: domain 2^{power}")
    n = 1 << power
    tw = toxic_waste(seed)
    tau, alpha, beta, delta = tw["tau"], tw["alpha"], tw["beta"], tw["delta"]
    dinv = pow(delta, R - 2, R)

    lag = lagrange_at(tau, n)
    u, v, w = [0] * n_vars, [0] * n_vars, [0] * n_vars
    for acc, mat in ((u, r1cs.a), (v, r1cs.b), (w, r1cs.c)):
        for row, col, coef in zip(mat.rows.tolist(), mat.cols.tolist(), mat.val_ints()):
            acc[col] += coef * lag[row]
    for s in range(n_pub + 1):
        u[s] += lag[m + s]
    u, v, w = ([x % R for x in a] for a in (u, v, w))
    k = [(beta * a + alpha * b + c) % R for a, b, c in zip(u, v, w)]
    lag2 = lagrange_at(tau, 2 * n)
    h = [lag2[2 * i + 1] * dinv % R for i in range(n)]

    g1, g2 = ark.G1Point(), ark.G2Point()

    def g1s(scalars):
        return b"".join(g1_to_zkey_bytes(g1_from_ark(g1 * ark.Scalar(s))) for s in scalars)

    def g2s(scalars):
        return b"".join(g2_to_zkey_bytes(g2_from_ark(g2 * ark.Scalar(s))) for s in scalars)

    hdr = (struct.pack("<I", 48) + C.P.to_bytes(48, "little") + struct.pack("<I", 32) + R.to_bytes(32, "little")
           + struct.pack("<III", n_vars, n_pub, n) + g1s([alpha, beta]) + g2s([beta, 1]) + g1s([delta])
           + g2s([delta]))
    coeffs, _ = coefficient_section(r1cs)
    sections = [
        (1, struct.pack("<I", 1)),
        (2, hdr),
        (3, g1s(k[:n_pub + 1])),
        (4, coeffs),
        (5, g1s(u)),
        (6, g1s(v)),
        (7, g2s(v)),
        (8, g1s([x * dinv % R for x in k[n_pub + 1:]])),
        (9, g1s(h)),
        (10, bytes(64) + struct.pack("<I", 0)),  # no circuit hash, no contributions (snarkjs prove ignores it)
    ]
    return binfile.build("zkey", 1, sections)


def write_insecure_zkey(r1cs_path, zkey_path, seed: int = 0) -> None:
    from .r1cs import read_r1cs

    data = insecure_zkey(read_r1cs(r1cs_path), seed)
    tmp = str(zkey_path) + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    import os

    os.replace(tmp, zkey_path)
