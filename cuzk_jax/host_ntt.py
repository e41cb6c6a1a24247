"""``cuzk_jax.ntt``: the NTT over BLS12-381 Fr on Python ints, for library users.

``ntt(values, inverse=False, coset=False)`` with natural order in and out:

* forward: ``out[i] = sum_j values[j] * w^(i*j) mod r`` with ``w = 7^((r-1)/n)``, the primitive n-th root of unity
  from Fr's multiplicative generator 7 (as zcash ``ff``, arkworks and bellman);
* ``inverse=True``: the inverse transform (``w -> w^-1`` and division by n), so ``ntt(ntt(v), inverse=True) == v``;
* ``coset=True``: the coset ``g H`` with ``g = 7`` (arkworks/bellman's coset shift): the forward transform returns
  ``sum_j values[j] * (g w^i)^j`` (evaluations at ``g w^i``), the inverse returns the coefficients of the polynomial
  of degree < n taking ``values[i]`` at ``g w^i``. ``coset`` may also be an int shift g (with ``g^n != 1``).

Sizes are powers of two from 1 to 2^32 (Fr's 2-adicity; device memory limits what actually fits). Values must be
ints in ``[0, r)``. Anything else raises ``ValueError``. The work is done by :func:`cuzk_jax.ops.ntt.ntt` on the
default JAX device (each new size compiles once).
"""

from __future__ import annotations

from typing import Sequence

from cuzk_jax.reference import ntt as ref_ntt

COSET_GENERATOR = ref_ntt.COSET_GENERATOR
R = ref_ntt.R


def ntt(values: Sequence[int], inverse: bool = False, coset: bool | int = False) -> list[int]:
    """NTT of ``values`` over Fr (see the module docstring); returns a new list of ints."""
    try:
        n = len(values)
    except TypeError:
        raise ValueError(f"values must be a sequence of ints, got {type(values).__name__}") from None
    if n == 0 or n & (n - 1):
        raise ValueError(f"NTT size must be a power of two, got {n}")
    if n > 1 << ref_ntt.TWO_ADICITY:
        raise ValueError(f"NTT size {n} exceeds 2^{ref_ntt.TWO_ADICITY}, the largest power-of-two domain of Fr")
    if isinstance(coset, bool):
        g = COSET_GENERATOR if coset else None
    elif isinstance(coset, int):
        g = coset % R
        if g == 0 or pow(g, n, R) == 1:
            raise ValueError(f"coset shift {coset} must satisfy g^n != 1 mod r")
    else:
        raise ValueError(f"coset must be a bool or an int, got {type(coset).__name__}")
    if not isinstance(inverse, bool):
        raise ValueError(f"inverse must be a bool, got {type(inverse).__name__}")

    import numpy as np

    from cuzk_jax import encoding

    vals = list(values)
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"NTT values must be ints, got {type(v).__name__}")
        if not 0 <= int(v) < R:
            raise ValueError(f"NTT value out of range [0, r): {int(v)}")
    vals = [int(v) for v in vals]
    limbs = encoding.ints_to_limbs(vals, "fr", montgomery=True)
    if n == 1:
        return [int(v) for v in vals]  # a constant polynomial: every variant is the identity

    from cuzk_jax.ops import ntt as ops_ntt

    out = ops_ntt.ntt(limbs, inverse=inverse, coset=g)
    return encoding.limbs_to_ints(np.asarray(out), "fr", montgomery=True)
