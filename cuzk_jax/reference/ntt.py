"""Reference NTT over Fr and the Groth16 H polynomial, on Python ints (the oracle for :mod:`cuzk_jax.ops.ntt` and
:mod:`cuzk_jax.ops.qap`). Never imports jax. Slow and obviously right.

Conventions (shared by every layer):

* The evaluation domain of size ``n = 2^k`` (``0 <= k <= 32``) is ``{w^i}`` with ``w = gen^((r-1)/n)``; ``gen``
  is the multiplicative generator 7 (zcash ``ff`` / arkworks / bellman for BLS12-381 Fr), so ``w`` is
  ``FR_ROOT_OF_UNITY^(2^32/n)``. snarkjs picks its roots from the generator 5 instead (same subgroups, other
  primitive roots): pass ``generator=5`` for that domain order.
* ``ntt(v)[i] = sum_j v[j] w^(i j)`` -- evaluations at ``w^i`` of the polynomial with coefficients ``v``, natural
  order in and out. ``intt`` is its inverse (divides by n).
* Coset NTT with shift ``g``: ``coset_ntt(v, g)[i] = sum_j v[j] (g w^i)^j``; ``coset_intt`` is its inverse. The
  default coset shift is :data:`COSET_GENERATOR` = 7 (arkworks ``get_coset(F::GENERATOR)``, bellman/bellperson
  ``coset_fft`` with ``F::MULTIPLICATIVE_GENERATOR``); 7 is a quadratic non-residue, so ``7^n != 1`` for every
  domain size and the coset is disjoint from the domain.
* ``Z_H(x) = x^n - 1`` vanishes on the domain; on the coset it is the constant ``g^n - 1``.
"""

from __future__ import annotations

from typing import Sequence

from . import constants as C

R = C.R
TWO_ADICITY = C.FR_TWO_ADICITY
GENERATOR = C.FR_GENERATOR  # 7
SNARKJS_GENERATOR = 5  # ffjavascript: Fr.w[32] = 5^((r-1)/2^32)
COSET_GENERATOR = 7

NAIVE_MAX = 64  # below this the O(n^2) definition is used directly


def log2_size(n: int) -> int:
    """log2(n) for a power of two ``1 <= n <= 2^32``; ValueError otherwise."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"NTT size must be an int, got {type(n).__name__}")
    if n < 1 or n & (n - 1):
        raise ValueError(f"NTT size must be a power of two, got {n}")
    k = n.bit_length() - 1
    if k > TWO_ADICITY:
        raise ValueError(f"NTT size 2^{k} exceeds the 2-adicity of Fr (at most 2^{TWO_ADICITY})")
    return k


def root_of_unity(n: int, generator: int = GENERATOR) -> int:
    """The primitive n-th root of unity ``generator^((r-1)/n)``."""
    log2_size(n)
    if pow(generator, (R - 1) // 2, R) != R - 1:
        raise ValueError(f"{generator} is not a quadratic non-residue mod r; its powers miss the full 2-power order")
    w = pow(generator, (R - 1) // n, R)
    assert pow(w, n, R) == 1 and (n == 1 or pow(w, n // 2, R) == R - 1)
    return w


def domain(n: int, generator: int = GENERATOR) -> list[int]:
    """``[w^0, w^1, ..., w^(n-1)]``."""
    w = root_of_unity(n, generator)
    out, x = [], 1
    for _ in range(n):
        out.append(x)
        x = x * w % R
    return out


def _check_values(values: Sequence[int]) -> list[int]:
    vals = list(values)
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < R:
            raise ValueError(f"Fr element must be an int in [0, r), got {v!r}")
    return vals


def dft(values: Sequence[int], w: int) -> list[int]:
    """The definition, O(n^2): ``out[i] = sum_j values[j] w^(i j) mod r``."""
    n = len(values)
    out = []
    wi = 1
    for _ in range(n):
        acc, x = 0, 1
        for v in values:
            acc += v * x
            x = x * wi % R
        out.append(acc % R)
        wi = wi * w % R
    return out


def _fft(values: list[int], w: int) -> list[int]:
    """Recursive radix-2 Cooley-Tukey (decimation in time); w a primitive len(values)-th root of unity."""
    n = len(values)
    if n <= NAIVE_MAX:
        return dft(values, w)
    w2 = w * w % R
    even = _fft(values[0::2], w2)
    odd = _fft(values[1::2], w2)
    out = [0] * n
    h = n // 2
    t = 1
    for k in range(h):
        x = odd[k] * t % R
        out[k] = (even[k] + x) % R
        out[k + h] = (even[k] - x) % R
        t = t * w % R
    return out


def ntt(values: Sequence[int], inverse: bool = False, generator: int = GENERATOR) -> list[int]:
    """Forward (``out[i] = sum_j v[j] w^(ij)``) or inverse NTT (``w -> w^-1``, divided by n); natural order."""
    vals = _check_values(values)
    n = len(vals)
    w = root_of_unity(n, generator)
    if inverse:
        w = pow(w, R - 2, R)
    out = _fft(vals, w)
    if inverse:
        ninv = pow(n, R - 2, R)
        out = [x * ninv % R for x in out]
    return out


def intt(values: Sequence[int], generator: int = GENERATOR) -> list[int]:
    return ntt(values, inverse=True, generator=generator)


def coset_ntt(values: Sequence[int], g: int = COSET_GENERATOR, generator: int = GENERATOR) -> list[int]:
    """Evaluations at ``g w^i`` of the polynomial with coefficients ``values``."""
    vals = _check_values(values)
    scaled, x = [], 1
    for v in vals:
        scaled.append(v * x % R)
        x = x * g % R
    return ntt(scaled, generator=generator)


def coset_intt(values: Sequence[int], g: int = COSET_GENERATOR, generator: int = GENERATOR) -> list[int]:
    """Coefficients of the polynomial of degree < n whose evaluations at ``g w^i`` are ``values``."""
    coeffs = intt(values, generator=generator)
    ginv = pow(g, R - 2, R)
    out, x = [], 1
    for c in coeffs:
        out.append(c * x % R)
        x = x * ginv % R
    return out


# ---------------------------------------------------------------------------------------------------------------
# Polynomials (coefficient lists, lowest degree first)
# ---------------------------------------------------------------------------------------------------------------


def poly_eval(coeffs: Sequence[int], x: int) -> int:
    acc = 0
    for c in reversed(coeffs):
        acc = (acc * x + c) % R
    return acc


def poly_mul(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """Schoolbook product."""
    out = [0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                out[i + j] += x * y
    return [v % R for v in out]


def poly_divmod_vanishing(p: Sequence[int], n: int) -> tuple[list[int], list[int]]:
    """Divide ``p`` by ``x^n - 1``: returns (quotient, remainder of degree < n)."""
    rem = [v % R for v in p]
    if len(rem) <= n:
        return [0], rem + [0] * (n - len(rem))
    q = [0] * (len(rem) - n)
    # long division by a monic x^n - 1: the leading term x^k (k >= n) contributes x^(k-n) to q and +x^(k-n) to rem
    for k in range(len(rem) - 1, n - 1, -1):
        c = rem[k]
        if c:
            q[k - n] = c
            rem[k] = 0
            rem[k - n] = (rem[k - n] + c) % R
    return q, rem[:n]


def vanishing_eval(n: int, x: int) -> int:
    """``Z_H(x) = x^n - 1`` for the size-n domain."""
    return (pow(x, n, R) - 1) % R


def lagrange_eval(evals: Sequence[int], x: int, generator: int = GENERATOR) -> int:
    """Value at ``x`` of the polynomial of degree < n taking ``evals[i]`` at ``w^i`` (barycentric formula
    ``p(x) = (x^n - 1)/n * sum_i evals[i] w^i / (x - w^i)``), independent of any NTT code."""
    n = len(evals)
    dom = domain(n, generator)
    for i, d in enumerate(dom):
        if x % R == d:
            return evals[i] % R
    acc = 0
    for e, d in zip(evals, dom):
        acc += e * d * pow(x - d, R - 2, R)
    return acc % R * vanishing_eval(n, x) % R * pow(n, R - 2, R) % R


# ---------------------------------------------------------------------------------------------------------------
# The Groth16 H polynomial
# ---------------------------------------------------------------------------------------------------------------


def compute_h(a: Sequence[int], b: Sequence[int], c: Sequence[int], g: int = COSET_GENERATOR) -> list[int]:
    """H as in bellman/bellperson/arkworks (7 NTTs): a, b, c are evaluations on the size-n domain of
    A(x), B(x), C(x) (degree < n); returns the n coefficients of the degree < n polynomial whose values on the
    coset ``g H`` are ``(A B - C) / Z_H``. When ``a*b == c`` pointwise this is the exact quotient
    ``h = (A B - C) / Z_H`` (degree <= n - 2, so the last coefficient is 0); otherwise it is
    ``quotient + remainder / (g^n - 1)``.
    """
    n = len(a)
    if not (len(b) == n and len(c) == n):
        raise ValueError("a, b, c must have the same length")
    ea, eb, ec = (coset_ntt(intt(v), g) for v in (a, b, c))
    zinv = pow(vanishing_eval(n, g), R - 2, R)
    ev = [(x * y - z) * zinv % R for x, y, z in zip(ea, eb, ec)]
    return coset_intt(ev, g)


def compute_h_by_division(a: Sequence[int], b: Sequence[int], c: Sequence[int]) -> tuple[list[int], list[int]]:
    """Textbook H: interpolate, multiply, divide by ``x^n - 1``. Returns (h padded to n coefficients, remainder)."""
    n = len(a)
    A, B, Cc = intt(a), intt(b), intt(c)
    num = poly_mul(A, B)
    for i, v in enumerate(Cc):
        num[i] = (num[i] - v) % R
    q, rem = poly_divmod_vanishing(num, n)
    q = (q + [0] * n)[:n]
    return q, rem


def compute_h_snarkjs(a: Sequence[int], b: Sequence[int], c: Sequence[int],
                      generator: int = SNARKJS_GENERATOR) -> list[int]:
    """What snarkjs ``groth16 prove`` feeds its H MSM: ``P(w_2n^(2i+1))`` for i < n, where ``P = A B - C``,
    A, B, C interpolate a, b, c on snarkjs's size-n domain (roots from generator 5) and ``w_2n`` is snarkjs's
    primitive 2n-th root. No division by Z: the zkey's H points are the Lagrange basis of the size-2n domain at the
    odd indices, and ``sum_i P(w_2n^(2i+1)) L^(2n)_(2i+1)(tau) = h(tau) Z(tau)``. ``generator``: the domain's
    (:func:`compute_h_lagrange` passes ours, 7).
    """
    n = len(a)
    if not (len(b) == n and len(c) == n):
        raise ValueError("a, b, c must have the same length")
    shift = root_of_unity(2 * n, generator)
    ea, eb, ec = (coset_ntt(intt(v, generator=generator), shift, generator=generator) for v in (a, b, c))
    return [(x * y - z) % R for x, y, z in zip(ea, eb, ec)]


def compute_h_lagrange(a: Sequence[int], b: Sequence[int], c: Sequence[int]) -> list[int]:
    """:func:`compute_h_snarkjs` on our domain (generator 7): the H MSM's scalars for a key whose H query is the
    size-2n Lagrange basis at the odd points (``ProvingKey.h_form == "lagrange"``)."""
    return compute_h_snarkjs(a, b, c, generator=GENERATOR)
