"""Host API for BLS12-381 point encodings and conversions to/from device point arrays.

Encodings (zcash / bellperson, the "pairing" crate's serialization; byte-identical to ``py_arkworks_bls12381``):

* A coordinate in Fq is 48 bytes big-endian; in Fq2 (``c0 + c1 u``) it is ``c1 || c0`` (96 bytes).
* Compressed: the x coordinate (48 B for G1, 96 B for G2). Uncompressed: ``x || y`` (96 B / 192 B).
* The three most significant bits of the first byte are flags: bit 7 ``C`` (compressed), bit 6 ``I``
  (infinity), bit 5 ``S`` (sort: y is the lexicographically largest of ``{y, -y}``; for Fq2 compare c1 first,
  then c0; only in compressed encodings). Infinity is ``C|I`` (0xC0) / ``I`` (0x40) followed by zeros.

Decoding rejects, with one ``ValueError`` naming the problem and the index of the first bad encoding: a wrong
length, a wrong compression flag, the infinity flag with any other bit set, the sort flag in an uncompressed
encoding, a coordinate ``>= p``, an x with no curve point (compressed), a point off the curve (uncompressed) and
(``check=True``) a point outside the order-r subgroup.

Vectorised: byte <-> limb packing is numpy on whole arrays; square roots, the curve equation and the subgroup
test (Scott's endomorphism test, see ops/curve.py) run as one jitted XLA program on the device over the batch.
Batches are padded to a power of two (at least 8) so a new N reuses a compiled program for its size bucket.

Device arrays are :class:`cuzk_jax.ops.curve.Affine` with Montgomery-form limb-major coordinates
(``(12, N)`` for G1, ``(2, 12, N)`` for G2) and an ``inf`` mask; infinity has zero coordinates.
Reference points are affine tuples of canonical ints (``(c0, c1)`` pairs for G2), ``None`` for infinity, as in
:mod:`cuzk_jax.reference.curve`.
"""

from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax import encoding
from cuzk_jax.ops import curve as ops_curve
from cuzk_jax.ops.curve import Affine
from cuzk_jax.reference import constants as C

_P = C.P
_HALF = (C.P - 1) // 2
_FQ_BYTES = 48


def _group(group: str):
    if group not in ("g1", "g2"):
        raise ValueError(f"unknown group {group!r}; expected 'g1' or 'g2'")
    return ops_curve.CURVES[group]


def _degree(group: str) -> int:
    return 1 if group == "g1" else 2


def encoded_size(group: str, compressed: bool = True) -> int:
    """Bytes of one encoding: G1 48 / 96, G2 96 / 192 (compressed / uncompressed)."""
    _group(group)
    return _FQ_BYTES * _degree(group) * (1 if compressed else 2)


def _bucket(n: int) -> int:
    return max(8, 1 << max(0, (n - 1).bit_length()))


# ---------------------------------------------------------------------------------------------------------------
# numpy packing: (N, 48) big-endian bytes <-> (12, N) little-endian uint32 limbs
# ---------------------------------------------------------------------------------------------------------------


def _be48_to_limbs(raw: np.ndarray) -> np.ndarray:
    le = np.ascontiguousarray(raw[:, ::-1])
    return np.ascontiguousarray(le.view("<u4").reshape(-1, 12).T).astype(np.uint32)


def _limbs_to_be48(limbs: np.ndarray) -> np.ndarray:
    le = np.ascontiguousarray(limbs.T).astype("<u4").view(np.uint8).reshape(-1, _FQ_BYTES)
    return np.ascontiguousarray(le[:, ::-1])


def coord_to_limbs(raw: np.ndarray, degree: int) -> np.ndarray:
    """(N, 48*degree) big-endian bytes of one coordinate (flag bits cleared) -> (12, N) or (2, 12, N) canonical
    limbs (c0 first); no range check."""
    if degree == 1:
        return _be48_to_limbs(raw)
    c1 = _be48_to_limbs(raw[:, :_FQ_BYTES])
    c0 = _be48_to_limbs(raw[:, _FQ_BYTES:])
    return np.stack([c0, c1])


def _limbs_to_coord(limbs: np.ndarray, degree: int) -> np.ndarray:
    if degree == 1:
        return _limbs_to_be48(limbs)
    return np.concatenate([_limbs_to_be48(limbs[1]), _limbs_to_be48(limbs[0])], axis=1)


def _canonical_mask(limbs: np.ndarray, degree: int) -> np.ndarray:
    if degree == 1:
        return encoding.limbs_less_than(limbs, _P)
    return encoding.limbs_less_than(limbs[0], _P) & encoding.limbs_less_than(limbs[1], _P)


def _largest_mask(limbs: np.ndarray, degree: int) -> np.ndarray:
    """zcash sort flag from canonical y limbs: y > (p-1)/2 (Fq2: c1 > half, or c1 == 0 and c0 > half)."""
    if degree == 1:
        return ~encoding.limbs_less_than(limbs, _HALF + 1)
    c0_big = ~encoding.limbs_less_than(limbs[0], _HALF + 1)
    c1_big = ~encoding.limbs_less_than(limbs[1], _HALF + 1)
    c1_zero = np.all(limbs[1] == 0, axis=0)
    return c1_big | (c1_zero & c0_big)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


# ---------------------------------------------------------------------------------------------------------------
# device programs (one jit per group / mode; shapes bucketed)
# ---------------------------------------------------------------------------------------------------------------


def _gt_const_device(limbs, c: int):
    """Vectorised ``value > c`` for canonical limb arrays (12, *batch): decided by the most significant limb
    where they differ (no per-limb carry chain, so the program stays small)."""
    cl = np.array([(c >> (32 * i)) & 0xFFFFFFFF for i in range(12)], np.uint32).reshape((12,) + (1,) * (limbs.ndim - 1))
    cl = jnp.asarray(cl)
    neq = limbs != cl
    gt = limbs > cl
    top = 11 - jnp.argmax(neq[::-1], axis=0)  # most significant differing limb
    pick = jnp.take_along_axis(gt, top[None], axis=0)[0]
    return jnp.any(neq, axis=0) & pick


def _largest_device(curve, y_mont):
    F = curve.field
    y = F.from_mont(y_mont)
    if curve.coord_ndim == 1:
        return _gt_const_device(y, _HALF)
    c1_zero = jnp.all(y[1] == 0, axis=0)
    return _gt_const_device(y[1], _HALF) | (c1_zero & _gt_const_device(y[0], _HALF))


@functools.lru_cache(maxsize=None)
def decode_program(group: str, compressed: bool, check: bool):
    """The jitted device half of :func:`decode` (cached per arguments): canonical limbs ``x, y`` (``y`` ignored when
    ``compressed``), infinity and sort flags -> ``(Affine point, ok, in_subgroup)``; ``check=False`` skips the
    subgroup test (``in_subgroup`` all true)."""
    curve = _group(group)
    if check:
        # The subgroup test is 64-128 curve doublings per point: with the rolled products its program compiles in
        # seconds on a GPU (the unrolled form took minutes); the plain decode keeps the default schedule.
        curve = curve.with_schedule("rolled")
    F = curve.field

    def run(x, y, inf, sort):
        zero = F.zeros_like(x)
        x = F.select(inf, zero, F.to_mont(x))
        if compressed:
            y, ok = curve.lift_x(x)
            flip = _largest_device(curve, y) != sort
            y = F.select(flip, F.neg(y), y)
            ok = ok | inf
        else:
            y = F.to_mont(y)
            ok = curve.is_on_curve(Affine(x, y, inf))
        y = F.select(inf, zero, y)
        pt = Affine(x, y, inf)
        insub = curve.in_subgroup(pt) if check else jnp.ones_like(inf)
        return pt, ok, insub

    return jax.jit(run)


@functools.lru_cache(maxsize=None)
def _from_mont_program(group: str):
    F = _group(group).field
    return jax.jit(lambda a: (F.from_mont(a.x), F.from_mont(a.y), a.inf))


# ---------------------------------------------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------------------------------------------


def _as_byte_matrix(data, size: int, what: str) -> tuple[np.ndarray, bool]:
    """-> ((N, size) uint8, single?)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        if len(data) != size:
            raise ValueError(f"{what}: an encoding must be {size} bytes, got {len(data)}")
        return np.frombuffer(data, np.uint8).reshape(1, size), True
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != size:
            raise ValueError(f"{what}: expected a uint8 array of shape (N, {size}), got {data.dtype} {data.shape}")
        return np.ascontiguousarray(data), False
    items = list(data)
    for i, it in enumerate(items):
        if not isinstance(it, (bytes, bytearray, memoryview)):
            raise ValueError(f"{what}: encoding {i} is {type(it).__name__}, not bytes")
        if len(it) != size:
            raise ValueError(f"{what}: encoding {i} must be {size} bytes, got {len(it)}")
    buf = b"".join(bytes(it) for it in items)
    return np.frombuffer(buf, np.uint8).reshape(len(items), size), False


def decode(data, group: str = "g1", compressed: bool = True, check: bool = True) -> Affine:
    """Encodings -> device :class:`Affine` points (Montgomery form).

    ``data``: one encoding (``bytes``; the result has batch shape ``()``), a sequence of encodings, or a uint8
    array ``(N, size)`` (batch shape ``(N,)``). ``check=False`` skips only the subgroup test (the curve
    equation and every format rule are always checked). Raises ``ValueError`` naming the problem and the index.
    """
    curve = _group(group)
    deg = _degree(group)
    size = encoded_size(group, compressed)
    what = f"decode_{group}"
    raw, single = _as_byte_matrix(data, size, what)
    n = raw.shape[0]
    where = (lambda i: "") if single else (lambda i: f" (encoding {i})")

    flags = raw[:, 0] >> 5
    c_flag = (flags >> 2) & 1
    i_flag = ((flags >> 1) & 1).astype(bool)
    s_flag = (flags & 1).astype(bool)
    body = raw.copy()
    if n:
        body[:, 0] &= 0x1F
    bad = c_flag != int(compressed)
    if bad.any():
        i = _first(bad)
        raise ValueError(
            f"{what}: compression flag is {int(c_flag[i])}, expected {int(compressed)} for a "
            f"{'compressed' if compressed else 'uncompressed'} encoding{where(i)}"
        )
    bad = i_flag & (s_flag | body.any(axis=1))
    if bad.any():
        raise ValueError(f"{what}: infinity flag set together with other non-zero bits{where(_first(bad))}")
    if not compressed:
        bad = s_flag & ~i_flag
        if bad.any():
            raise ValueError(f"{what}: sort flag set on an uncompressed encoding{where(_first(bad))}")
    half = _FQ_BYTES * deg
    x = coord_to_limbs(body[:, :half], deg)
    y = coord_to_limbs(body[:, half:], deg) if not compressed else np.zeros_like(x)
    bad = ~_canonical_mask(x, deg) | ~_canonical_mask(y, deg)
    if bad.any():
        raise ValueError(f"{what}: coordinate is not a canonical field element (>= p){where(_first(bad))}")

    m = _bucket(n)
    pad = [(0, 0)] * (x.ndim - 1) + [(0, m - n)]
    xs = jnp.asarray(np.pad(x, pad))
    ys = jnp.asarray(np.pad(y, pad))
    infs = jnp.asarray(np.pad(i_flag, (0, m - n), constant_values=True))
    sorts = jnp.asarray(np.pad(s_flag, (0, m - n)))
    pt, ok, insub = decode_program(group, compressed, check)(xs, ys, infs, sorts)
    ok = np.asarray(ok)[:n]
    if not ok.all():
        i = _first(~ok)
        problem = "x is not the abscissa of a curve point" if compressed else "point is not on the curve"
        raise ValueError(f"{what}: {problem}{where(i)}")
    insub = np.asarray(insub)[:n]
    if not insub.all():
        raise ValueError(f"{what}: point is not in the prime-order subgroup{where(_first(~insub))}")
    lead = curve.coord_ndim
    if single:
        return Affine(pt.x[(slice(None),) * lead + (0,)], pt.y[(slice(None),) * lead + (0,)], pt.inf[0])
    return Affine(pt.x[(slice(None),) * lead + (slice(0, n),)], pt.y[(slice(None),) * lead + (slice(0, n),)], pt.inf[:n])


def decode_g1(data, compressed: bool = True, check: bool = True) -> Affine:
    """:func:`decode` for G1 (48-byte compressed / 96-byte uncompressed encodings)."""
    return decode(data, "g1", compressed, check)


def decode_g2(data, compressed: bool = True, check: bool = True) -> Affine:
    """:func:`decode` for G2 (96-byte compressed / 192-byte uncompressed encodings)."""
    return decode(data, "g2", compressed, check)


# ---------------------------------------------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------------------------------------------


def _canonical_host(affine: Affine, group: str):
    """Device Affine -> host canonical limbs (x, y) flattened to (…, N) and inf (N,)."""
    curve = _group(group)
    if not isinstance(affine, Affine):
        raise ValueError(f"expected an ops.curve.Affine, got {type(affine).__name__}")
    lead = curve.coord_ndim
    x = jnp.asarray(affine.x)
    if x.ndim < lead or x.shape[:lead] != ((12,) if lead == 1 else (2, 12)):
        raise ValueError(f"{group}: coordinate arrays must have shape {(12,) if lead == 1 else (2, 12)} + batch, got {x.shape}")
    bshape = x.shape[lead:]
    flat = Affine(
        x.reshape(x.shape[:lead] + (-1,)),
        jnp.asarray(affine.y).reshape(x.shape[:lead] + (-1,)),
        jnp.asarray(affine.inf).reshape(-1),
    )
    n = flat.inf.shape[0]
    m = _bucket(n)
    padw = [(0, 0)] * lead + [(0, m - n)]
    padded = Affine(jnp.pad(flat.x, padw), jnp.pad(flat.y, padw), jnp.pad(flat.inf, (0, m - n), constant_values=True))
    cx, cy, inf = _from_mont_program(group)(padded)
    sl = (slice(None),) * lead + (slice(0, n),)
    return np.asarray(cx)[sl], np.asarray(cy)[sl], np.asarray(inf)[:n], bshape


def encode_array(affine: Affine, group: str = "g1", compressed: bool = True) -> np.ndarray:
    """Device :class:`Affine` points (any batch shape, flattened in C order) -> uint8 array ``(N, size)``."""
    deg = _degree(group)
    x, y, inf, _ = _canonical_host(affine, group)
    n = inf.shape[0]
    size = encoded_size(group, compressed)
    out = np.zeros((n, size), np.uint8)
    half = _FQ_BYTES * deg
    out[:, :half] = _limbs_to_coord(x, deg)
    if compressed:
        out[:, 0] |= np.where(_largest_mask(y, deg), 0xA0, 0x80).astype(np.uint8)
    else:
        out[:, half:] = _limbs_to_coord(y, deg)
    out[inf] = 0
    out[inf, 0] = 0xC0 if compressed else 0x40
    return out


def encode(affine: Affine, group: str = "g1", compressed: bool = True):
    """Device points -> encodings: ``bytes`` for a single point (batch shape ``()``), else a list of ``bytes``."""
    arr = encode_array(affine, group, compressed)
    if np.ndim(affine.inf) == 0:
        return arr[0].tobytes()
    buf = arr.tobytes()
    size = arr.shape[1]
    return [buf[i : i + size] for i in range(0, len(buf), size)]


def encode_g1(affine: Affine, compressed: bool = True):
    return encode(affine, "g1", compressed)


def encode_g2(affine: Affine, compressed: bool = True):
    return encode(affine, "g2", compressed)


# ---------------------------------------------------------------------------------------------------------------
# reference tuples <-> device arrays
# ---------------------------------------------------------------------------------------------------------------


def from_reference(points: Sequence, group: str = "g1") -> Affine:
    """Reference points (affine tuples of canonical ints / ``None``) -> device Affine ``(…, N)`` (Montgomery).

    Coordinates must be canonical (in ``[0, p)``); points are NOT checked to be on the curve (use
    ``ops.curve.g1.is_on_curve`` or go through :func:`decode`).
    """
    _group(group)
    deg = _degree(group)
    zero = 0 if deg == 1 else (0, 0)
    pts = list(points)
    for i, p in enumerate(pts):
        if p is not None and (not isinstance(p, tuple) or len(p) != 2):
            raise ValueError(f"from_reference: point {i} is not an affine pair or None")
    xs = [zero if p is None else p[0] for p in pts]
    ys = [zero if p is None else p[1] for p in pts]

    def limbs(vals):
        # ints_to_limbs(montgomery=True) would reduce values >= p silently: check the range first
        flat = vals if deg == 1 else [c for v in vals for c in (v if isinstance(v, tuple) else (v,))]
        for v in flat:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) < _P:
                raise ValueError(f"from_reference: coordinate {v!r} is not an int in [0, p)")
        if deg == 1:
            return encoding.ints_to_limbs(vals, "fq", montgomery=True)
        try:
            c0 = [v[0] for v in vals]
            c1 = [v[1] for v in vals]
        except (TypeError, IndexError):
            raise ValueError("from_reference: G2 coordinates must be (c0, c1) pairs") from None
        return np.stack([encoding.ints_to_limbs(c0, "fq", True), encoding.ints_to_limbs(c1, "fq", True)])

    if not pts:
        shape = (12, 0) if deg == 1 else (2, 12, 0)
        return Affine(jnp.zeros(shape, jnp.uint32), jnp.zeros(shape, jnp.uint32), jnp.zeros((0,), bool))
    return Affine(jnp.asarray(limbs(xs)), jnp.asarray(limbs(ys)), jnp.asarray(np.array([p is None for p in pts])))


def to_reference(affine: Affine, group: str = "g1") -> list:
    """Device Affine (any batch shape, flattened) -> list of reference points (tuples / ``None``)."""
    deg = _degree(group)
    x, y, inf, _ = _canonical_host(affine, group)

    def ints(limbs):
        if deg == 1:
            return encoding.limbs_to_ints(limbs, "fq")
        return list(zip(encoding.limbs_to_ints(limbs[0], "fq"), encoding.limbs_to_ints(limbs[1], "fq")))

    xs, ys = ints(x), ints(y)
    return [None if i else (a, b) for i, a, b in zip(inf, xs, ys)]


__all__ = [
    "decode",
    "decode_g1",
    "decode_g2",
    "encode",
    "encode_array",
    "encode_g1",
    "encode_g2",
    "encoded_size",
    "from_reference",
    "to_reference",
]


# ---------------------------------------------------------------------------------------------------------------
# batched checks of points already in device form (zkey sections: Montgomery limbs, infinity = zeros)
# ---------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def check_program(group: str, subgroup: bool):
    """Jitted ``(x, y, inf) -> (on_curve, in_subgroup)`` masks for Montgomery-form affine points (one program per
    group and mode, shapes bucketed by the caller); ``subgroup=False`` returns an all-true subgroup mask."""
    curve = _group(group)
    if subgroup:
        curve = curve.with_schedule("rolled")  # as decode_program: the subgroup test compiles fast rolled

    def run(x, y, inf):
        pt = Affine(x, y, inf)
        ok = curve.is_on_curve(pt) | inf
        insub = (curve.in_subgroup(pt) | inf) if subgroup else jnp.ones_like(inf)
        return ok, insub

    return jax.jit(run)


def check_montgomery(x: np.ndarray, y: np.ndarray, inf: np.ndarray, group: str = "g1",
                     subgroup: bool = True) -> tuple[int | None, int | None]:
    """Curve equation and (``subgroup``) prime-order subgroup test of N affine points given as limb-major
    Montgomery coordinates (``(12, N)`` / ``(2, 12, N)``, fully reduced: callers check ``< p`` first) and an
    ``inf`` mask, in ONE device program over the batch (padded to a power of two with infinity).

    On a CPU the checks run in py_arkworks_bls12381 instead (its checked affine decoding: curve and subgroup per
    point, in Rust): the subgroup test as an XLA program on a CPU compiles and runs for minutes even for small keys.

    Returns ``(first index off the curve, first index outside the subgroup)``, ``None`` where all pass."""
    _group(group)
    n = int(np.shape(inf)[0])
    if n == 0:
        return None, None
    if jax.default_backend() == "cpu":
        return _check_montgomery_arkworks(np.asarray(x), np.asarray(y), np.asarray(inf, bool), group, subgroup)
    m = _bucket(n)
    pad = [(0, 0)] * (np.ndim(x) - 1) + [(0, m - n)]
    ok, insub = check_program(group, subgroup)(
        jnp.asarray(np.pad(np.asarray(x, np.uint32), pad)), jnp.asarray(np.pad(np.asarray(y, np.uint32), pad)),
        jnp.asarray(np.pad(np.asarray(inf, bool), (0, m - n), constant_values=True)))
    ok, insub = np.asarray(ok)[:n], np.asarray(insub)[:n]
    bad_curve = None if ok.all() else _first(~ok)
    bad_sub = None if insub.all() else _first(~insub)
    return bad_curve, bad_sub


def _check_montgomery_arkworks(x, y, inf, group: str, subgroup: bool) -> tuple[int | None, int | None]:
    """:func:`check_montgomery` through py_arkworks_bls12381: a point failing its checked decoding is off the curve
    when the curve equation (reference arithmetic) fails, else outside the subgroup."""
    import py_arkworks_bls12381 as ark

    from cuzk_jax.reference import curve as ref_curve

    g2 = group == "g2"
    point, ref = (ark.G2Point, ref_curve.g2) if g2 else (ark.G1Point, ref_curve.g1)

    def ints(a):
        if not g2:
            return encoding.limbs_to_ints(a, "fq", montgomery=True)
        c0, c1 = (encoding.limbs_to_ints(a[k], "fq", montgomery=True) for k in range(2))
        return list(zip(c0, c1))

    xs, ys = ints(x), ints(y)
    bad_curve = bad_sub = None
    for i, (xi, yi, at_inf) in enumerate(zip(xs, ys, inf.tolist())):
        if at_inf:
            continue
        coords = (xi, yi) if not g2 else (xi[0], xi[1], yi[0], yi[1])
        data = b"".join(int(v).to_bytes(48, "big") for v in coords)
        try:
            (point.from_xy_bytes_be if subgroup else point.from_xy_bytes_unchecked_be)(data)
            if subgroup or ref.is_on_curve((xi, yi)):
                continue
        except Exception:  # noqa: BLE001  (arkworks raises its own exception types)
            pass
        if not ref.is_on_curve((xi, yi)):
            bad_curve = i if bad_curve is None else bad_curve
        else:
            bad_sub = i if bad_sub is None else bad_sub
        if bad_curve is not None and (bad_sub is not None or not subgroup):
            break
    return bad_curve, bad_sub
