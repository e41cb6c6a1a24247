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
            return BatchedWord.of(self, len(v)).xor(cs, other, label)
        bits = [B.xor(cs, a, b, label) for a, b in zip(self.bits, other.bits)]
        return UInt32(bits, v)


def xor3(cs: ConstraintSystem, a: UInt32, b: UInt32, c: UInt32, label: str = "xor3") -> UInt32:
    return a.xor(cs, b, label).xor(cs, c, label)


def ch(cs: ConstraintSystem, e: UInt32, f: UInt32, g: UInt32, label: str = "ch") -> UInt32:
    v = None if e.value is None else (e.value & f.value) ^ (~e.value & g.value & MASK32)
    if cs.batched and isinstance(v, np.ndarray):
        return _ch_batched(cs, e, f, g, v, label)
    bits = [B.ch(cs, x, y, z, label) for x, y, z in zip(e.bits, f.bits, g.bits)]
    return UInt32(bits, v)


def maj(cs: ConstraintSystem, a: UInt32, b: UInt32, c: UInt32, label: str = "maj") -> UInt32:
    v = None if a.value is None else (a.value & b.value) ^ (a.value & c.value) ^ (b.value & c.value)
    if cs.batched and isinstance(v, np.ndarray):
        return _maj_batched(cs, a, b, c, v, label)
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
    if cs.batched and not cs.keep and isinstance(total, np.ndarray):  # one block, a BatchedWord result
        j0 = cs.alloc_bits_block(bit_values)
        cs.num_constraints += nbits + 1
        return BatchedWord(-1 - (j0 + _AR32), _NO32, _ZERO32, _NO32, total & MASK32, True)
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


# -- batched words (vector_witness.BatchCS) ----------------------------------------------------------------------------
# In a batched witness run a word keeps its 32 bits as arrays -- encoded variable index, constant flag, constant
# value, negation -- and its value as an int64 array over the instances, so xor / ch / maj / add work on all 32 bits
# with a few numpy operations and allocate their wires as one block, in the order (and with the values) the per-bit
# gadgets would. Bits that the common case does not cover (constants, repeated variables) go through the per-bit
# gadget, in bit order. ``bits`` materialises Booleans when a caller needs them (digests, message packing).


_AR32 = np.arange(32, dtype=np.int64)
_NO32 = np.zeros(32, bool)
_ZERO32 = np.zeros(32, np.uint8)
_ROT = [(_AR32 + n) % 32 for n in range(32)]


class BatchedWord(UInt32):
    __slots__ = ("var", "const", "cval", "neg", "_bits", "allvar")

    def __init__(self, var, const, cval, neg, value, allvar: bool | None = None):
        self.var, self.const, self.cval, self.neg, self.value = var, const, cval, neg, value
        self._bits = None
        self.allvar = (not const.any()) if allvar is None else allvar  # no constant bit

    @staticmethod
    def of(word: UInt32, n: int) -> "BatchedWord":
        if isinstance(word, BatchedWord):
            return word
        bits = word.bits
        var = np.array([0 if b.var is None else b.var for b in bits], np.int64)
        const = np.array([b.var is None for b in bits], bool)
        cval = np.array([b.value if b.var is None else 0 for b in bits], np.uint8)
        neg = np.array([bool(b.neg) and b.var is not None for b in bits], bool)
        value = np.broadcast_to(np.asarray(word.value, np.int64), (n,))
        return BatchedWord(var, const, cval, neg, value)

    @property
    def bits(self) -> list:
        if self._bits is None:
            vb = B.word_bits(self.value)
            self._bits = [(B.TRUE if self.cval[i] else B.FALSE) if self.const[i]
                          else B.Boolean(int(self.var[i]), bool(self.neg[i]), vb[i]) for i in range(32)]
        return self._bits

    def _perm(self, idx, value) -> "BatchedWord":
        return BatchedWord(self.var[idx], self.const[idx], self.cval[idx], self.neg[idx], value, self.allvar)

    def rotr(self, n: int) -> "BatchedWord":
        n %= 32
        return self._perm(_ROT[n], ((self.value >> n) | (self.value << (32 - n))) & MASK32)

    def shr(self, n: int) -> "BatchedWord":
        idx = np.minimum(np.arange(32) + n, 32)
        ext = lambda a, fill: np.concatenate([a, [fill]])  # noqa: E731  (index 32 = the constant 0)
        return BatchedWord(ext(self.var, 0)[idx], ext(self.const, True)[idx], ext(self.cval, 0)[idx],
                           ext(self.neg, False)[idx], self.value >> n)

    @property
    def is_constant(self) -> bool:
        return not self.allvar and bool(self.const.all())

    def xor(self, cs: ConstraintSystem, other: "UInt32", label: str = "xor") -> "BatchedWord":
        a, b = self, BatchedWord.of(other, len(self.value))
        w = a.value ^ b.value
        if a.allvar and b.allvar and not (a.var == b.var).any():
            # the common case: every bit allocates one wire holding the xor of the un-negated variables
            neg = a.neg ^ b.neg
            raw = B.word_bits(w)
            if neg.any():
                raw ^= neg.astype(np.uint8)[:, None]
            j0 = cs.alloc_bits_block(raw)
            cs.num_constraints += 32
            return BatchedWord(-1 - (j0 + _AR32), _NO32, _ZERO32, neg, w, True)
        ac, bc = a.const, b.const
        var, const = np.where(ac, b.var, a.var), ac & bc
        cval = a.cval ^ b.cval  # for constant results; for a constant operand the other is negated by its value
        neg = np.where(ac, b.neg ^ (a.cval == 1), np.where(bc, a.neg ^ (b.cval == 1), a.neg ^ b.neg))
        both = ~ac & ~bc
        same = both & (a.var == b.var)
        const = const | same
        cval = np.where(same, (a.neg != b.neg).astype(np.uint8), cval)
        alloc = both & ~same
        k = int(alloc.sum())
        if k:
            raw = B.word_bits(w)[alloc] ^ neg[alloc].astype(np.uint8)[:, None]
            j0 = cs.alloc_bits_block(raw)
            cs.num_constraints += k
            var = var.copy()
            var[alloc] = -1 - (j0 + np.arange(k))
        neg = neg & ~const
        return BatchedWord(var, const, np.where(const, cval, 0).astype(np.uint8), neg, w)


def _emit_runs(cs, fast, rows, per_bit: int, slow, out_var):
    """Allocate the fast bits' wires (``rows[t]``: ``per_bit`` raw rows for the t-th fast bit; the last one is the
    bit's own wire) as blocks between the slow bits, whose per-bit gadget ``slow(i)`` runs in bit order; fills
    ``out_var`` for the fast bits. Returns ``{i: Boolean}`` for the slow bits."""
    slow_out = {}
    order = np.flatnonzero(fast)
    pos = {int(i): t for t, i in enumerate(order)}
    run: list[int] = []

    def flush():
        if not run:
            return
        ts = [pos[i] for i in run]
        mat = rows[ts].reshape(len(ts) * per_bit, -1)
        j0 = cs.alloc_bits_block(mat)
        cs.num_constraints += len(ts) * per_bit
        for t, i in enumerate(run):
            out_var[i] = -1 - (j0 + t * per_bit + per_bit - 1)
        run.clear()

    for i in range(32):
        if fast[i]:
            run.append(i)
        else:
            flush()
            slow_out[i] = slow(i)
    flush()
    return slow_out


def _word_from(fast, out_var, slow_out, value) -> BatchedWord:
    var = out_var.copy()
    const = np.zeros(32, bool)
    cval = np.zeros(32, np.uint8)
    neg = np.zeros(32, bool)
    for i, bit in slow_out.items():
        if bit.var is None:
            const[i], cval[i] = True, bit.value
        else:
            var[i], neg[i] = bit.var, bit.neg
    return BatchedWord(var, const, cval, neg, value)


def _ch_batched(cs, e, f, g, v, label):
    n = len(v)
    e, f, g = (BatchedWord.of(x, n) for x in (e, f, g))
    if e.allvar and f.allvar and g.allvar:
        fast = ~((f.var == g.var) & (f.neg == g.neg))
    else:
        fast = ~e.const & ~f.const & ~g.const & ~((f.var == g.var) & (f.neg == g.neg))
    vb = B.word_bits(v)
    if fast.all():  # the common case: one wire per bit, holding ch
        j0 = cs.alloc_bits_block(vb)
        cs.num_constraints += 32
        return BatchedWord(-1 - (j0 + _AR32), _NO32, _ZERO32, _NO32, v, True)
    rows = vb[fast][:, None, :]
    eb, fb, gb = e.bits if not fast.all() else None, f.bits if not fast.all() else None, \
        g.bits if not fast.all() else None
    out_var = np.zeros(32, np.int64)
    slow_out = _emit_runs(cs, fast, rows, 1, lambda i: B.ch(cs, eb[i], fb[i], gb[i], label), out_var)
    return _word_from(fast, out_var, slow_out, v)


def _maj_batched(cs, a, b, c, v, label):
    n = len(v)
    a, b, c = (BatchedWord.of(x, n) for x in (a, b, c))
    fast = (a.var != b.var) & (a.var != c.var) & (b.var != c.var)
    if not (a.allvar and b.allvar and c.allvar):
        fast &= ~a.const & ~b.const & ~c.const
    vb = B.word_bits(v)
    bc = B.word_bits(np.broadcast_to(np.asarray(b.value & c.value, np.int64), v.shape))
    if fast.all():  # the common case: per bit the and_ wire b & c, then maj's own
        mat = np.empty((64, n), np.uint8)
        mat[0::2], mat[1::2] = bc, vb
        j0 = cs.alloc_bits_block(mat)
        cs.num_constraints += 64
        return BatchedWord(-1 - (j0 + 2 * _AR32 + 1), _NO32, _ZERO32, _NO32, v, True)
    rows = np.stack([bc[fast], vb[fast]], axis=1)  # per fast bit: the and_ wire bc, then maj's own
    slow_bits = not fast.all()
    ab, bb, cb = (a.bits, b.bits, c.bits) if slow_bits else (None, None, None)
    out_var = np.zeros(32, np.int64)
    slow_out = _emit_runs(cs, fast, rows, 2, lambda i: B.maj(cs, ab[i], bb[i], cb[i], label), out_var)
    return _word_from(fast, out_var, slow_out, v)


def as_batched(cs: ConstraintSystem, word: UInt32) -> UInt32:
    """``word`` as a :class:`BatchedWord` in a batched witness run (else unchanged)."""
    if cs.batched and not cs.keep and isinstance(word.value, np.ndarray) and not isinstance(word, BatchedWord):
        return BatchedWord.of(word, len(word.value))
    return word
