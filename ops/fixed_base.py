"""Fixed-base batched scalar multiplication: ``s_i * G`` for many scalars and one base (Groth16 setup).

Windowed method (e.g. Menezes, van Oorschot, Vanstone, Handbook of Applied Cryptography, 14.6.3 "fixed-base
windowing"; also how bellman/arkworks generators compute the query points): with ``c``-bit windows, precompute the
table ``T[k][d] = d * 2^(c k) * G`` (``d < 2^c``, ``k < 256/c``) once on the host; then
``s * G = sum_k T[k][digit_k(s)]`` -- ``256/c`` mixed additions per scalar and no doublings. The additions run as
one ``lax.fori_loop`` over the windows (one addition formula in the program), batched over all scalars.

Scalars are canonical (not Montgomery) Fr limbs ``(8, N)`` uint32; the result is a device :class:`Affine` batch.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from cuzk_jax import encoding
from cuzk_jax.reference.field import fq

from . import curve as C

WINDOW = 8
NUM_WINDOWS = 256 // WINDOW


def _ref_coords_to_limbs(points, coord_ndim: int):
    """Reference affine points (None = infinity) -> Montgomery limb arrays (x, y) and an infinity mask (numpy)."""
    inf = np.array([p is None for p in points])
    if coord_ndim == 1:
        xs = [0 if p is None else p[0] for p in points]
        ys = [0 if p is None else p[1] for p in points]
        return (encoding.ints_to_limbs(xs, fq, montgomery=True), encoding.ints_to_limbs(ys, fq, montgomery=True), inf)

    def fq2(vals):
        return np.stack([encoding.ints_to_limbs([v[0] for v in vals], fq, montgomery=True),
                         encoding.ints_to_limbs([v[1] for v in vals], fq, montgomery=True)])

    xs = [(0, 0) if p is None else p[0] for p in points]
    ys = [(0, 0) if p is None else p[1] for p in points]
    return fq2(xs), fq2(ys), inf


def reference_to_affine(curve: C.Curve, points) -> C.Affine:
    """Host reference points -> a device Affine batch (trailing batch axis of length ``len(points)``)."""
    x, y, inf = _ref_coords_to_limbs(list(points), curve.coord_ndim)
    # zero the coordinates of infinity (the Affine invariant)
    return C.Affine(jnp.asarray(x), jnp.asarray(y), jnp.asarray(inf))


@functools.lru_cache(maxsize=8)
def _table_cached(curve_name: str, base: tuple):
    curve = C.g1 if curve_name == "g1" else C.g2
    ref = curve.ref
    pts = []
    row_base = base
    for _ in range(NUM_WINDOWS):
        acc = None
        row = []
        for _d in range(1 << WINDOW):
            row.append(acc)
            acc = ref.add(acc, row_base)
        pts += row
        row_base = acc  # 2^c * previous row base
    return reference_to_affine(curve, pts)


def table(curve: C.Curve, base=None) -> C.Affine:
    """The window table for ``base`` (default: the generator), flattened to batch ``NUM_WINDOWS * 2^WINDOW``."""
    base = curve.ref.generator if base is None else base
    return _table_cached(curve.name, base)


@functools.partial(jax.jit, static_argnums=(0,))
def _mul_table(curve_name: str, tab: C.Affine, scalars):
    # setup is one-off: the compact (rolled) multiplication compiles in seconds instead of minutes on a GPU
    curve = (C.g1 if curve_name == "g1" else C.g2).with_schedule("rolled")
    n = scalars.shape[1]
    mask = (1 << WINDOW) - 1
    per_limb = 32 // WINDOW

    def body(k, acc):
        limb = lax.dynamic_index_in_dim(scalars, k // per_limb, 0, keepdims=False)
        digit = (limb >> ((k % per_limb) * WINDOW).astype(jnp.uint32)) & mask
        idx = k * (1 << WINDOW) + digit.astype(jnp.int32)
        pt = jax.tree_util.tree_map(lambda a: jnp.take(a, idx, axis=-1), tab)
        return curve.jacobian_add_mixed(acc, pt)

    acc = lax.fori_loop(0, NUM_WINDOWS, body, curve.jacobian_identity((n,)))
    return curve.to_affine(acc)


def default_chunk(n: int | None = None) -> int:
    """Scalars per compiled call: 2048 on CPU (one program for every size, which keeps the tests' compile time
    down); on an accelerator the next power of two of ``n`` in ``[2^14, 2^20]`` (larger chunks set up a large key
    several times faster: BUILD.md)."""
    if jax.default_backend() == "cpu":
        return 2048
    return min(1 << 20, max(1 << 14, 1 << max(0, (n or 1) - 1).bit_length()))


def mul(curve: C.Curve, scalars, base=None, chunk: int | None = None) -> C.Affine:
    """``scalars[:, i] * base`` for canonical Fr limbs ``(8, N)`` -> Affine batch of N points.

    Runs in chunks of exactly ``chunk`` scalars (the last one zero-padded; default :func:`default_chunk`), so the
    calls reuse a few compiled programs (one per power-of-two chunk size).
    """
    scalars = jnp.asarray(scalars, jnp.uint32)
    if scalars.ndim != 2 or scalars.shape[0] != 8:
        raise ValueError(f"scalars must be canonical Fr limbs of shape (8, N), got {scalars.shape}")
    n = scalars.shape[1]
    chunk = chunk or default_chunk(n)
    tab = table(curve, base)
    if n == 0:
        return curve.affine_identity((0,))
    size = chunk
    outs = []
    for start in range(0, n, size):
        part = scalars[:, start:start + size]
        if part.shape[1] < size:
            part = jnp.pad(part, ((0, 0), (0, size - part.shape[1])))
        outs.append(_mul_table(curve.name, tab, part))
    out = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=-1)[..., :n], *outs)
    return out
