"""The batch-affine point-sum kernel (ops/pallas/affine_sum.py), interpreted on CPU, against the Python-int curve.

The points are chosen so that the rounds meet every case of the addition: a point added to itself (the doubling),
a point and its negative (infinity), points at infinity on either side of a pair, an unpaired middle column at
odd counts, and lanes that run out of pairs before others."""

from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cuzk_jax.ops import curve as C
from cuzk_jax.ops.pallas import affine_sum as AS
from cuzk_jax.reference.constants import R

from test_affine_kernel import _coord_rows


def _rows(curve, points, width):
    """Reference affine points (None = infinity) -> the point-major ``(width, 2 Lc)`` array, zero past the points."""
    g2 = curve.coord_ndim == 2
    zero = (0, 0) if g2 else 0
    xs = [zero if p is None else p[0] for p in points] + [zero] * (width - len(points))
    ys = [zero if p is None else p[1] for p in points] + [zero] * (width - len(points))
    return jnp.asarray(np.concatenate([_coord_rows(xs, g2), _coord_rows(ys, g2)]).T)


def _sum(curve, points):
    g = curve.ref
    acc = None
    for p in points:
        acc = g.add(acc, p)
    return acc


def _got(curve, x, y):
    from cuzk_jax.groth16.host_curve import affine_from_device

    shape = (2, 12, 1) if curve.coord_ndim == 2 else (12, 1)
    inf = jnp.asarray([bool(np.all(np.asarray(x) == 0) and np.all(np.asarray(y) == 0))])
    return affine_from_device(curve, C.Affine(x.reshape(shape), y.reshape(shape), inf))[0]


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_sum_points_matches_reference(group):
    curve = C.CURVES[group]
    g = curve.ref
    rnd = random.Random(41)
    base = [g.mul(g.generator, rnd.randrange(1, R)) for _ in range(20)]
    pts = list(base)
    pts[3] = pts[11] = None  # infinity inside
    pts += [base[0], base[0]]  # equal points: a doubling in some round
    pts += [g.neg(base[1])]  # a point and its negative: infinity in some round
    pts += [base[2]] * 4
    width = 64  # 2 * block * run = 2 * 4 * 8
    fn = jax.jit(lambda rows, c: AS.sum_points(curve, rows, c, run=8, block=4, interpret=True))
    for count in (len(pts), 1, 2, 3, 17):  # odd counts leave a middle column unpaired
        x, y = fn(_rows(curve, pts[:count], width), jnp.int32(count))
        assert _got(curve, x, y) == _sum(curve, pts[:count]), count
    # a pair that is the doubling itself, and one that cancels to infinity
    for two in ([base[4], base[4]], [base[5], g.neg(base[5])]):
        x, y = fn(_rows(curve, two, width), jnp.int32(2))
        assert _got(curve, x, y) == _sum(curve, two)


def test_pair_round_layout_and_bad_width():
    """One round: column e gets columns e and e + ceil(c / 2); the unpaired middle column of an odd count stays."""
    curve = C.g1
    g = curve.ref
    rnd = random.Random(42)
    pts = [g.mul(g.generator, rnd.randrange(1, R)) for _ in range(5)]
    rows = AS.pair_round(curve, _rows(curve, pts, 64), jnp.int32(5), run=8, block=4, interpret=True)
    want = [g.add(pts[0], pts[3]), g.add(pts[1], pts[4]), pts[2]]
    assert [_got(curve, rows[e, :12], rows[e, 12:]) for e in range(3)] == want
    with pytest.raises(ValueError, match="multiple of 2 \\* block \\* run"):
        AS.pair_round(curve, _rows(curve, pts, 48), jnp.int32(5), run=8, block=4, interpret=True)


def test_kernel_and_split_msm_lower_for_cuda():
    """The round kernel lowers for CUDA with the PTX field blocks (both groups), and the split MSM with
    ``ones="affine"`` lowers with it as one more Triton kernel beside the bucket kernels, no conditional."""
    from cuzk_jax.ops import msm_split as S
    from cuzk_jax.ops.config import MsmConfig
    from test_msm import _cuda_mlir

    Sd = jax.ShapeDtypeStruct
    for group, Lc in (("g1", 12), ("g2", 24)):
        text = _cuda_mlir(lambda rows, c, g=group: AS.sum_points(C.CURVES[g], rows, c),
                          Sd((2 * AS.DEFAULT_BLOCK * AS.DEFAULT_RUN, 2 * Lc), jnp.uint32), Sd((), jnp.int32))
        assert text.count("xla.gpu.triton") == 1 and "madc.hi.cc.u32" in text
    n = 1 << 12
    args = (C.Affine(Sd((12, n), jnp.uint32), Sd((12, n), jnp.uint32), Sd((n,), jnp.bool_)), Sd((8, n), jnp.uint32))
    counts = {ones: _cuda_mlir(lambda b, s, o=ones: S.msm_split(b, s, "g1", config=MsmConfig("pallas", ones=o),
                                                              capacity=256), *args).count("xla.gpu.triton")
              for ones in ("bucket", "affine")}
    assert counts == {"bucket": 4, "affine": 5}
