"""Field-element gadgets: :class:`Num` (a linear combination with its witness value) and Fr arithmetic.

Linear operations (``+``, ``-``, scaling by a constant) are free: they build linear combinations. Products cost one
constraint each. Bit decomposition (:func:`to_bits_le`) costs one booleanity constraint per bit plus one packing
constraint; with fewer than 255 bits the decomposition is unique (every value below ``2^254 < r`` has one).
"""

from __future__ import annotations

import numpy as np

from cuzk_jax.reference.constants import R

from ..cs import ONE_INDEX, ConstraintSystem, LinearCombination, SynthesisError, Variable
from . import boolean as B


class Num:
    """A field element inside a circuit: ``lc`` (a :class:`LinearCombination`) and ``value`` (int in ``[0, r)``,
    or None when the constraint system records no values)."""

    __slots__ = ("lc", "value")

    def __init__(self, lc: LinearCombination, value: int | None):
        self.lc = lc
        self.value = value

    @staticmethod
    def constant(c: int) -> "Num":
        c %= R
        return Num(LinearCombination({ONE_INDEX: c} if c else {}), c)

    @staticmethod
    def of_variable(var: Variable | int, value: int | None) -> "Num":
        idx = var.index if isinstance(var, Variable) else var
        return Num(LinearCombination({idx: 1}), value)

    @staticmethod
    def from_terms(terms, value: int | None) -> "Num":
        return Num(LinearCombination.of(list(terms)), value)

    def terms(self) -> list:
        return list(self.lc.terms.items())

    def constant_value(self) -> int | None:
        return self.lc.constant_value()

    def __repr__(self) -> str:
        return f"Num({len(self.lc)} terms, value={self.value})"

    def _coerce(self, other):
        if isinstance(other, Num):
            return other
        if isinstance(other, (int,)) and not isinstance(other, bool):
            return Num.constant(other)
        raise SynthesisError(f"cannot combine Num with {type(other).__name__}")

    def __add__(self, other) -> "Num":
        o = self._coerce(other)
        v = None if self.value is None or o.value is None else (self.value + o.value) % R
        return Num(self.lc + o.lc, v)

    __radd__ = __add__

    def __sub__(self, other) -> "Num":
        o = self._coerce(other)
        v = None if self.value is None or o.value is None else (self.value - o.value) % R
        return Num(self.lc - o.lc, v)

    def __rsub__(self, other) -> "Num":
        return self._coerce(other) - self

    def __neg__(self) -> "Num":
        return Num(-self.lc, None if self.value is None else (-self.value) % R)

    def __mul__(self, k) -> "Num":
        if isinstance(k, Num):
            raise SynthesisError("Num * Num needs a constraint: use gadgets.num.mul(cs, a, b)")
        return Num(self.lc * k, None if self.value is None else self.value * k % R)

    __rmul__ = __mul__


def alloc_num(cs: ConstraintSystem, value, name: str = "num") -> Num:
    """A new private field element (no constraint)."""
    var = cs.alloc(value, name)
    return Num.of_variable(var, cs.value_raw(var.index) if cs.has_values else None)


def alloc_input_num(cs: ConstraintSystem, value, name: str = "input") -> Num:
    """A new public input (no constraint)."""
    var = cs.alloc_input(value, name)
    return Num.of_variable(var, cs.value_raw(var.index) if cs.has_values else None)


def mul(cs: ConstraintSystem, a: Num, b: Num, label: str = "mul") -> Num:
    """``a * b`` (1 constraint; 0 when an operand is constant)."""
    ca, cb = a.constant_value(), b.constant_value()
    if ca is not None:
        return b * ca
    if cb is not None:
        return a * cb
    value = None if a.value is None or b.value is None else a.value * b.value % R
    out = cs.alloc_raw(value)
    cs.enforce_raw(a.terms(), b.terms(), [(out, 1)], label)
    return Num.of_variable(out, value)


def square(cs: ConstraintSystem, a: Num, label: str = "square") -> Num:
    return mul(cs, a, a, label)


def enforce_equal(cs: ConstraintSystem, a: Num, b: Num, label: str = "equal") -> None:
    """``(a - b) * 1 = 0`` (1 constraint)."""
    cs.enforce_raw((a - b).terms(), [(ONE_INDEX, 1)], (), label)


def to_bits_le(cs: ConstraintSystem, a: Num, nbits: int, label: str = "bits") -> list:
    """Decompose ``a`` into ``nbits`` Booleans, least significant first (``nbits + 1`` constraints).

    With ``nbits <= 254`` the decomposition is unique and proves ``a < 2^nbits``.
    """
    if not 1 <= nbits <= 254:
        raise ValueError(f"to_bits_le: nbits must be in [1, 254] (unique decomposition), got {nbits}")
    vals = None
    if isinstance(a.value, np.ndarray):  # batched values (vector_witness): every instance's bits at once
        if any(int(v) >> nbits for v in a.value):
            raise SynthesisError(f"to_bits_le: value does not fit in {nbits} bits")
        vals = B.ints_to_bits(a.value, nbits)
    elif a.value is not None:
        if a.value >> nbits:
            raise SynthesisError(f"to_bits_le: value does not fit in {nbits} bits")
        vals = [(a.value >> i) & 1 for i in range(nbits)]
    bits = B.alloc_bits(cs, vals, nbits, label + "/boolean")
    if cs.keep:
        cs.enforce_raw(B.pack_terms(bits), [(ONE_INDEX, 1)], a.terms(), label + "/pack")
    else:
        cs.num_constraints += 1
    return bits


def from_bits_le(bits) -> Num:
    """``sum 2^i bits[i]`` as a Num (free)."""
    return Num(LinearCombination.of(B.pack_terms(bits)), fr_value(B.pack_value(bits)))


def fr_value(v):
    """A Num value as the field code expects it: an int, None, or (batched values) an object array of Python
    ints (a uint8 / int64 array of bits or small words is converted, so products by large constants stay exact)."""
    if isinstance(v, np.ndarray) and v.dtype != object:
        out = np.empty(v.shape, object)
        out[:] = v.tolist()
        return out
    return v


def conditional_swap(cs: ConstraintSystem, a: Num, b: Num, bit: B.Boolean, label: str = "swap") -> tuple[Num, Num]:
    """``(a, b)`` if ``bit`` is 0 else ``(b, a)`` (1 constraint: ``bit * (b - a) = left - a``)."""
    if bit.var is None:
        return (b, a) if bit.value else (a, b)
    value = None
    if isinstance(bit.value, np.ndarray):  # batched values: select per instance
        value = np.where(bit.value.astype(bool), fr_value(b.value), fr_value(a.value))
    elif a.value is not None:
        value = b.value if bit.value else a.value
    left = cs.alloc_raw(value)
    cs.enforce_raw(bit.terms(), (b - a).terms(), [(left, 1)] + (-a).terms(), label)
    left_n = Num.of_variable(left, value)
    return left_n, a + b - left_n


def one_hot(cs: ConstraintSystem, bits, label: str = "one_hot") -> list[Num]:
    """Selectors ``s_j = [index == j]`` for ``j < 2^k`` from ``k`` index bits, LSB first (``2^k - 2`` constraints)."""
    sel = [Num.constant(1)]
    for i, b in enumerate(bits):
        bn = Num(b.lc(), fr_value(b.value))
        hi = [mul(cs, s, bn, label) for s in sel]
        lo = [s - h for s, h in zip(sel, hi)]
        sel = lo + hi
    return sel


def insert(cs: ConstraintSystem, cur: Num, siblings: list, index_bits, label: str = "insert") -> list:
    """Place ``cur`` at position ``index`` (given as ``k`` bits, LSB first) among ``2^k - 1`` ordered siblings.

    Returns the ``2^k`` children ``c`` with ``c[index] = cur``, ``c[j] = siblings[j]`` for ``j < index`` and
    ``c[j] = siblings[j - 1]`` for ``j > index`` (filecoin's ``insert`` convention for Merkle path elements).
    Cost: 1 constraint for ``k = 1``; ``(2^k - 2) + (2^k - 2) + (2^k - 1)`` in general (19 for arity 8).
    """
    k = len(index_bits)
    a = 1 << k
    if len(siblings) != a - 1:
        raise ValueError(f"insert: arity {a} needs {a - 1} siblings, got {len(siblings)}")
    if k == 1:
        left, right = conditional_swap(cs, cur, siblings[0], index_bits[0], label)
        return [left, right]
    s = one_hot(cs, index_bits, label + "/select")
    # g[j] = [index < j] = sum_{i<j} s_i ; q[j] = the child at j when j != index
    g = [Num.constant(0)]
    for j in range(1, a):
        g.append(g[-1] + s[j - 1])
    q = [siblings[0]]
    for j in range(1, a - 1):
        q.append(siblings[j] + mul(cs, g[j], siblings[j - 1] - siblings[j], label + "/shift"))
    q.append(siblings[a - 2])
    children = []
    for j in range(a - 1):
        children.append(q[j] + mul(cs, s[j], cur - q[j], label + "/place"))
    # the children sum to cur + sum(siblings), which fixes the last one for free
    total = cur
    for sib in siblings:
        total = total + sib
    last = total
    for c in children:
        last = last - c
    children.append(last)
    return children
