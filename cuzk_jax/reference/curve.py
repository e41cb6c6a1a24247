"""Reference BLS12-381 groups G1 and G2 on Python ints (the oracle for :mod:`cuzk_jax.ops.curve`).

Representation: a point is an affine tuple ``(x, y)`` of canonical field elements (ints for G1, ``(c0, c1)``
tuples for G2), and ``None`` is the point at infinity. Formulas are the textbook chord-and-tangent law for
``y^2 = x^3 + b`` (a = 0), which is obviously right and slow (one inversion per operation).

* ``E1: y^2 = x^3 + 4`` over Fq, ``E2: y^2 = x^3 + 4(1 + u)`` over Fq2 (the M-type sextic twist);
  IETF draft-irtf-cfrg-pairing-friendly-curves section 4.2.1.
* ``in_subgroup`` is the definition: ``r * P == O``. The fast endomorphism tests used by the array layer
  (Scott, "A note on group membership tests for G1, G2 and GT on BLS pairing-friendly curves", eprint 2021/1130:
  ``sigma(P) == -x^2 P`` on G1, ``psi(P) == x P`` on G2) are implemented here too (``in_subgroup_fast``) so the
  constants below are checked against the definition.
* The zcash/bellperson point encodings (compressed and uncompressed, with the C/I/S flag bits in the top three
  bits of the first byte) are implemented as ``encode`` / ``decode`` -- a slow, per-point oracle for
  :mod:`cuzk_jax.points`.

Method names (``add``, ``double``, ``neg``, ``mul``, ``is_on_curve``, ``in_subgroup``, ``multiexp``) match the
array layer. This module never imports jax.
"""

from __future__ import annotations

import random as _random
from typing import Optional, Sequence

from . import constants as C
from .field import fq, fq2

Point = Optional[tuple]

# sigma(x, y) = (BETA * x, y) acts on G1 as multiplication by -x^2 (BETA a primitive cube root of unity in Fq,
# the one for which that eigenvalue is right; the other root gives the eigenvalue's inverse).
G1_BETA = 0x5F19672FDF76CE51BA69C6076A0F77EADDB3A93BE6F89688DE17D813620A00022E01FFFFFFFEFFFE
# psi(x, y) = (conj(x) * PSI_X, conj(y) * PSI_Y): the untwist-Frobenius-twist endomorphism of E2, with
# PSI_X = 1 / (1 + u)^((p - 1) / 3), PSI_Y = 1 / (1 + u)^((p - 1) / 2). On G2 it acts as multiplication by x.
G2_PSI_X = (0, 0x1A0111EA397FE699EC02408663D4DE85AA0D857D89759AD4897D29650FB85F9B409427EB4F49FFFD8BFD00000000AAAD)
G2_PSI_Y = (
    0x135203E60180A68EE2E9C448D77A2CD91C3DEDD930B1CF60EF396489F61EB45E304466CF3E67FA0AF1EE7B04121BDEA2,
    0x06AF0E0437FF400B6831E36D6BD17FFE48395DABC2D3435E77F76E17009241C5EE67992F72EC05F4C81084FBEDE3CC09,
)


class _Fq:
    """fq with the few extra helpers the generic code below needs (zero/one, is_zero, element sizes)."""

    F = fq
    zero = 0
    one = 1
    degree = 1

    @staticmethod
    def is_zero(a) -> bool:
        return a % C.P == 0


class _Fq2:
    F = fq2
    zero = (0, 0)
    one = (1, 0)
    degree = 2

    @staticmethod
    def is_zero(a) -> bool:
        return fq2.is_zero(a)


class Curve:
    """A short Weierstrass curve ``y^2 = x^3 + b`` (a = 0) over ``field`` with a prime-order subgroup of order r."""

    def __init__(self, name: str, kind, b, generator: tuple, cofactor: int):
        self.name = name
        self._k = kind
        self.field = kind.F
        self.b = b
        self.generator = generator
        self.cofactor = cofactor
        self.order = C.R
        self.nbytes = 48 * kind.degree  # bytes of one coordinate in the zcash encoding

    def __repr__(self) -> str:
        return f"reference.curve.{self.name}"

    # -- group law -------------------------------------------------------------------------------------------
    def is_on_curve(self, p: Point) -> bool:
        if p is None:
            return True
        F = self.field
        x, y = p
        return F.sub(F.square(y), F.add(F.mul(F.square(x), x), self.b)) == self._k.zero

    def neg(self, p: Point) -> Point:
        if p is None:
            return None
        return (p[0], self.field.neg(p[1]))

    def eq(self, p: Point, q: Point) -> bool:
        return p == q

    def double(self, p: Point) -> Point:
        if p is None:
            return None
        F = self.field
        x, y = p
        if self._k.is_zero(y):
            return None  # a point of order 2 (none exist on E1 or E2, whose cofactors are odd)
        xx = F.square(x)
        lam = F.mul(F.add(F.double(xx), xx), F.inv(F.double(y)))
        x3 = F.sub(F.square(lam), F.double(x))
        return (x3, F.sub(F.mul(lam, F.sub(x, x3)), y))

    def add(self, p: Point, q: Point) -> Point:
        if p is None:
            return q
        if q is None:
            return p
        F = self.field
        (x1, y1), (x2, y2) = p, q
        if x1 == x2:
            return self.double(p) if y1 == y2 else None  # P + P, or P + (-P) = O
        lam = F.mul(F.sub(y2, y1), F.inv(F.sub(x2, x1)))
        x3 = F.sub(F.sub(F.square(lam), x1), x2)
        return (x3, F.sub(F.mul(lam, F.sub(x1, x3)), y1))

    def sub(self, p: Point, q: Point) -> Point:
        return self.add(p, self.neg(q))

    def mul(self, p: Point, k: int) -> Point:
        """``k * p`` by left-to-right double-and-add; ``k`` any int (negative allowed, NOT reduced mod r, so
        the result is right for points outside the subgroup too)."""
        if k < 0:
            return self.neg(self.mul(p, -k))
        acc = None
        for bit in bin(k)[2:]:
            acc = self.double(acc)
            if bit == "1":
                acc = self.add(acc, p)
        return acc

    def multiexp(self, points: Sequence[Point], scalars: Sequence[int]) -> Point:
        """Naive ``sum_i scalars[i] * points[i]``."""
        if len(points) != len(scalars):
            raise ValueError(f"multiexp: {len(points)} points but {len(scalars)} scalars")
        acc = None
        for p, s in zip(points, scalars):
            acc = self.add(acc, self.mul(p, s))
        return acc

    def in_subgroup(self, p: Point) -> bool:
        """The definition: on the curve and ``r * p == O``."""
        return self.is_on_curve(p) and self.mul(p, self.order) is None

    def clear_cofactor(self, p: Point) -> Point:
        """Multiply by the cofactor (maps every curve point into the subgroup; slow for G2's big cofactor)."""
        return self.mul(p, self.cofactor)

    # -- endomorphisms (Scott 2021/1130) ------------------------------------------------------------------------
    def endomorphism(self, p: Point) -> Point:
        """sigma on G1 (``(BETA x, y)``), psi on G2 (``(conj(x) PSI_X, conj(y) PSI_Y)``)."""
        if p is None:
            return None
        if self._k.degree == 1:
            return (fq.mul(G1_BETA, p[0]), p[1])
        return (fq2.mul(fq2.conjugate(p[0]), G2_PSI_X), fq2.mul(fq2.conjugate(p[1]), G2_PSI_Y))

    def endomorphism_eigenvalue(self) -> int:
        """The scalar the endomorphism acts as on the subgroup: ``-x^2`` on G1, ``x`` on G2."""
        return -(C.X**2) if self._k.degree == 1 else C.X

    def in_subgroup_fast(self, p: Point) -> bool:
        """Scott's test: on the curve and ``endomorphism(p) == eigenvalue * p``."""
        return self.is_on_curve(p) and self.endomorphism(p) == self.mul(p, self.endomorphism_eigenvalue())

    # -- sampling (tests) ---------------------------------------------------------------------------------------
    def lift_x(self, x) -> Point:
        """A point with abscissa ``x`` (either root of y), or ``None`` if ``x^3 + b`` is not a square."""
        F = self.field
        y = F.sqrt(F.add(F.mul(F.square(x), x), self.b))
        return None if y is None else (x, y)

    def random_curve_point(self, rng: _random.Random) -> tuple:
        """A random point of E (try-and-increment on x, cofactor NOT cleared: almost never in the subgroup)."""
        p = C.P
        while True:
            x = rng.randrange(p) if self._k.degree == 1 else (rng.randrange(p), rng.randrange(p))
            pt = self.lift_x(x)
            if pt is not None:
                return pt

    def random_point(self, rng: _random.Random) -> tuple:
        """A random subgroup point ``k * G`` (k uniform in [1, r))."""
        return self.mul(self.generator, rng.randrange(1, self.order))

    # -- zcash / bellperson encodings -----------------------------------------------------------------------------
    def _coord_to_bytes(self, v) -> bytes:
        if self._k.degree == 1:
            return v.to_bytes(48, "big")
        return v[1].to_bytes(48, "big") + v[0].to_bytes(48, "big")  # c1 first, as zcash

    def _coord_from_bytes(self, b: bytes):
        if self._k.degree == 1:
            v = int.from_bytes(b, "big")
            if v >= C.P:
                raise ValueError("non-canonical field element (>= p)")
            return v
        c1, c0 = int.from_bytes(b[:48], "big"), int.from_bytes(b[48:], "big")
        if c0 >= C.P or c1 >= C.P:
            raise ValueError("non-canonical field element (>= p)")
        return (c0, c1)

    def y_is_largest(self, y) -> bool:
        """zcash sort flag: y is the lexicographically larger of {y, -y} (for Fq2 compare c1 first, then c0)."""
        half = (C.P - 1) // 2
        if self._k.degree == 1:
            return y > half
        c0, c1 = y
        return c1 > half or (c1 == 0 and c0 > half)

    def encode(self, p: Point, compressed: bool = True) -> bytes:
        n = self.nbytes
        if p is None:
            out = bytearray((n if compressed else 2 * n))
            out[0] = 0xC0 if compressed else 0x40
            return bytes(out)
        x, y = p
        if compressed:
            out = bytearray(self._coord_to_bytes(x))
            out[0] |= 0x80 | (0x20 if self.y_is_largest(y) else 0)
        else:
            out = bytearray(self._coord_to_bytes(x) + self._coord_to_bytes(y))
        return bytes(out)

    def decode(self, data: bytes, compressed: bool = True, check: bool = True) -> Point:
        n = self.nbytes if compressed else 2 * self.nbytes
        if len(data) != n:
            raise ValueError(f"{self.name}: encoding must be {n} bytes, got {len(data)}")
        c, i, s = data[0] >> 7 & 1, data[0] >> 6 & 1, data[0] >> 5 & 1
        if c != int(compressed):
            raise ValueError(f"{self.name}: compression flag is {c}, expected {int(compressed)}")
        body = bytes([data[0] & 0x1F]) + data[1:]
        if i:
            if s or any(body):
                raise ValueError(f"{self.name}: infinity flag set with non-zero bits")
            return None
        if not compressed and s:
            raise ValueError(f"{self.name}: sort flag set on an uncompressed encoding")
        x = self._coord_from_bytes(body[: self.nbytes])
        if compressed:
            pt = self.lift_x(x)
            if pt is None:
                raise ValueError(f"{self.name}: x is not the abscissa of a curve point")
            if self.y_is_largest(pt[1]) != bool(s):
                pt = self.neg(pt)
        else:
            pt = (x, self._coord_from_bytes(body[self.nbytes :]))
            if not self.is_on_curve(pt):
                raise ValueError(f"{self.name}: point is not on the curve")
        if check and not self.in_subgroup_fast(pt):
            raise ValueError(f"{self.name}: point is not in the prime-order subgroup")
        return pt


g1 = Curve("g1", _Fq, C.B1, (C.G1_X, C.G1_Y), C.H1)
g2 = Curve("g2", _Fq2, C.B2, (C.G2_X, C.G2_Y), C.H2)

CURVES = {"g1": g1, "g2": g2}
