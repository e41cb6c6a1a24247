"""BLS12-381 G1 / G2 point arithmetic on limb arrays: branch-free, batched, generic over the field object.

Field objects
    Every formula takes a field object ``F`` with ``add sub neg double mul square mul_many select is_zero eq
    zeros_like ones_like mul_small`` (see /tmp/curve_api.md, "the shared curve-formula contract"): the ops fields
    :data:`cuzk_jax.ops.field.fq` / :data:`~cuzk_jax.ops.field.fq2` (elements are arrays ``(12, *batch)`` /
    ``(2, 12, *batch)`` in Montgomery form, see ops/field.py) or a kernel's limb-list field. The curve objects
    :data:`g1` (over fq, ``b = 4``) and :data:`g2` (over fq2, ``b = 4(1 + u)``) expose every formula as a method
    whose ``F`` argument defaults to the curve's own field. Independent products are grouped into one
    ``F.mul_many`` call per dependency level ("round"), so in XLA each round is ONE stacked multiplication.

Point types (NamedTuple pytrees; every coordinate has the same batch shape)
    :class:`Affine` ``(x, y, inf)``: ``inf`` a bool mask of the batch shape; the coordinates of an infinity point
        are ignored by every formula and kept zero by every producer here.
    :class:`Jacobian` ``(x, y, z)``: the affine point ``(x/z^2, y/z^3)``; ``z == 0`` <=> infinity.
    :class:`XYZZ` ``(x, y, zz, zzz)``: the affine point ``(x/zz, y/zzz)`` with ``zz^3 == zzz^2``; ``zz == 0`` <=>
        infinity (the bucket representation of sppark / supraseal).

Formulas (Explicit-Formulas Database, https://hyperelliptic.org/EFD/g1p/auto-shortw-xyzz.html and
auto-shortw-jacobian-0.html, all for a = 0):
    XYZZ: "add-2008-s", "madd-2008-s", "dbl-2008-s-1" (Sutherland 2008). Jacobian: "add-1998-cmo-2",
    "madd" (the same with Z2 = 1) and an "s-1"-style doubling (U = 2Y, V = U^2, W = UV, S = XV, M = 3X^2,
    X3 = M^2 - 2S, Y3 = M(S - X3) - WY, Z3 = UZ).
    Every addition is *unified*: the doubling formula has exactly the shape of the addition with (P, R) replaced
    by (2Y1, 3X1^2) (and U1/S1/Z2 by X1/Y1/1), so ``a == b`` is handled by a few selects plus one extra square in
    the first round -- no second formula in the program. ``a == -b`` gives ``zz == 0`` / ``z == 0`` (infinity)
    by itself; ``a`` or ``b`` at infinity is selected at the end. Points of order 2 do not exist on E1/E2 (odd
    cofactors); were one doubled the result would still be infinity (U = 0).

Argument checks: the :class:`Curve` methods check each point argument when they compute with the curve's own field
(``F`` not given): its type (:class:`Affine` / :class:`Jacobian` / :class:`XYZZ` as the method expects) and that
every coordinate is a ``uint32`` array with the field's limb axes leading (``(12, *batch)`` for G1, ``(2, 12,
*batch)`` for G2; an Affine ``inf`` a bool mask), raising :class:`~cuzk_jax.errors.BadInput` naming the method.
Shapes and dtypes are static: the checks cost nothing under ``jit``. With a kernel's limb-list field ``F`` nothing
is checked (kernels call the formulas with lists of limb planes).

Other operations (these use the curve's own field and are XLA-only): :meth:`Curve.to_affine` (Montgomery batch
inversion, one inversion per batch), :meth:`Curve.is_on_curve`, :meth:`Curve.in_subgroup` (Scott's endomorphism
test, eprint 2021/1130: ``sigma(P) == -x^2 P`` on G1, ``psi(P) == x P`` on G2; ``method="order"`` checks
``r P == O`` instead, slower, by definition), :meth:`Curve.scalar_mul` (left-to-right double-and-add over 256
bits in a ``lax.fori_loop``) and :meth:`Curve.sum` (a batched reduction along one batch axis: a sequential fold
of ``steps`` slices then a log-depth pairwise tree, in one ``lax.fori_loop`` holding one addition).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from cuzk_jax.errors import BadInput
from cuzk_jax.reference import constants as C
from cuzk_jax.reference import curve as ref_curve

from . import field as ops_field
from .field import x64


class Affine(NamedTuple):
    """Affine point(s): ``x, y`` field arrays, ``inf`` bool mask (batch shape); infinity coordinates are zero."""

    x: jax.Array
    y: jax.Array
    inf: jax.Array


class Jacobian(NamedTuple):
    """Jacobian point(s) ``(X/Z^2, Y/Z^3)``; ``Z == 0`` <=> infinity."""

    x: jax.Array
    y: jax.Array
    z: jax.Array


class XYZZ(NamedTuple):
    """XYZZ point(s) ``(X/ZZ, Y/ZZZ)`` with ``ZZ^3 == ZZZ^2``; ``ZZ == 0`` <=> infinity (sppark's buckets)."""

    x: jax.Array
    y: jax.Array
    zz: jax.Array
    zzz: jax.Array


def select_point(F, mask, a, b):
    """``where(mask, a, b)`` for two points of the same type (the ``inf`` mask of Affine selected as a bool)."""
    out = []
    for name, u, v in zip(a._fields, a, b):
        if name == "inf":
            out.append(jnp.where(mask, u, v))
        else:
            out.append(F.select(mask, u, v))
    return type(a)(*out)


# ---------------------------------------------------------------------------------------------------------------
# Generic formulas (F explicit). Comments number the mul_many rounds.
# ---------------------------------------------------------------------------------------------------------------


def _xyzz_add_mixed(F, acc: XYZZ, p: Affine) -> XYZZ:
    """madd-2008-s (unified with dbl-2008-s-1): acc + p for XYZZ acc and affine p. 4 rounds, 11 products and one
    small multiple (``3 X1^2``)."""
    return _madd(F, acc, p, unified=True)[0]


def _xyzz_add_mixed_no_dbl(F, acc: XYZZ, p: Affine):
    """madd-2008-s without the doubling case: ``(acc + p, need)`` where ``need`` marks the lanes on which ``acc == p``
    (both finite) and the result is NOT the sum -- there the caller substitutes the doubling of ``acc``. 4 rounds, 10
    products: the unified form's ``X1^2`` (round 1), used only when doubling, is left out. Infinity on either side
    and ``acc == -p`` (sum at infinity: ``P = 0``, so ``ZZ3 = 0``) are handled as in :func:`_xyzz_add_mixed`."""
    return _madd(F, acc, p, unified=False)


def _madd(F, acc: XYZZ, p: Affine, *, unified: bool):
    """The body of both mixed additions: ``(result, need)``; ``unified``: with the doubling case (P = 2 Y1,
    R = 3 X1^2 where ``acc == p``; ``need`` is then None), else without it (``need``: the lanes where it was due)."""
    X1, Y1, ZZ1, ZZZ1 = acc
    X2, Y2, p_inf = p
    acc_inf = F.is_zero(ZZ1)
    if unified:
        U2, S2, XX1 = F.mul_many([(X2, ZZ1), (Y2, ZZZ1), (X1, X1)])  # 1
    else:
        U2, S2 = F.mul_many([(X2, ZZ1), (Y2, ZZZ1)])  # 1
    P = F.sub(U2, X1)
    R = F.sub(S2, Y1)
    dbl = F.is_zero(P) & F.is_zero(R)  # acc == p (or acc at infinity)
    need = None
    if unified:  # dbl-2008-s-1 on acc is this formula with P = 2 Y1, R = 3 X1^2
        P = F.select(dbl, F.double(Y1), P)
        R = F.select(dbl, F.mul_small(XX1, 3), R)
    else:
        need = dbl & ~acc_inf & ~p_inf
    PP, RR = F.mul_many([(P, P), (R, R)])  # 2
    PPP, Q, ZZ3 = F.mul_many([(P, PP), (X1, PP), (ZZ1, PP)])  # 3
    X3 = F.sub(F.sub(RR, F.double(Q)), F.select(dbl, F.zeros_like(PPP), PPP) if unified else PPP)
    T, Y1PPP, ZZZ3 = F.mul_many([(R, F.sub(Q, X3)), (Y1, PPP), (ZZZ1, PPP)])  # 4
    res = XYZZ(X3, F.sub(T, Y1PPP), ZZ3, ZZZ3)
    one = F.ones_like(X2)
    res = select_point(F, acc_inf, XYZZ(X2, Y2, one, one), res)
    return select_point(F, p_inf, acc, res), need


def _xyzz_add(F, a: XYZZ, b: XYZZ) -> XYZZ:
    """add-2008-s (unified with dbl-2008-s-1). 4 rounds, 15 products."""
    X1, Y1, ZZ1, ZZZ1 = a
    X2, Y2, ZZ2, ZZZ2 = b
    a_inf = F.is_zero(ZZ1)
    b_inf = F.is_zero(ZZ2)
    U1, U2, S1, S2, XX1, ZZ12, ZZZ12 = F.mul_many(
        [(X1, ZZ2), (X2, ZZ1), (Y1, ZZZ2), (Y2, ZZZ1), (X1, X1), (ZZ1, ZZ2), (ZZZ1, ZZZ2)]
    )  # 1
    P = F.sub(U2, U1)
    R = F.sub(S2, S1)
    dbl = F.is_zero(P) & F.is_zero(R)
    P = F.select(dbl, F.double(Y1), P)
    R = F.select(dbl, F.mul_small(XX1, 3), R)
    U1 = F.select(dbl, X1, U1)
    S1 = F.select(dbl, Y1, S1)
    ZZ12 = F.select(dbl, ZZ1, ZZ12)
    ZZZ12 = F.select(dbl, ZZZ1, ZZZ12)
    PP, RR = F.mul_many([(P, P), (R, R)])  # 2
    PPP, Q, ZZ3 = F.mul_many([(P, PP), (U1, PP), (ZZ12, PP)])  # 3
    X3 = F.sub(F.sub(RR, F.double(Q)), F.select(dbl, F.zeros_like(PPP), PPP))
    T, S1PPP, ZZZ3 = F.mul_many([(R, F.sub(Q, X3)), (S1, PPP), (ZZZ12, PPP)])  # 4
    res = XYZZ(X3, F.sub(T, S1PPP), ZZ3, ZZZ3)
    res = select_point(F, a_inf, b, res)
    return select_point(F, b_inf, a, res)


def _xyzz_double(F, a: XYZZ) -> XYZZ:
    """dbl-2008-s-1 (a = 0). 3 rounds, 9 products. Infinity (ZZ = 0) stays infinity."""
    X, Y, ZZ, ZZZ = a
    U = F.double(Y)
    V, XX = F.mul_many([(U, U), (X, X)])  # 1
    M = F.mul_small(XX, 3)
    W, S, ZZ3, MM = F.mul_many([(U, V), (X, V), (V, ZZ), (M, M)])  # 2
    X3 = F.sub(MM, F.double(S))
    T, WY, ZZZ3 = F.mul_many([(M, F.sub(S, X3)), (W, Y), (W, ZZZ)])  # 3
    return XYZZ(X3, F.sub(T, WY), ZZ3, ZZZ3)


def _jacobian_add(F, a: Jacobian, b: Jacobian) -> Jacobian:
    """add-1998-cmo-2 (unified with the s-1 doubling). 6 rounds, 18 products."""
    X1, Y1, Z1 = a
    X2, Y2, Z2 = b
    a_inf = F.is_zero(Z1)
    b_inf = F.is_zero(Z2)
    Z1Z1, Z2Z2, XX1, Z1Z2 = F.mul_many([(Z1, Z1), (Z2, Z2), (X1, X1), (Z1, Z2)])  # 1
    U1, U2, Z1c, Z2c = F.mul_many([(X1, Z2Z2), (X2, Z1Z1), (Z1, Z1Z1), (Z2, Z2Z2)])  # 2
    S1, S2 = F.mul_many([(Y1, Z2c), (Y2, Z1c)])  # 3
    H = F.sub(U2, U1)
    R = F.sub(S2, S1)
    dbl = F.is_zero(H) & F.is_zero(R)
    H = F.select(dbl, F.double(Y1), H)
    R = F.select(dbl, F.mul_small(XX1, 3), R)
    U1 = F.select(dbl, X1, U1)
    S1 = F.select(dbl, Y1, S1)
    Z1Z2 = F.select(dbl, Z1, Z1Z2)
    HH, RR = F.mul_many([(H, H), (R, R)])  # 4
    HHH, V, Z3 = F.mul_many([(H, HH), (U1, HH), (Z1Z2, H)])  # 5
    X3 = F.sub(F.sub(RR, F.double(V)), F.select(dbl, F.zeros_like(HHH), HHH))
    T, S1HHH = F.mul_many([(R, F.sub(V, X3)), (S1, HHH)])  # 6
    res = Jacobian(X3, F.sub(T, S1HHH), Z3)
    res = select_point(F, a_inf, b, res)
    return select_point(F, b_inf, a, res)


def _jacobian_add_mixed(F, a: Jacobian, p: Affine) -> Jacobian:
    """add-1998-cmo-2 with Z2 = 1 (unified with the doubling). 6 rounds, 13 products."""
    X1, Y1, Z1 = a
    X2, Y2, p_inf = p
    a_inf = F.is_zero(Z1)
    Z1Z1, XX1 = F.mul_many([(Z1, Z1), (X1, X1)])  # 1
    U2, Z1c = F.mul_many([(X2, Z1Z1), (Z1, Z1Z1)])  # 2
    (S2,) = F.mul_many([(Y2, Z1c)])  # 3
    H = F.sub(U2, X1)
    R = F.sub(S2, Y1)
    dbl = F.is_zero(H) & F.is_zero(R)
    H = F.select(dbl, F.double(Y1), H)
    R = F.select(dbl, F.mul_small(XX1, 3), R)
    HH, RR = F.mul_many([(H, H), (R, R)])  # 4
    HHH, V, Z3 = F.mul_many([(H, HH), (X1, HH), (Z1, H)])  # 5
    X3 = F.sub(F.sub(RR, F.double(V)), F.select(dbl, F.zeros_like(HHH), HHH))
    T, Y1HHH = F.mul_many([(R, F.sub(V, X3)), (Y1, HHH)])  # 6
    res = Jacobian(X3, F.sub(T, Y1HHH), Z3)
    res = select_point(F, a_inf, Jacobian(X2, Y2, F.ones_like(X2)), res)
    return select_point(F, p_inf, a, res)


def _jacobian_double(F, a: Jacobian) -> Jacobian:
    """s-1 style doubling (U = 2Y). 3 rounds, 8 products. Infinity (Z = 0) stays infinity."""
    X, Y, Z = a
    U = F.double(Y)
    V, XX = F.mul_many([(U, U), (X, X)])  # 1
    M = F.mul_small(XX, 3)
    W, S, Z3, MM = F.mul_many([(U, V), (X, V), (U, Z), (M, M)])  # 2
    X3 = F.sub(MM, F.double(S))
    T, WY = F.mul_many([(M, F.sub(S, X3)), (W, Y)])  # 3
    return Jacobian(X3, F.sub(T, WY), Z3)


def _jacobian_eq(F, a: Jacobian, b: Jacobian):
    """Projective equality: both at infinity, or neither and X1 Z2^2 = X2 Z1^2, Y1 Z2^3 = Y2 Z1^3."""
    X1, Y1, Z1 = a
    X2, Y2, Z2 = b
    a_inf = F.is_zero(Z1)
    b_inf = F.is_zero(Z2)
    Z1Z1, Z2Z2 = F.mul_many([(Z1, Z1), (Z2, Z2)])
    U1, U2, Z1c, Z2c = F.mul_many([(X1, Z2Z2), (X2, Z1Z1), (Z1, Z1Z1), (Z2, Z2Z2)])
    S1, S2 = F.mul_many([(Y1, Z2c), (Y2, Z1c)])
    same = F.eq(U1, U2) & F.eq(S1, S2)
    return (a_inf & b_inf) | (~a_inf & ~b_inf & same)


def _xyzz_eq(F, a: XYZZ, b: XYZZ):
    X1, Y1, ZZ1, ZZZ1 = a
    X2, Y2, ZZ2, ZZZ2 = b
    a_inf = F.is_zero(ZZ1)
    b_inf = F.is_zero(ZZ2)
    U1, U2, S1, S2 = F.mul_many([(X1, ZZ2), (X2, ZZ1), (Y1, ZZZ2), (Y2, ZZZ1)])
    same = F.eq(U1, U2) & F.eq(S1, S2)
    return (a_inf & b_inf) | (~a_inf & ~b_inf & same)


def _xyzz_to_jacobian(F, a: XYZZ) -> Jacobian:
    """(X ZZ^2, Y ZZZ^2, ZZZ): uses the invariant ZZ^3 = ZZZ^2 (then X'/Z'^2 = X/ZZ, Y'/Z'^3 = Y/ZZZ)."""
    X, Y, ZZ, ZZZ = a
    ZZ2, ZZZ2 = F.mul_many([(ZZ, ZZ), (ZZZ, ZZZ)])
    Xj, Yj = F.mul_many([(X, ZZ2), (Y, ZZZ2)])
    return Jacobian(Xj, Yj, ZZZ)


def _jacobian_to_xyzz(F, a: Jacobian) -> XYZZ:
    X, Y, Z = a
    (ZZ,) = F.mul_many([(Z, Z)])
    (ZZZ,) = F.mul_many([(ZZ, Z)])
    return XYZZ(X, Y, ZZ, ZZZ)


def _affine_to_xyzz(F, p: Affine) -> XYZZ:
    one = F.ones_like(p.x)
    zero = F.zeros_like(p.x)
    zz = F.select(p.inf, zero, one)
    return XYZZ(F.select(p.inf, zero, p.x), F.select(p.inf, zero, p.y), zz, zz)


def _affine_to_jacobian(F, p: Affine) -> Jacobian:
    one = F.ones_like(p.x)
    zero = F.zeros_like(p.x)
    return Jacobian(F.select(p.inf, zero, p.x), F.select(p.inf, zero, p.y), F.select(p.inf, zero, one))


# ---------------------------------------------------------------------------------------------------------------
# Curve objects
# ---------------------------------------------------------------------------------------------------------------


def _static_chain(k: int) -> tuple[np.ndarray, int]:
    """For k > 0 (MSB first, top bit consumed by the start value): the number of doublings before each addition
    and the trailing doublings, so ``k P`` = loop(add P after d_i doublings) then ``tail`` doublings."""
    bits = bin(k)[3:]
    gaps, run = [], 0
    for bit in bits:
        run += 1
        if bit == "1":
            gaps.append(run)
            run = 0
    return np.asarray(gaps, np.int32), run


_POINT_TYPES = {"Affine": (Affine,), "Jacobian": (Jacobian,), "XYZZ": (XYZZ,), "any": (Affine, Jacobian, XYZZ),
                "projective": (Jacobian, XYZZ)}


def _checked_points(**kinds):
    """Decorator for a :class:`Curve` method: check the point arguments ``name=kind`` (kind: a key of
    ``_POINT_TYPES``) with :meth:`Curve._check_point`, unless a kernel field ``F`` is passed."""

    def deco(fn):
        import functools
        import inspect

        params = list(inspect.signature(fn).parameters)[1:]
        positions = [(params.index(n), n, k) for n, k in kinds.items()]

        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            if kwargs.get("F") is None and ("F" not in params or len(args) <= params.index("F")
                                              or args[params.index("F")] is None):
                for i, n, k in positions:
                    x = args[i] if i < len(args) else kwargs.get(n)
                    self._check_point(fn.__name__, x, k)
            return fn(self, *args, **kwargs)

        return wrapper

    return deco


class Curve:
    """A BLS12-381 group on limb arrays (see the module docstring). Instances: :data:`g1`, :data:`g2`.

    Attributes: ``field`` (the ops field object), ``b`` (the curve constant as a reference value: an int, or a
    pair for Fq2), ``ref`` (the reference curve), ``coord_ndim`` (leading non-batch axes of a coordinate: 1 for
    Fq ``(12, ...)``, 2 for Fq2 ``(2, 12, ...)``).
    """

    def __init__(self, name: str, field, ref, coord_ndim: int):
        self.name = name
        self.field = field
        self.ref = ref
        self.b = ref.b
        self.coord_ndim = coord_ndim
        self._variants = {id(field): self}

    def with_schedule(self, schedule: str) -> "Curve":
        """This group over ``field.with_schedule(schedule)`` (``"rolled"`` / ``"unrolled"``): e.g. ``g1.with_schedule(
        "rolled")`` for a program where compile time matters more than speed. Cached: the same object every time."""
        field = self.field.with_schedule(schedule)
        c = self._variants.get(id(field))
        if c is None:
            c = Curve(self.name, field, self.ref, self.coord_ndim)
            c._variants = self._variants
            self._variants[id(field)] = c
        return c

    def __repr__(self) -> str:
        return f"ops.curve.{self.name}"

    def _F(self, F):
        return self.field if F is None else F

    def _check_point(self, method: str, p, kind: str = "any", where: str | None = None) -> None:
        """:class:`~cuzk_jax.errors.BadInput` unless ``p`` is a point of the expected type whose coordinates are
        ``uint32`` limb arrays of this curve's field (static checks only); the message names ``where`` (default:
        this curve's method)."""
        types = _POINT_TYPES[kind]
        where = where or f"{self!r}.{method}"
        if not isinstance(p, types):
            names = " / ".join(t.__name__ for t in types)
            raise BadInput(f"{where}: expected a point as {names} (ops.curve), got {type(p).__name__}")
        lead = (self.field.limbs,) if self.coord_ndim == 1 else (2, self.field.limbs)
        for name, c in zip(p._fields, p):
            if name == "inf":
                dtype = getattr(c, "dtype", None)
                if dtype is None or np.dtype(dtype) != np.bool_:
                    raise BadInput(f"{where}: expected Affine.inf as a bool mask of the batch shape, got "
                                   f"{ops_field._describe(c)}")
            else:
                ops_field.check_limbs(where, c, lead, f"{self.name} {type(p).__name__}.{name} coordinates")

    def batch_shape(self, pt) -> tuple:
        return tuple(pt[0].shape[self.coord_ndim :])

    # -- constants / identities ----------------------------------------------------------------------------
    def b_const(self, shape=()):
        return self.field.constant(self.b, shape)

    def xyzz_identity(self, shape=()) -> XYZZ:
        z = self.field.zeros(shape)
        return XYZZ(z, z, z, z)

    def jacobian_identity(self, shape=()) -> Jacobian:
        z = self.field.zeros(shape)
        return Jacobian(z, z, z)

    def affine_identity(self, shape=()) -> Affine:
        z = self.field.zeros(shape)
        return Affine(z, z, jnp.ones(shape, bool))

    def generator(self, shape=()) -> Affine:
        gx, gy = self.ref.generator
        return Affine(self.field.constant(gx, shape), self.field.constant(gy, shape), jnp.zeros(shape, bool))

    # -- generic formulas --------------------------------------------------------------------------------------
    @_checked_points(acc="XYZZ", p="Affine")
    def xyzz_add_mixed(self, acc: XYZZ, p: Affine, F=None) -> XYZZ:
        return _xyzz_add_mixed(self._F(F), acc, p)

    @_checked_points(acc="XYZZ", p="Affine")
    def xyzz_add_mixed_no_dbl(self, acc: XYZZ, p: Affine, F=None):
        """``(sum, need)``: the mixed addition without its doubling case (:func:`_xyzz_add_mixed_no_dbl`); the sum
        is right wherever ``need`` is false, and where it is true ``acc == p`` and the caller doubles ``acc``."""
        return _xyzz_add_mixed_no_dbl(self._F(F), acc, p)

    @_checked_points(a="XYZZ", b="XYZZ")
    def xyzz_add(self, a: XYZZ, b: XYZZ, F=None) -> XYZZ:
        return _xyzz_add(self._F(F), a, b)

    @_checked_points(a="XYZZ")
    def xyzz_double(self, a: XYZZ, F=None) -> XYZZ:
        return _xyzz_double(self._F(F), a)

    @_checked_points(a="XYZZ")
    def xyzz_neg(self, a: XYZZ, F=None) -> XYZZ:
        return XYZZ(a.x, self._F(F).neg(a.y), a.zz, a.zzz)

    @_checked_points(a="XYZZ", b="XYZZ")
    def xyzz_eq(self, a: XYZZ, b: XYZZ, F=None):
        return _xyzz_eq(self._F(F), a, b)

    @_checked_points(a="XYZZ")
    def xyzz_to_jacobian(self, a: XYZZ, F=None) -> Jacobian:
        return _xyzz_to_jacobian(self._F(F), a)

    @_checked_points(a="Jacobian")
    def jacobian_to_xyzz(self, a: Jacobian, F=None) -> XYZZ:
        return _jacobian_to_xyzz(self._F(F), a)

    @_checked_points(a="Jacobian", b="Jacobian")
    def jacobian_add(self, a: Jacobian, b: Jacobian, F=None) -> Jacobian:
        return _jacobian_add(self._F(F), a, b)

    @_checked_points(a="Jacobian", p="Affine")
    def jacobian_add_mixed(self, a: Jacobian, p: Affine, F=None) -> Jacobian:
        return _jacobian_add_mixed(self._F(F), a, p)

    @_checked_points(a="Jacobian")
    def jacobian_double(self, a: Jacobian, F=None) -> Jacobian:
        return _jacobian_double(self._F(F), a)

    @_checked_points(a="Jacobian")
    def jacobian_neg(self, a: Jacobian, F=None) -> Jacobian:
        return Jacobian(a.x, self._F(F).neg(a.y), a.z)

    @_checked_points(a="Jacobian", b="Jacobian")
    def jacobian_eq(self, a: Jacobian, b: Jacobian, F=None):
        return _jacobian_eq(self._F(F), a, b)

    @_checked_points(p="Affine")
    def affine_neg(self, p: Affine, F=None) -> Affine:
        return Affine(p.x, self._F(F).neg(p.y), p.inf)  # -0 = 0, so infinity keeps zero coordinates

    @_checked_points(p="Affine")
    def affine_to_xyzz(self, p: Affine, F=None) -> XYZZ:
        return _affine_to_xyzz(self._F(F), p)

    @_checked_points(p="Affine")
    def affine_to_jacobian(self, p: Affine, F=None) -> Jacobian:
        return _affine_to_jacobian(self._F(F), p)

    @_checked_points(a="Affine", b="Affine")
    def affine_eq(self, a: Affine, b: Affine):
        F = self.field
        same = F.eq(a.x, b.x) & F.eq(a.y, b.y)
        return (a.inf & b.inf) | (~a.inf & ~b.inf & same)

    # -- XLA-only operations (the curve's own field) --------------------------------------------------------------
    @_checked_points(pt="any")
    def to_affine(self, pt) -> Affine:
        """Jacobian or XYZZ -> Affine with ONE field inversion per batch (Montgomery's trick, ``batch_inv``).

        Infinity maps to ``Affine(0, 0, True)`` (batch_inv maps 0 to 0, so the coordinates come out zero).
        """
        F = self.field
        if isinstance(pt, Affine):
            return pt
        if isinstance(pt, Jacobian):
            zinv = F.batch_inv(pt.z)
            (zinv2,) = F.mul_many([(zinv, zinv)])
            x, zinv3 = F.mul_many([(pt.x, zinv2), (zinv2, zinv)])
            (y,) = F.mul_many([(pt.y, zinv3)])
            return Affine(x, y, F.is_zero(pt.z))
        if isinstance(pt, XYZZ):
            (t,) = F.mul_many([(pt.zz, pt.zzz)])
            tinv = F.batch_inv(t)
            izz, izzz = F.mul_many([(pt.zzz, tinv), (pt.zz, tinv)])  # 1/ZZ = ZZZ/(ZZ ZZZ), 1/ZZZ = ZZ/(ZZ ZZZ)
            x, y = F.mul_many([(pt.x, izz), (pt.y, izzz)])
            return Affine(x, y, F.is_zero(pt.zz))
        raise TypeError(f"to_affine: expected Jacobian or XYZZ, got {type(pt).__name__}")

    @_checked_points(p="Affine")
    def is_on_curve(self, p: Affine):
        """Mask: ``y^2 == x^3 + b`` or the point is at infinity."""
        F = self.field
        yy, xx = F.mul_many([(p.y, p.y), (p.x, p.x)])
        (xxx,) = F.mul_many([(xx, p.x)])
        rhs = F.add(xxx, self.b_const(self.batch_shape(p)))
        return p.inf | F.eq(yy, rhs)

    def lift_x(self, x):
        """``(y, ok)``: a square root ``y`` of ``x^3 + b`` and whether one exists (the root's sign is arbitrary)."""
        F = self.field
        (xx,) = F.mul_many([(x, x)])
        (xxx,) = F.mul_many([(xx, x)])
        shape = x.shape[self.coord_ndim :]
        return F.sqrt(F.add(xxx, self.b_const(shape)))

    @_checked_points(p="Affine")
    def endomorphism(self, p: Affine) -> Affine:
        """sigma (G1: ``(BETA x, y)``) or psi (G2: ``(conj(x) PSI_X, conj(y) PSI_Y)``); see reference/curve.py."""
        F = self.field
        shape = self.batch_shape(p)
        if self.coord_ndim == 1:
            (x,) = F.mul_many([(p.x, F.constant(ref_curve.G1_BETA, shape))])
            return Affine(x, p.y, p.inf)
        x, y = F.mul_many(
            [(F.conjugate(p.x), F.constant(ref_curve.G2_PSI_X, shape)), (F.conjugate(p.y), F.constant(ref_curve.G2_PSI_Y, shape))]
        )
        return Affine(x, y, p.inf)

    @_checked_points(p="any")
    @x64
    def mul_static(self, p, k: int) -> Jacobian:
        """``k P`` for a static Python int ``k`` (any sign) and Affine/Jacobian/XYZZ ``P``; result Jacobian.

        The addition chain is plain binary, run as a ``fori_loop`` over the set bits whose body is an inner
        ``fori_loop`` of doublings then one addition, so a sparse ``k`` (like the curve parameter x, weight 6)
        costs only its set bits in additions and the program holds one double and one add.
        """
        if k == 0:
            return self.jacobian_identity(self.batch_shape(p))
        if k < 0:
            return self.jacobian_neg(self.mul_static(p, -k))
        base, add = self._base_and_add(p)
        gaps, tail = _static_chain(k)
        gaps = jnp.asarray(gaps)

        def dbl_n(n, acc):
            return lax.fori_loop(0, n, lambda _, a: self.xyzz_double(a), acc)

        def step(i, acc):
            return add(dbl_n(gaps[i], acc), base)

        acc = self.affine_to_xyzz(base) if isinstance(base, Affine) else base
        acc = lax.fori_loop(0, gaps.shape[0], step, acc)
        acc = dbl_n(tail, acc)
        return self.xyzz_to_jacobian(acc)

    def _base_and_add(self, p):
        if isinstance(p, Affine):
            return p, self.xyzz_add_mixed
        if isinstance(p, Jacobian):
            return self.jacobian_to_xyzz(p), self.xyzz_add
        if isinstance(p, XYZZ):
            return p, self.xyzz_add
        raise TypeError(f"expected Affine, Jacobian or XYZZ, got {type(p).__name__}")

    @_checked_points(p="any")
    @x64
    def scalar_mul(self, p, scalar_limbs, nbits: int = 256) -> Jacobian:
        """``s P`` for scalars given as canonical (NOT Montgomery) uint32 limbs ``(8, *batch)`` (any 256-bit
        value, not reduced mod r), ``P`` Affine/Jacobian/XYZZ with a batch shape broadcasting with the scalars'.

        Left-to-right double-and-add over ``nbits`` bits in one ``lax.fori_loop`` (body: one XYZZ doubling and
        one addition whose result is selected by the bit). For setup and tests; MSM is the fast path.
        """
        s = jnp.asarray(scalar_limbs, jnp.uint32)
        base, add = self._base_and_add(p)
        shape = jnp.broadcast_shapes(self.batch_shape(base), s.shape[1:])
        base = type(base)(*[_broadcast_coord(c, shape, self.coord_ndim, f) for f, c in zip(base._fields, base)])
        s = jnp.broadcast_to(s, s.shape[:1] + shape)

        def body(j, acc):
            i = nbits - 1 - j
            limb = lax.dynamic_index_in_dim(s, i // 32, 0, keepdims=False)
            bit = ((limb >> (i % 32).astype(jnp.uint32)) & 1).astype(bool)
            acc = self.xyzz_double(acc)
            return select_point(self.field, bit, add(acc, base), acc)

        acc = lax.fori_loop(0, nbits, body, self.xyzz_identity(shape))
        return self.xyzz_to_jacobian(acc)

    @_checked_points(p="Affine")
    def in_subgroup(self, p: Affine, method: str = "endomorphism"):
        """Mask: ``p`` is on the curve and in the order-r subgroup (infinity is).

        ``"endomorphism"`` (default): Scott, eprint 2021/1130 -- G1: ``sigma(P) == -x^2 P``, G2: ``psi(P) == x P``
        (x the BLS parameter, 64 bits of Hamming weight 6; cross-checked against the definition in the tests and
        in reference/curve.py). ``"order"``: the definition ``r P == O`` (255-bit scalar multiplication).
        """
        on = self.is_on_curve(p)
        if method == "order":
            rp = self.mul_static(p, C.R)
            return on & self.field.is_zero(rp.z)
        if method != "endomorphism":
            raise ValueError(f"in_subgroup: unknown method {method!r}")
        lhs = self.affine_to_jacobian(self.endomorphism(p))
        rhs = self.mul_static(p, self.ref.endomorphism_eigenvalue())
        return on & self.jacobian_eq(lhs, rhs)

    @_checked_points(pts="any")
    @x64
    def sum(self, pts, axis: int = 0, steps: int = 32):
        """Sum of points along batch axis ``axis`` (Affine/XYZZ -> XYZZ, Jacobian -> Jacobian).

        The ``n`` points are padded with infinity to ``steps * M`` (``M = 2^k >= n / steps``) and reduced by ONE
        ``lax.fori_loop`` of ``steps + log2 M`` iterations over a fixed ``M``-lane accumulator, whose body holds
        a single addition: iterations ``< steps`` add the next slice of ``M`` points (a sequential fold), the
        remaining ``log2 M`` add the accumulator's odd lanes to its even lanes (a pairwise tree; the upper half
        refilled with infinity). Work ``(steps + log2 M) * M ~ n + M log2 M`` additions, depth
        ``steps + log2 M``: raise ``steps`` for less work, lower it for less depth.
        """
        if isinstance(pts, Affine):
            pts = self.affine_to_xyzz(pts)
        if isinstance(pts, XYZZ):
            add = self.xyzz_add
        elif isinstance(pts, Jacobian):
            add = self.jacobian_add
        else:
            raise TypeError(f"sum: expected Affine, XYZZ or Jacobian, got {type(pts).__name__}")
        kind = type(pts)
        lead = self.coord_ndim
        bshape = self.batch_shape(pts)
        if not bshape:
            raise ValueError("sum: the points have no batch axis")
        axis = axis % len(bshape)
        cs = [jnp.moveaxis(c, lead + axis, -1) for c in pts]
        n = cs[0].shape[-1]
        rest = cs[0].shape[:-1]
        if n == 0:
            return kind(*[jnp.zeros(rest, jnp.uint32) for _ in cs])
        T = max(1, min(steps, n))
        M = 1 << (-(-n // T) - 1).bit_length()
        T = -(-n // M)  # fewest slices of M lanes
        levels = M.bit_length() - 1
        # (..., T*M) -> (T, ..., M): slice t is added at iteration t; infinity (all-zero) padding
        xs = [jnp.moveaxis(_pad_last(c, T * M).reshape(rest + (T, M)), -2, 0) for c in cs]

        def body(i, acc):
            t = jnp.minimum(i, T - 1)
            fold = i < T
            x_t = kind(*[lax.dynamic_index_in_dim(x, t, 0, keepdims=False) for x in xs])
            even = kind(*[jnp.concatenate([c[..., 0::2], jnp.zeros_like(c[..., 0::2])], axis=-1) for c in acc])
            odd = kind(*[jnp.concatenate([c[..., 1::2], jnp.zeros_like(c[..., 1::2])], axis=-1) for c in acc])
            lhs = kind(*[jnp.where(fold, a, e) for a, e in zip(acc, even)]) if M > 1 else acc
            rhs = kind(*[jnp.where(fold, x, o) for x, o in zip(x_t, odd)]) if M > 1 else x_t
            return add(lhs, rhs)

        acc0 = kind(*[jnp.zeros(rest + (M,), jnp.uint32) for _ in cs])
        acc = lax.fori_loop(0, T + levels, body, acc0)
        return kind(*[c[..., 0] for c in acc])


def _broadcast_coord(c, shape, lead, name):
    if name == "inf":
        return jnp.broadcast_to(c, shape)
    return jnp.broadcast_to(c, c.shape[:lead] + tuple(shape))


def _pad_last(c, size):
    n = c.shape[-1]
    if n == size:
        return c
    pad = [(0, 0)] * (c.ndim - 1) + [(0, size - n)]
    return jnp.pad(c, pad)


g1 = Curve("g1", ops_field.fq, ref_curve.g1, coord_ndim=1)
g2 = Curve("g2", ops_field.fq2, ref_curve.g2, coord_ndim=2)

CURVES = {"g1": g1, "g2": g2}
