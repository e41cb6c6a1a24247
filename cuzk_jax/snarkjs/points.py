"""Curve points as snarkjs stores them, and conversions to Python ints and to py_arkworks_bls12381 points.

**Zkey point form** (``ffjavascript`` ``toRprLEM`` / ``fromRprLEM``, used for every point section of a zkey):
affine, uncompressed; each Fq coordinate is 48 bytes little-endian in **Montgomery form** ``x * 2^384 mod q``;
a G2 point is ``x.c0, x.c1, y.c0, y.c1``; the point at infinity is all zero bytes. Because our ops layer also keeps
Fq in Montgomery form with radix ``2^384`` in little-endian 32-bit limbs (``ops/field.py``), a zkey section *is*
our limb layout once transposed: :class:`G1Array` / :class:`G2Array` hold it as limb-major uint32 arrays,
``x``/``y`` of shape ``(12, N)`` (G1) or ``(2, 12, N)`` (G2), fully reduced (``< q``), plus an ``inf`` mask
``(N,)``; coordinates of infinity are zero.

**Host form** (Python ints, canonical): a G1 point is ``(x, y)``, a G2 point ``((x0, x1), (y0, y1))``, the point
at infinity is ``None``. These are what the JSON files hold (as decimal strings) and what the host prover uses.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from cuzk_jax.reference import constants as C
from cuzk_jax.reference.field import fq2

from . import binfile

Q = C.P
R_MONT = (1 << 384) % Q
R_MONT_INV = pow(R_MONT, -1, Q)
FQ_BYTES = 48
G1_BYTES = 96
G2_BYTES = 192

G1Affine = Optional[tuple[int, int]]
G2Affine = Optional[tuple[tuple[int, int], tuple[int, int]]]


class G1Array(NamedTuple):
    """N affine G1 points in zkey / ops form: ``x``, ``y`` uint32 ``(12, N)`` Montgomery, ``inf`` bool ``(N,)``."""

    x: np.ndarray
    y: np.ndarray
    inf: np.ndarray

    def __len__(self) -> int:  # type: ignore[override]
        return int(self.inf.shape[0])


class G2Array(NamedTuple):
    """N affine G2 points in zkey / ops form: ``x``, ``y`` uint32 ``(2, 12, N)`` Montgomery, ``inf`` ``(N,)``."""

    x: np.ndarray
    y: np.ndarray
    inf: np.ndarray

    def __len__(self) -> int:  # type: ignore[override]
        return int(self.inf.shape[0])


# ------------------------------------------------------------------------------------------------------------
# Curve checks on canonical ints
# ------------------------------------------------------------------------------------------------------------


def g1_on_curve(p: G1Affine) -> bool:
    if p is None:
        return True
    x, y = p
    return 0 <= x < Q and 0 <= y < Q and (y * y - x * x * x - C.B1) % Q == 0


def g2_on_curve(p: G2Affine) -> bool:
    if p is None:
        return True
    x, y = p
    if not all(0 <= v < Q for v in (*x, *y)):
        return False
    lhs = fq2.square(y)
    rhs = fq2.add(fq2.mul(fq2.square(x), x), C.B2)
    return lhs == rhs


# ------------------------------------------------------------------------------------------------------------
# Zkey bytes <-> arrays <-> ints
# ------------------------------------------------------------------------------------------------------------


def g1_array_from_bytes(buf, f: binfile.BinFile | None = None, what: str = "G1 points",
                        check_curve: bool = True) -> G1Array:
    """Parse N concatenated zkey-form G1 points (96 bytes each). Rejects coordinates ``>= q`` and (if
    ``check_curve``) points off the curve, naming the first bad index."""
    limbs = binfile.limbs_from_le(buf, FQ_BYTES).reshape(12, -1, 2)  # (12, N, [x, y])
    x, y = np.ascontiguousarray(limbs[:, :, 0]), np.ascontiguousarray(limbs[:, :, 1])
    arr = G1Array(x, y, ~(x.any(axis=0) | y.any(axis=0)))
    _check_reduced(arr, f, what)
    if check_curve:
        for i, p in enumerate(g1_ints(arr)):
            if not g1_on_curve(p):
                raise _err(f, f"{what}: point {i} is not on the BLS12-381 G1 curve (corrupt file)")
    return arr


def g2_array_from_bytes(buf, f: binfile.BinFile | None = None, what: str = "G2 points",
                        check_curve: bool = True) -> G2Array:
    """Parse N concatenated zkey-form G2 points (192 bytes each), as :func:`g1_array_from_bytes`."""
    limbs = binfile.limbs_from_le(buf, FQ_BYTES).reshape(12, -1, 2, 2)  # (12, N, [x, y], [c0, c1])
    x = np.ascontiguousarray(np.moveaxis(limbs[:, :, 0, :], 2, 0))  # (2, 12, N)
    y = np.ascontiguousarray(np.moveaxis(limbs[:, :, 1, :], 2, 0))
    arr = G2Array(x, y, ~(x.any(axis=(0, 1)) | y.any(axis=(0, 1))))
    _check_reduced(arr, f, what)
    if check_curve:
        for i, p in enumerate(g2_ints(arr)):
            if not g2_on_curve(p):
                raise _err(f, f"{what}: point {i} is not on the BLS12-381 G2 curve (corrupt file)")
    return arr


def _err(f, msg):
    return f.error(msg) if f is not None else binfile.FormatError(msg)


def _check_reduced(arr, f, what):
    for name, coord in (("x", arr.x), ("y", arr.y)):
        L = coord.shape[-2]
        ok = binfile.all_below(coord.reshape(-1, L, coord.shape[-1]).transpose(1, 0, 2), Q).all(axis=0)
        if not ok.all():
            i = int(np.argmin(ok))
            raise _err(f, f"{what}: point {i} has an {name} coordinate >= q (corrupt file)")


def _coord_ints(limbs: np.ndarray) -> list[int]:
    """(12, N) Montgomery limbs -> canonical ints."""
    return [v * R_MONT_INV % Q for v in binfile.le_ints(binfile.limbs_to_le(limbs), FQ_BYTES)]


def g1_ints(arr: G1Array) -> list[G1Affine]:
    xs, ys = _coord_ints(arr.x), _coord_ints(arr.y)
    return [None if inf else (x, y) for x, y, inf in zip(xs, ys, arr.inf.tolist())]


def g2_ints(arr: G2Array) -> list[G2Affine]:
    x0, x1, y0, y1 = (_coord_ints(c) for c in (arr.x[0], arr.x[1], arr.y[0], arr.y[1]))
    return [None if inf else ((a, b), (c, d)) for a, b, c, d, inf in zip(x0, x1, y0, y1, arr.inf.tolist())]


def _mont_limbs(vals: list[int]) -> np.ndarray:
    return binfile.limbs_from_le(b"".join((v * R_MONT % Q).to_bytes(FQ_BYTES, "little") for v in vals), FQ_BYTES)


def g1_array_from_ints(pts: list[G1Affine]) -> G1Array:
    xs = [0 if p is None else p[0] for p in pts]
    ys = [0 if p is None else p[1] for p in pts]
    return G1Array(_mont_limbs(xs), _mont_limbs(ys), np.array([p is None for p in pts], bool))


def g2_array_from_ints(pts: list[G2Affine]) -> G2Array:
    z = ((0, 0), (0, 0))
    ps = [z if p is None else p for p in pts]
    x = np.stack([_mont_limbs([p[0][k] for p in ps]) for k in range(2)])
    y = np.stack([_mont_limbs([p[1][k] for p in ps]) for k in range(2)])
    return G2Array(x, y, np.array([p is None for p in pts], bool))


def g1_to_zkey_bytes(p: G1Affine) -> bytes:
    if p is None:
        return bytes(G1_BYTES)
    return b"".join((v * R_MONT % Q).to_bytes(FQ_BYTES, "little") for v in p)


def g2_to_zkey_bytes(p: G2Affine) -> bytes:
    if p is None:
        return bytes(G2_BYTES)
    return b"".join((v * R_MONT % Q).to_bytes(FQ_BYTES, "little") for v in (*p[0], *p[1]))


# ------------------------------------------------------------------------------------------------------------
# py_arkworks_bls12381 (the host oracle for MSMs, additions and pairings)
# ------------------------------------------------------------------------------------------------------------


def ark_module():
    """The ``py_arkworks_bls12381`` module, imported on first use (an ``ImportError`` saying how to install it)."""
    try:
        import py_arkworks_bls12381 as ark
    except ImportError as e:  # pragma: no cover - a test dependency
        raise ImportError("the host snarkjs path needs py_arkworks_bls12381 (pip install py-arkworks-bls12381)") from e
    return ark


def g1_to_ark(p: G1Affine, *, checked: bool = True):
    """Host G1 -> ``G1Point``. ``checked`` also verifies curve and subgroup membership (arkworks)."""
    ark = ark_module()
    if p is None:
        return ark.G1Point.identity()
    b = p[0].to_bytes(FQ_BYTES, "little") + p[1].to_bytes(FQ_BYTES, "little")
    return ark.G1Point.from_xy_bytes_le(b) if checked else ark.G1Point.from_xy_bytes_unchecked_le(b)


def g2_to_ark(p: G2Affine, *, checked: bool = True):
    ark = ark_module()
    if p is None:
        return ark.G2Point.identity()
    b = b"".join(v.to_bytes(FQ_BYTES, "little") for v in (*p[0], *p[1]))
    return ark.G2Point.from_xy_bytes_le(b) if checked else ark.G2Point.from_xy_bytes_unchecked_le(b)


def g1_from_ark(pt) -> G1Affine:
    b = pt.to_xy_bytes_le()
    x, y = int.from_bytes(b[:48], "little"), int.from_bytes(b[48:96], "little")
    return None if x == 0 and y == 0 else (x, y)  # arkworks encodes infinity as all zeros (off-curve)


def g2_from_ark(pt) -> G2Affine:
    b = pt.to_xy_bytes_le()
    v = [int.from_bytes(b[i * 48:(i + 1) * 48], "little") for i in range(4)]
    return None if not any(v) else ((v[0], v[1]), (v[2], v[3]))


def g1_array_to_ark(arr: G1Array) -> list:
    """Zkey-form G1 array -> ``G1Point`` list (unchecked: the reader already checked the curve equation)."""
    ark = ark_module()
    xs, ys = _coord_ints(arr.x), _coord_ints(arr.y)
    make = ark.G1Point.from_xy_bytes_unchecked_le
    return [make(x.to_bytes(48, "little") + y.to_bytes(48, "little")) for x, y in zip(xs, ys)]


def g2_array_to_ark(arr: G2Array) -> list:
    ark = ark_module()
    cs = [_coord_ints(c) for c in (arr.x[0], arr.x[1], arr.y[0], arr.y[1])]
    make = ark.G2Point.from_xy_bytes_unchecked_le
    return [make(b"".join(v.to_bytes(48, "little") for v in vals)) for vals in zip(*cs)]
