"""Host curve arithmetic for the prover's last step, and the bridge between reference points and arkworks.

The prover's last step multiplies a few points by the per-proof randomness ``r``, ``s`` (five G1 and one G2 scalar
multiplications per partition). :func:`to_arkworks` / :func:`from_arkworks` move reference affine points to and
from py_arkworks_bls12381 (a runtime dependency, also the verifier's) through its big-endian ``x || y`` encoding
(an all-zero encoding is the point at infinity; G2 coordinates as ``c0 || c1``), where a G1 / G2 scalar
multiplication takes ~0.3 / ~0.7 ms against ~6 / ~15 ms for the Python-int Jacobian arithmetic below
("dbl-2009-l" / "add-2007-bl" of the Explicit-Formulas Database for a = 0). That arithmetic stays as the host
backend's MSM (tests, tiny circuits) and as an oracle independent of arkworks.
Points in and out are reference affine tuples (``None`` = infinity), see :mod:`cuzk_jax.reference.curve`.
"""

from __future__ import annotations

from cuzk_jax.reference.curve import g1 as ref_g1
from cuzk_jax.reference.field import fq, fq2


def _field(curve):
    return fq if curve is ref_g1 else fq2


def _zero(F):
    return 0 if F is fq else (0, 0)


def _one(F):
    return 1 if F is fq else (1, 0)


def _is_zero(F, a) -> bool:
    return a == 0 if F is fq else a == (0, 0)


def _double(F, p):
    X, Y, Z = p
    if _is_zero(F, Z):
        return p
    A = F.square(X)
    B = F.square(Y)
    Cc = F.square(B)
    D = F.double(F.sub(F.sub(F.square(F.add(X, B)), A), Cc))
    E = F.add(F.double(A), A)
    Fv = F.square(E)
    X3 = F.sub(Fv, F.double(D))
    Y3 = F.sub(F.mul(E, F.sub(D, X3)), F.double(F.double(F.double(Cc))))
    Z3 = F.double(F.mul(Y, Z))
    return (X3, Y3, Z3)


def _add(F, p, q):
    X1, Y1, Z1 = p
    X2, Y2, Z2 = q
    if _is_zero(F, Z1):
        return q
    if _is_zero(F, Z2):
        return p
    Z1Z1, Z2Z2 = F.square(Z1), F.square(Z2)
    U1, U2 = F.mul(X1, Z2Z2), F.mul(X2, Z1Z1)
    S1, S2 = F.mul(F.mul(Y1, Z2), Z2Z2), F.mul(F.mul(Y2, Z1), Z1Z1)
    H = F.sub(U2, U1)
    rr = F.double(F.sub(S2, S1))
    if _is_zero(F, H):
        if _is_zero(F, rr):
            return _double(F, p)
        return (_one(F), _one(F), _zero(F))
    I = F.square(F.double(H))
    J = F.mul(H, I)
    V = F.mul(U1, I)
    X3 = F.sub(F.sub(F.square(rr), J), F.double(V))
    Y3 = F.sub(F.mul(rr, F.sub(V, X3)), F.double(F.mul(S1, J)))
    Z3 = F.mul(F.sub(F.sub(F.square(F.add(Z1, Z2)), Z1Z1), Z2Z2), H)
    return (X3, Y3, Z3)


def to_jacobian(curve, p):
    F = _field(curve)
    if p is None:
        return (_one(F), _one(F), _zero(F))
    return (p[0], p[1], _one(F))


def to_affine(curve, p):
    F = _field(curve)
    X, Y, Z = p
    if _is_zero(F, Z):
        return None
    zi = F.inv(Z)
    zi2 = F.square(zi)
    return (F.mul(X, zi2), F.mul(Y, F.mul(zi2, zi)))


def from_device(curve, jac) -> list:
    """A device :class:`~cuzk_jax.ops.curve.Jacobian` batch ``(P,)`` (``curve`` an ``ops.curve`` curve; Montgomery
    limbs) -> ``P`` host affine points (``None`` for infinity). Runs here, with Python ints (P is small: partitions,
    and no field program has to be compiled on the device for it): one limb conversion per coordinate array and
    ONE inversion for the whole batch (Montgomery's trick) -- ~0.1 ms per point where a per-point conversion and
    inversion took ~1.2 ms, a third of the engine's finishing time on the H200."""
    import numpy as np

    from cuzk_jax import encoding

    ref = curve.ref
    F = _field(ref)
    x, y, z = (np.asarray(a) for a in jac)
    if x.ndim == (1 if curve.coord_ndim == 1 else 2):  # unbatched: one point
        x, y, z = x[..., None], y[..., None], z[..., None]

    def ints(a):
        if curve.coord_ndim == 1:
            return encoding.limbs_to_ints(a, "fq", True)
        return list(zip(*(encoding.limbs_to_ints(a[k], "fq", True) for k in range(2))))

    X, Y, Z = ints(x), ints(y), ints(z)
    out = []
    for Xi, Yi, Zi, zi in zip(X, Y, Z, F.batch_inv(Z)):
        if _is_zero(F, Zi):
            out.append(None)
            continue
        zi2 = F.square(zi)
        out.append((F.mul(Xi, zi2), F.mul(Yi, F.mul(zi2, zi))))
    return out


def affine_from_device(curve, affine) -> list:
    """A device :class:`~cuzk_jax.ops.curve.Affine` batch ``(N,)`` (``curve`` an ``ops.curve`` curve; Montgomery
    limbs) -> ``N`` host affine points (``None`` where ``inf`` is set), one limb conversion per coordinate array."""
    import numpy as np

    from cuzk_jax import encoding

    x, y, inf = (np.asarray(a) for a in affine)
    if curve.coord_ndim == 1:
        xs, ys = encoding.limbs_to_ints(x, "fq", True), encoding.limbs_to_ints(y, "fq", True)
    else:
        xs, ys = (list(zip(*(encoding.limbs_to_ints(a[k], "fq", True) for k in range(2)))) for a in (x, y))
    return [None if i else (xi, yi) for xi, yi, i in zip(xs, ys, inf.tolist())]


def mul(curve, p, k: int):
    """``k * p`` (``k >= 0``) by left-to-right double-and-add in Jacobian coordinates."""
    if k < 0:
        raise ValueError("mul: k must be non-negative")
    F = _field(curve)
    base = to_jacobian(curve, p)
    acc = (_one(F), _one(F), _zero(F))
    for bit in bin(k)[2:]:
        acc = _double(F, acc)
        if bit == "1":
            acc = _add(F, acc, base)
    return to_affine(curve, acc)


def to_arkworks(curve, p):
    """Reference affine point (``None`` = infinity) -> ``py_arkworks_bls12381`` G1Point / G2Point (unchecked: the
    point comes from our own arithmetic, whose results the tests compare with arkworks)."""
    import py_arkworks_bls12381 as ark

    g1_curve = curve is ref_g1
    n = 96 if g1_curve else 192
    if p is None:
        data = bytes(n)
    else:
        coords = p if g1_curve else (p[0][0], p[0][1], p[1][0], p[1][1])
        data = b"".join(int(v).to_bytes(48, "big") for v in coords)
    return (ark.G1Point if g1_curve else ark.G2Point).from_xy_bytes_unchecked_be(data)


def from_arkworks(curve, point):
    """``py_arkworks_bls12381`` point -> reference affine point (``None`` = infinity)."""
    data = point.to_xy_bytes_be()
    if not any(data):
        return None
    v = [int.from_bytes(data[i:i + 48], "big") for i in range(0, len(data), 48)]
    return (v[0], v[1]) if curve is ref_g1 else ((v[0], v[1]), (v[2], v[3]))


def linear_combination(curve, terms):
    """``sum_i k_i * P_i`` for ``terms = [(P_i, k_i), ...]`` (reference affine points, non-negative ints)."""
    F = _field(curve)
    acc = (_one(F), _one(F), _zero(F))
    for p, k in terms:
        if k == 1:
            acc = _add(F, acc, to_jacobian(curve, p))
        elif k:
            acc = _add(F, acc, to_jacobian(curve, mul(curve, p, k)))
    return to_affine(curve, acc)
