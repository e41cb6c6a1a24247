"""Host entry point for library users: ``cuzk_jax.msm(points, scalars, group="g1") -> bytes``.

Points are zcash/bellperson compressed encodings (48 bytes for G1, 96 for G2, as ``py_arkworks_bls12381``'s
``to_compressed_bytes``); they are decoded and checked (canonical coordinates, on the curve, in the order-r
subgroup) by :mod:`cuzk_jax.points`, the MSM runs on the default JAX device with :func:`cuzk_jax.ops.msm.msm`
(signed-digit Pippenger; the kernel :meth:`cuzk_jax.ops.config.MsmConfig.default` picks), and the result comes
back as its compressed encoding. Inputs are padded to the MSM's static size bucket (:func:`cuzk_jax.ops.msm.padded_size`), so calls with
similar lengths share one compiled program.
"""

from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax import encoding, points
from cuzk_jax.reference import constants as C

GROUPS = ("g1", "g2")


def _check_group(group) -> str:
    if group not in GROUPS:
        raise ValueError(f"msm: unknown group {group!r}; expected 'g1' or 'g2'")
    return group


def _check_scalars(scalars) -> list[int]:
    try:
        vals = list(scalars)
    except TypeError:
        raise ValueError(f"msm: scalars must be a sequence of ints, got {type(scalars).__name__}") from None
    for i, v in enumerate(vals):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"msm: scalar {i} must be an int, got {type(v).__name__}")
        if not 0 <= int(v) < C.R:
            raise ValueError(f"msm: scalar {i} is out of range [0, r): {int(v)}")
    return [int(v) for v in vals]


@functools.lru_cache(maxsize=None)
def _program(group: str):
    from cuzk_jax.ops import curve as ops_curve
    from cuzk_jax.ops import msm as ops_msm

    curve = ops_curve.CURVES[group]
    run = ops_msm.msm_jit(group)

    @jax.jit
    def to_affine(jac):
        with jax.enable_x64(True):
            return curve.to_affine(jac)

    def call(bases, scalar_limbs):
        return to_affine(run(bases, scalar_limbs))

    return call


def msm(points_enc: Sequence[bytes], scalars: Sequence[int], group: str = "g1") -> bytes:
    """``sum_i scalars[i] * points[i]`` as a compressed encoding.

    ``points_enc``: compressed encodings (bytes); ``scalars``: Python ints in ``[0, r)``; ``group``: ``"g1"`` or
    ``"g2"``. Raises ``ValueError`` for a bad group, mismatched lengths, a malformed / off-curve / out-of-subgroup
    encoding (naming its index) or a scalar that is not an int in range. An empty input gives the identity.
    """
    from cuzk_jax.ops import curve as ops_curve
    from cuzk_jax.ops import msm as ops_msm

    group = _check_group(group)
    if isinstance(points_enc, (bytes, bytearray)):
        raise ValueError("msm: points must be a sequence of encodings, not one bytes object")
    pts = list(points_enc)
    vals = _check_scalars(scalars)
    if len(pts) != len(vals):
        raise ValueError(f"msm: {len(pts)} points but {len(vals)} scalars")
    curve = ops_curve.CURVES[group]
    n = len(pts)
    if n == 0:
        return points.encode(curve.affine_identity(), group)
    affine = points.decode(pts, group, compressed=True, check=True)
    m = ops_msm.padded_size(n)
    lead = curve.coord_ndim
    pad = [(0, 0)] * lead + [(0, m - n)]
    bases = type(affine)(jnp.pad(affine.x, pad), jnp.pad(affine.y, pad), jnp.pad(affine.inf, (0, m - n), constant_values=True))
    limbs = np.zeros((8, m), np.uint32)
    limbs[:, :n] = encoding.ints_to_limbs(vals, "fr")
    result = _program(group)(bases, jnp.asarray(limbs))
    return points.encode(result, group)
