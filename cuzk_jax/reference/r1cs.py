"""Reference R1CS evaluation on Python ints (the oracle for :mod:`cuzk_jax.ops.r1cs`). Never imports jax.

A sparse matrix is given in CSR form as three Python sequences ``(indptr, cols, coeffs)``: row ``i`` holds the
terms ``coeffs[k] * z[cols[k]]`` for ``k in range(indptr[i], indptr[i + 1])``; coefficients and ``z`` entries are
canonical ints in ``[0, r)``. Duplicate columns within a row are allowed (they add up). A constraint system is the
triple ``(A, B, C)``; constraint ``i`` holds iff ``(A z)_i * (B z)_i == (C z)_i  (mod r)``.
"""

from __future__ import annotations

from typing import Sequence

from .constants import R

CSR = tuple  # (indptr, cols, coeffs)


def matvec(matrix: CSR, z: Sequence[int], modulus: int = R) -> list[int]:
    """``M z mod modulus`` for a CSR matrix ``(indptr, cols, coeffs)``."""
    indptr, cols, coeffs = matrix
    out = []
    for i in range(len(indptr) - 1):
        s = 0
        for k in range(indptr[i], indptr[i + 1]):
            s += coeffs[k] * z[cols[k]]
        out.append(s % modulus)
    return out


def evaluate(a: CSR, b: CSR, c: CSR, z: Sequence[int], modulus: int = R) -> tuple[list[int], list[int], list[int]]:
    """``(A z, B z, C z)``."""
    return matvec(a, z, modulus), matvec(b, z, modulus), matvec(c, z, modulus)


def unsatisfied(a: CSR, b: CSR, c: CSR, z: Sequence[int], modulus: int = R) -> list[int]:
    """Indices of every constraint with ``(Az)_i (Bz)_i != (Cz)_i``."""
    az, bz, cz = evaluate(a, b, c, z, modulus)
    return [i for i, (x, y, w) in enumerate(zip(az, bz, cz)) if x * y % modulus != w]


def first_unsatisfied(a: CSR, b: CSR, c: CSR, z: Sequence[int], modulus: int = R) -> int | None:
    """Index of the first failing constraint, or ``None`` when ``z`` satisfies the system."""
    bad = unsatisfied(a, b, c, z, modulus)
    return bad[0] if bad else None


def is_satisfied(a: CSR, b: CSR, c: CSR, z: Sequence[int], modulus: int = R) -> bool:
    return first_unsatisfied(a, b, c, z, modulus) is None
