"""Reference finite-field arithmetic on Python ints (the oracle for every array layer).

Elements of a prime field are plain ints in ``[0, modulus)`` (canonical, *not* Montgomery form). Fq2 elements are
tuples ``(c0, c1)`` meaning ``c0 + c1 * u`` with ``u^2 = -1``. The method names (``add``, ``sub``, ``neg``,
``double``, ``mul``, ``square``, ``inv``, ``pow``, ``sqrt``) are the same as in :mod:`cuzk_jax.ops.field`, so
one parameterised test can compare every layer with this one. This module never imports jax.
"""

from __future__ import annotations

from . import constants as C


def batch_inv(F, xs: list) -> list:
    """``[F.inv(x) for x in xs]`` with ONE field inversion (Montgomery's trick: prefix products, one inverse, walk
    back); zeros map to zero, the ``inv`` convention. ``F`` is a :class:`PrimeField` or :class:`QuadraticExtension`."""
    out = [F.zero if isinstance(F, QuadraticExtension) else 0] * len(xs)
    nz = [i for i, x in enumerate(xs) if not F.is_zero(x)]
    prefix, acc = [], F.one
    for i in nz:
        prefix.append(acc)
        acc = F.mul(acc, xs[i])
    inv = F.inv(acc)
    for k in range(len(nz) - 1, -1, -1):
        i = nz[k]
        out[i] = F.mul(inv, prefix[k])
        inv = F.mul(inv, xs[i])
    return out


class PrimeField:
    """Arithmetic modulo a prime ``modulus`` on canonical Python ints."""

    def __init__(self, modulus: int, name: str, limbs: int):
        self.modulus = modulus
        self.name = name
        self.limbs = limbs
        self.nbytes = limbs * 4
        self.mont_r = (1 << (32 * limbs)) % modulus  # Montgomery radix R = 2^(32 L) reduced mod p

    def __repr__(self) -> str:
        return f"PrimeField({self.name})"

    def add(self, a: int, b: int) -> int:
        return (a + b) % self.modulus

    def sub(self, a: int, b: int) -> int:
        return (a - b) % self.modulus

    def neg(self, a: int) -> int:
        return (-a) % self.modulus

    def double(self, a: int) -> int:
        return (2 * a) % self.modulus

    def mul(self, a: int, b: int) -> int:
        return (a * b) % self.modulus

    def square(self, a: int) -> int:
        return (a * a) % self.modulus

    def pow(self, a: int, e: int) -> int:
        return pow(a, e, self.modulus)

    def inv(self, a: int) -> int:
        """Multiplicative inverse; ``inv(0) == 0`` (the convention the array layers follow too). Python's
        ``pow(a, -1, p)`` (extended Euclid) is ~10x faster than Fermat's ``a^(p-2)`` for a 381-bit p."""
        return pow(a, -1, self.modulus) if a % self.modulus else 0

    def batch_inv(self, xs: list[int]) -> list[int]:
        return batch_inv(self, xs)

    def is_zero(self, a: int) -> bool:
        return a % self.modulus == 0

    @property
    def one(self) -> int:
        return 1

    def is_square(self, a: int) -> bool:
        a %= self.modulus
        return a == 0 or pow(a, (self.modulus - 1) // 2, self.modulus) == 1

    def sqrt(self, a: int) -> int | None:
        """A square root of ``a`` or ``None`` (Tonelli-Shanks; the (p+1)/4 shortcut when p = 3 mod 4)."""
        p = self.modulus
        a %= p
        if a == 0:
            return 0
        if not self.is_square(a):
            return None
        if p % 4 == 3:
            return pow(a, (p + 1) // 4, p)
        q, s = p - 1, 0
        while q % 2 == 0:
            q, s = q // 2, s + 1
        z = 2
        while self.is_square(z):
            z += 1
        m, c, t, x = s, pow(z, q, p), pow(a, q, p), pow(a, (q + 1) // 2, p)
        while t != 1:
            i, t2 = 0, t
            while t2 != 1:
                t2, i = t2 * t2 % p, i + 1
            b = pow(c, 1 << (m - i - 1), p)
            m, c, t, x = i, b * b % p, t * b * b % p, x * b % p
        return x

    def to_mont(self, a: int) -> int:
        return a * self.mont_r % self.modulus

    def from_mont(self, a: int) -> int:
        return a * pow(self.mont_r, -1, self.modulus) % self.modulus


fq = PrimeField(C.P, "fq", C.FQ_LIMBS)
fr = PrimeField(C.R, "fr", C.FR_LIMBS)


class QuadraticExtension:
    """Fq2 = Fq[u] / (u^2 + 1); elements are tuples ``(c0, c1)`` of canonical ints."""

    name = "fq2"

    def __init__(self, base: PrimeField):
        self.base = base
        self.zero = (0, 0)
        self.one = (1, 0)

    def add(self, a, b):
        p = self.base.modulus
        return ((a[0] + b[0]) % p, (a[1] + b[1]) % p)

    def sub(self, a, b):
        p = self.base.modulus
        return ((a[0] - b[0]) % p, (a[1] - b[1]) % p)

    def neg(self, a):
        p = self.base.modulus
        return ((-a[0]) % p, (-a[1]) % p)

    def double(self, a):
        return self.add(a, a)

    def mul(self, a, b):
        p = self.base.modulus
        return ((a[0] * b[0] - a[1] * b[1]) % p, (a[0] * b[1] + a[1] * b[0]) % p)

    def square(self, a):
        return self.mul(a, a)

    def mul_by_base(self, a, k: int):
        p = self.base.modulus
        return (a[0] * k % p, a[1] * k % p)

    def conjugate(self, a):
        return (a[0], (-a[1]) % self.base.modulus)

    def norm(self, a) -> int:
        return (a[0] * a[0] + a[1] * a[1]) % self.base.modulus

    def inv(self, a):
        n = self.base.inv(self.norm(a))
        p = self.base.modulus
        return (a[0] * n % p, (-a[1]) * n % p)

    def pow(self, a, e: int):
        result, base = self.one, a
        while e:
            if e & 1:
                result = self.mul(result, base)
            base = self.square(base)
            e >>= 1
        return result

    def is_zero(self, a) -> bool:
        return a[0] % self.base.modulus == 0 and a[1] % self.base.modulus == 0

    def batch_inv(self, xs: list) -> list:
        return batch_inv(self, xs)

    def sqrt(self, a):
        """A square root in Fq2 or ``None`` (the "complex" method: p = 3 mod 4, u^2 = -1)."""
        f = self.base
        p = f.modulus
        a = (a[0] % p, a[1] % p)
        if a == (0, 0):
            return (0, 0)
        if a[1] == 0:
            r = f.sqrt(a[0])
            if r is not None:
                return (r, 0)
            r = f.sqrt(f.neg(a[0]))  # sqrt of a negative base element is purely imaginary
            return (0, r) if r is not None else None
        alpha = f.sqrt(f.add(f.square(a[0]), f.square(a[1])))  # sqrt of the norm
        if alpha is None:
            return None
        half = f.inv(2)
        for sign in (1, -1):
            delta = f.mul(f.add(a[0], sign * alpha % p), half)
            x0 = f.sqrt(delta)
            if x0 is not None and x0 != 0:
                x1 = f.mul(a[1], f.inv(f.double(x0)))
                cand = (x0, x1)
                if self.square(cand) == a:
                    return cand
        return None


fq2 = QuadraticExtension(fq)
