"""The XYZZ -> affine Pallas kernel (ops/pallas/affine.py), interpreted on CPU, against the Python-int curve.

Inputs are built from reference points with random Z in Python ints (``X = x Z^2``, ``Y = y Z^3``, ``ZZ = Z^2``,
``ZZZ = Z^3``), so a kernel that skipped its inversion or mixed up lanes could not return the expected
coordinates; columns at infinity (``ZZ = ZZZ = 0``) sit inside a lane's run, at its ends and in other lanes."""

from __future__ import annotations

import random

import jax.numpy as jnp
import numpy as np
import pytest

from cuzk_jax import encoding
from cuzk_jax.groth16.host_curve import affine_from_device
from cuzk_jax.ops import curve as C
from cuzk_jax.ops import fixed_base
from cuzk_jax.ops.pallas import affine as pa
from cuzk_jax.reference.constants import R
from cuzk_jax.reference.field import fq

Q = fq.modulus


def _coord_rows(vals, g2: bool) -> np.ndarray:
    """Fq (or Fq2 as pairs) ints -> Montgomery limb rows ``(12, N)`` / ``(24, N)`` (c0 limbs, then c1 limbs)."""
    if not g2:
        return encoding.ints_to_limbs(vals, fq, montgomery=True)
    return np.concatenate([encoding.ints_to_limbs([v[0] for v in vals], fq, montgomery=True),
                           encoding.ints_to_limbs([v[1] for v in vals], fq, montgomery=True)])


def _fq2_mul(a, b):
    return ((a[0] * b[0] - a[1] * b[1]) % Q, (a[0] * b[1] + a[1] * b[0]) % Q)


def _xyzz_rows(curve, points, rnd):
    """Reference affine points (None = infinity) -> kernel rows ``(4 Lc, N + 2)`` with random Z (two trailing
    columns of garbage, as the setup's bucket array has: the kernel must read only the first N)."""
    g2 = curve.coord_ndim == 2
    cols = {k: [] for k in "XYAB"}
    for p in points:
        if p is None:
            zero = (0, 0) if g2 else 0
            for k in "XYAB":
                cols[k].append(zero)
            continue
        if g2:
            z = (rnd.randrange(1, Q), rnd.randrange(Q))
            zz = _fq2_mul(z, z)
            zzz = _fq2_mul(zz, z)
            cols["X"].append(_fq2_mul(p[0], zz))
            cols["Y"].append(_fq2_mul(p[1], zzz))
        else:
            z = rnd.randrange(1, Q)
            zz, zzz = z * z % Q, z * z * z % Q
            cols["X"].append(p[0] * zz % Q)
            cols["Y"].append(p[1] * zzz % Q)
        cols["A"].append(zz)
        cols["B"].append(zzz)
    rows = np.concatenate([_coord_rows(cols[k], g2) for k in "XYAB"])
    junk = np.full((rows.shape[0], 2), 0xDEADBEEF, np.uint32)
    return jnp.asarray(np.concatenate([rows, junk], axis=1))


def _points(curve, n, rnd):
    g = curve.ref
    ks = [rnd.randrange(1, R) for _ in range(n)]
    pts = [g.mul(g.generator, k) for k in ks]
    for i in (0, 5, n // 2, n - 1):  # infinity at a run's start, inside it, in another lane, at the very end
        pts[i] = None
    pts[7] = g.neg(pts[6]) if pts[6] is not None else pts[7]  # a point and its negative: independent columns
    return pts


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_kernel_matches_reference_points(group):
    curve = C.CURVES[group]
    rnd = random.Random(31 if group == "g1" else 32)
    n = 64
    pts = _points(curve, n, rnd)
    rows = _xyzz_rows(curve, pts, rnd)
    out = pa.to_affine(curve, rows, n, block=4, run=8, interpret=True)  # 8 lanes, 2 programs, runs of 8
    assert affine_from_device(curve, out) == pts
    assert [bool(b) for b in np.asarray(out.inf)] == [p is None for p in pts]
    zero_cols = np.asarray(out.x).reshape(-1, n)[:, np.asarray(out.inf)]
    assert not zero_cols.any()  # the Affine invariant: zero coordinates at infinity


def test_default_run_and_one_point_per_lane():
    """The default run length aims at TARGET_LANES lanes within [MIN_RUN, MAX_RUN] and divides the count; a run
    of 1 (every lane one point: the Fermat inversion alone) gives the same points."""
    assert pa.default_run(1 << 20) == 64 and pa.default_run(1 << 24) == pa.MAX_RUN
    assert pa.default_run(1 << 12) == pa.MIN_RUN and pa.default_run(8, block=8) == 1
    curve = C.g1
    rnd = random.Random(5)
    pts = _points(curve, 16, rnd)
    out = pa.to_affine(curve, _xyzz_rows(curve, pts, rnd), 16, block=16, run=1, interpret=True)
    assert affine_from_device(curve, out) == pts


def test_bad_shapes_are_refused():
    curve = C.g1
    rows = jnp.zeros((48, 64), jnp.uint32)
    with pytest.raises(ValueError, match="rows must be uint32"):
        pa.to_affine(curve, rows, 128, interpret=True)
    with pytest.raises(ValueError, match="rows must be uint32"):
        pa.to_affine(C.g2, rows, 64, interpret=True)
    with pytest.raises(ValueError, match="multiple of block"):
        pa.to_affine(curve, rows, 48, block=32, run=1, interpret=True)


def test_bucket_fixed_base_kernel_conversion():
    """``mul_bucket`` (its sums turned affine by this kernel, interpreted here): the reference curve's points."""
    rnd = random.Random(8)
    ks = [0, 1, R - 1] + [rnd.randrange(R) for _ in range(5)]
    limbs = encoding.ints_to_limbs(ks, "fr")
    got = affine_from_device(C.g1, fixed_base.mul_bucket(C.g1, limbs, window=4, chunk=8, block=8))
    g = C.g1.ref
    assert got == [g.mul(g.generator, k) for k in ks]
