"""32-bit words as 32 :class:`~cuzk_jax.circuits.gadgets.boolean.Boolean` bits (least significant first).

Rotations and shifts rearrange bits (free); XOR costs one constraint per non-constant bit pair; addition of ``k``
words mod 2^32 (:func:`add_many`) allocates the ``32 + ceil(log2 k)`` bits of the full sum (booleanity each) and ties
them to the operands with one packing constraint ``sum operands * 1 = sum 2^i s_i``, keeping the low 32 bits.
Constant operands and all-constant operations fold to constants.
"""

from __future__ import annotations

import numpy as np

from ..cs import ONE_INDEX, ConstraintSystem
from . import boolean as B

MASK32 = 0xFFFFFFFF


class UInt32:
    __slots__ = ("bits", "value")

    def __init__(self, bits: list, value: int | None):
        assert len(bits) == 32
        self.bits = bits
        self.value = value

    def __repr__(self) -> str:
        v = "?" if self.value is None else f"{self.value:#010x}"
        return f"UInt32({v})"

    @staticmethod
    def constant(v: int) -> "UInt32":
        v &= MASK32
        return UInt32([B.TRUE if (v >> i) & 1 else B.FALSE for i in range(32)], v)

    @staticmethod
    def alloc(cs: ConstraintSystem, value: int | None, label: str = "uint32") -> "UInt32":
        vals = None if value is None else [(value >> i) & 1 for i in range(32)]
        return UInt32(B.alloc_bits(cs, vals, 32, label), value)

    @staticmethod
    def from_bits_be(bits) -> "UInt32":
        """From 32 bits, most significant first (SHA-256 message order)."""
        le = list(reversed(bits))
        return UInt32(le, B.pack_value(le))

    def to_bits_be(self) -> list:
        return list(reversed(self.bits))

    @property
    def is_constant(self) -> bool:
        return all(b.var is None for b in self.bits)

    def rotr(self, n: int) -> "UInt32":
        n %= 32
        bits = self.bits[n:] + self.bits[:n]
        v = None if self.value is None else ((self.value >> n) | (self.value << (32 - n))) & MASK32
        return UInt32(bits, v)

    def shr(self, n: int) -> "UInt32":
        bits = self.bits[n:] + [B.FALSE] * n
        return UInt32(bits, None if self.value is None else self.value >> n)

    def xor(self, cs: ConstraintSystem, other: "UInt32", label: str = "xor") -> "UInt32":
        v = None if self.value is None or other.value is None else self.value ^ other.value
        if cs.batched and isinstance(v, np.ndarray):
            return UInt32(B.xor_bits_batched(cs, self.bits, other.bits, B.word_bits(v), label), v)
        bits = [B.xor(cs, a, b, label) for a, b in zip(self.bits, other.bits)]
        return UInt32(bits, v)


def xor3(cs: ConstraintSystem, a: UInt32, b: UInt32, c: UInt32, label: str = "xor3") -> UInt32:
    return a.xor(cs, b, label).xor(cs, c, label)


def ch(cs: ConstraintSystem, e: UInt32, f: UInt32, g: UInt32, label: str = "ch") -> UInt32:
    v = None if e.value is None else (e.value & f.value) ^ (~e.value & g.value & MASK32)
    if cs.batched and isinstance(v, np.ndarray):
        return UInt32(B.ch_bits_batched(cs, e.bits, f.bits, g.bits, B.word_bits(v), label), v)
    bits = [B.ch(cs, x, y, z, label) for x, y, z in zip(e.bits, f.bits, g.bits)]
    return UInt32(bits, v)


def maj(cs: ConstraintSystem, a: UInt32, b: UInt32, c: UInt32, label: str = "maj") -> UInt32:
    v = None if a.value is None else (a.value & b.value) ^ (a.value & c.value) ^ (b.value & c.value)
    if cs.batched and isinstance(v, np.ndarray):
        bc = np.broadcast_to(np.asarray(b.value & c.value, np.int64), v.shape)
        return UInt32(B.maj_bits_batched(cs, a.bits, b.bits, c.bits, B.word_bits(v), B.word_bits(bc), label), v)
    bits = [B.maj(cs, x, y, z, label) for x, y, z in zip(a.bits, b.bits, c.bits)]
    return UInt32(bits, v)


def add_many(cs: ConstraintSystem, operands, label: str = "add") -> UInt32:
    """``sum(operands) mod 2^32``. Cost: ``nbits`` booleanity + 1 packing constraint, where ``nbits`` is the bit
    length of the largest possible sum (0 constraints when every operand is constant)."""
    const = 0
    variable = []
    for op in operands:
        if op.is_constant:
            const += op.value
        else:
            variable.append(op)
    if not variable:
        return UInt32.constant(const)
    max_sum = len(variable) * MASK32 + const
    nbits = max_sum.bit_length()
    known = cs.has_values
    total = None
    bit_values = None
    if known:
        total = const
        for op in variable:
            total = total + op.value
        if isinstance(total, np.ndarray):  # batched values (vector_witness): all the sum's bits in one operation
            total = total.astype(np.int64)
            bit_values = B.word_bits(total, nbits)
        else:
            bit_values = [(total >> i) & 1 for i in range(nbits)]
    # the full sum's bits (booleanity constraints), least significant first
    sbits = B.alloc_bits(cs, bit_values, nbits, label + "/boolean")
    if cs.keep:
        lhs = [(ONE_INDEX, const)] if const else []
        for op in variable:
            lhs.extend(B.pack_terms(op.bits))
        cs.enforce_raw(lhs, [(ONE_INDEX, 1)], B.pack_terms(sbits), label + "/pack")
    else:
        cs.num_constraints += 1
    return UInt32(sbits[:32], None if total is None else total & MASK32)
