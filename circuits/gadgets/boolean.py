"""Boolean gadgets: allocated bits, constants, negation (free), AND, XOR, and the SHA-256 bit functions ch / maj.

A :class:`Boolean` is either a constant (``var is None``; ``value`` is 0 or 1) or an allocated variable ``var``
constrained to {0, 1}, possibly negated (``neg``: the bit is ``1 - z[var]``). Negation costs nothing; constants are
folded, so a gadget fed constants emits no constraints (the constant padding block of SHA-256 costs only what its
variable state forces). ``value`` is the bit's witness value (with the negation applied), ``None`` in structure
mode. Constraint forms follow bellpepper's ``boolean.rs``:

* booleanity: ``b * (1 - b) = 0``;
* AND: ``a * b = c``;
* XOR: ``(2a) * b = a + b - c``;
* ch(e, f, g) = (e & f) ^ (~e & g):  ``e * (f - g) = ch - g``  (1 constraint);
* maj(a, b, c): ``bc = b * c``; ``a * (b + c - 2bc) = maj - bc``  (2 constraints).
"""

from __future__ import annotations

import numpy as np

from ..cs import ONE_INDEX, ConstraintSystem, LinearCombination


class Boolean:
    __slots__ = ("var", "neg", "value")

    def __init__(self, var: int | None, neg: bool, value: int | None):
        self.var = var
        self.neg = neg
        self.value = value

    @property
    def is_constant(self) -> bool:
        return self.var is None

    def __repr__(self) -> str:
        if self.var is None:
            return f"Boolean({self.value})"
        return f"Boolean({'~' if self.neg else ''}v{self.var}={self.value})"

    def terms(self, k: int = 1) -> list:
        """``k * bit`` as a term list ``[(encoded index, coeff)]``."""
        if self.var is None:
            return [(ONE_INDEX, k)] if self.value else []
        if self.neg:
            return [(ONE_INDEX, k), (self.var, -k)]
        return [(self.var, k)]

    def lc(self):
        return LinearCombination.of(self.terms())


FALSE = Boolean(None, False, 0)
TRUE = Boolean(None, False, 1)


def constant(b) -> Boolean:
    return TRUE if b else FALSE


def not_(a: Boolean) -> Boolean:
    if a.var is None:
        return FALSE if a.value else TRUE
    return Boolean(a.var, not a.neg, None if a.value is None else 1 - a.value)


def alloc_bit(cs: ConstraintSystem, value: int | None, label: str = "boolean") -> Boolean:
    """A new private bit with its booleanity constraint ``b * (1 - b) = 0`` (1 constraint)."""
    if cs.has_values:
        value = _check_bit(value, "alloc_bit")
    else:
        value = None
    v = cs.alloc_raw(value)
    if cs.keep:
        cs.enforce_boolean_raw(v, cs.label_id(label))
    else:
        cs.num_constraints += 1
    return Boolean(v, False, value)


def alloc_bits(cs: ConstraintSystem, values, n: int, label: str = "boolean") -> list[Boolean]:
    """``n`` new bits with booleanity constraints; ``values``: n bits, or None in structure mode."""
    if cs.batched and not cs.keep and values is not None:  # batched witness: one block of n wires
        mat = np.asarray(values if not isinstance(values, list) else np.stack(values)).astype(np.uint8, copy=False)
        if mat.ndim == 1:  # one value per bit for every instance
            mat = np.repeat(mat[:, None], cs.n, axis=1)
        if mat.shape[0] != n or (mat.size and mat.max() > 1):
            raise ValueError(f"alloc_bits: need {n} bit values (0 or 1)")
        j0 = cs.alloc_bits_block(mat)
        cs.num_constraints += n
        return [Boolean(-1 - (j0 + i), False, mat[i]) for i in range(n)]
    if not cs.has_values:
        values = [None] * n
    elif values is None or len(values) != n:
        raise ValueError(f"alloc_bits: need {n} bit values")
    out = []
    keep = cs.keep
    li = cs.label_id(label) if keep else 0
    for val in values:
        if val is not None:
            val = _check_bit(val, "alloc_bits")
        v = cs.alloc_raw(val)
        if keep:
            cs.enforce_boolean_raw(v, li)
        else:
            cs.num_constraints += 1
        out.append(Boolean(v, False, val))
    return out


def _check_bit(value, where: str):
    """A bit value: 0 / 1 (an int), or -- batched witness synthesis (:mod:`..vector_witness`) -- a uint8 array of
    0/1 per instance (checked with one vectorised comparison)."""
    if isinstance(value, np.ndarray):
        if value.dtype != np.uint8:
            value = value.astype(np.uint8)
        if value.size and value.max() > 1:
            raise ValueError(f"{where}: values must be 0 or 1")
        return value
    if value not in (0, 1, True, False):
        raise ValueError(f"{where}: value must be 0 or 1, got {value!r}")
    return int(value)


def and_(cs: ConstraintSystem, a: Boolean, b: Boolean, label: str = "and") -> Boolean:
    if a.var is None:
        return b if a.value else FALSE
    if b.var is None:
        return a if b.value else FALSE
    if a.var == b.var:
        return a if a.neg == b.neg else FALSE
    value = None if a.value is None else a.value & b.value
    c = cs.alloc_raw(value)
    if cs.keep:
        cs.enforce_raw(a.terms(), b.terms(), [(c, 1)], label)
    else:
        cs.num_constraints += 1
    return Boolean(c, False, value)


def or_(cs: ConstraintSystem, a: Boolean, b: Boolean, label: str = "or") -> Boolean:
    return not_(and_(cs, not_(a), not_(b), label))


def xor(cs: ConstraintSystem, a: Boolean, b: Boolean, label: str = "xor") -> Boolean:
    if a.var is None:
        return not_(b) if a.value else b
    if b.var is None:
        return not_(a) if b.value else a
    if a.var == b.var:
        return TRUE if a.neg != b.neg else FALSE
    # xor of the underlying (un-negated) variables; negations flip the result for free
    neg = a.neg != b.neg
    if a.value is None:
        uv = value = None
    else:
        value = a.value ^ b.value
        uv = value ^ int(neg)
    c = cs.alloc_raw(uv)
    if cs.keep:
        cs.enforce_xor_raw(a.var, b.var, c, cs.label_id(label))
    else:
        cs.num_constraints += 1
    return Boolean(c, neg, value)


def xor3(cs: ConstraintSystem, a: Boolean, b: Boolean, c: Boolean, label: str = "xor3") -> Boolean:
    return xor(cs, xor(cs, a, b, label), c, label)


def _same(a: Boolean, b: Boolean) -> bool:
    return a.var == b.var and a.neg == b.neg and (a.var is not None or a.value == b.value)


def ch(cs: ConstraintSystem, e: Boolean, f: Boolean, g: Boolean, label: str = "ch") -> Boolean:
    """SHA-256 Ch: ``f if e else g`` (FIPS 180-4 section 4.1.2)."""
    if e.var is None:
        return f if e.value else g
    if _same(f, g):
        return f
    if f.var is None and g.var is None:  # f != g
        return e if f.value else not_(e)
    if f.var is None:
        return not_(and_(cs, not_(e), not_(g), label)) if f.value else and_(cs, not_(e), g, label)
    if g.var is None:
        return not_(and_(cs, e, not_(f), label)) if g.value else and_(cs, e, f, label)
    # f if e else g, written without a branch so batched (array) values work too
    value = None if e.value is None else g.value ^ (e.value & (f.value ^ g.value))
    out = cs.alloc_raw(value)
    if cs.keep:
        cs.enforce_raw(e.terms(), f.terms() + g.terms(-1), [(out, 1)] + g.terms(-1), label)
    else:
        cs.num_constraints += 1
    return Boolean(out, False, value)


def maj(cs: ConstraintSystem, a: Boolean, b: Boolean, c: Boolean, label: str = "maj") -> Boolean:
    """SHA-256 Maj: the majority of three bits (FIPS 180-4 section 4.1.2)."""
    for x, y, z in ((a, b, c), (b, a, c), (c, a, b)):
        if x.var is None:  # maj(0, y, z) = y & z ; maj(1, y, z) = y | z
            return or_(cs, y, z, label) if x.value else and_(cs, y, z, label)
    for x, y, z in ((a, b, c), (a, c, b), (b, c, a)):
        if x.var == y.var:
            return x if x.neg == y.neg else z
    bc = and_(cs, b, c, label)
    value = None if a.value is None else (a.value & b.value) | (a.value & c.value) | (b.value & c.value)
    out = cs.alloc_raw(value)
    if cs.keep:
        # maj = bc + a (b + c - 2 bc)
        cs.enforce_raw(a.terms(), b.terms() + c.terms() + bc.terms(-2), [(out, 1)] + bc.terms(-1), label)
    else:
        cs.num_constraints += 1
    return Boolean(out, False, value)


def pack_terms(bits, start_power: int = 0) -> list:
    """``sum 2^(start_power + i) * bits[i]`` as a term list (bits least significant first)."""
    out = []
    for i, b in enumerate(bits):
        if b.var is None:
            if b.value:
                out.append((ONE_INDEX, 1 << (start_power + i)))
        else:
            out.extend(b.terms(1 << (start_power + i)))
    return out


def pack_value(bits) -> int | None:
    """``sum 2^i bits[i].value`` (bits least significant first); None in structure mode. Batched values (arrays,
    see :mod:`..vector_witness`) pack into an int64 array up to 62 bits, an object array of Python ints above."""
    v = 0
    batched = False
    for b in bits:
        if b.value is None:
            return None
        batched = batched or isinstance(b.value, np.ndarray)
    if batched:
        return _pack_array([b.value for b in bits])
    for i, b in enumerate(bits):
        v |= b.value << i
    return v


def _pack_array(values) -> np.ndarray:
    n = max(np.size(x) for x in values)
    mat = np.empty((len(values), n), np.uint8)
    for i, x in enumerate(values):
        mat[i] = x
    if len(values) <= 62:
        w = np.left_shift(np.int64(1), np.arange(len(values), dtype=np.int64))
        return (w @ mat.astype(np.int64)).astype(np.int64)
    return bits_to_ints(mat)


def bits_to_ints(mat: np.ndarray) -> np.ndarray:
    """``(nbits, N)`` 0/1 rows (least significant first) -> an object array of N Python ints."""
    nbits, n = mat.shape
    nbytes = -(-nbits // 8)
    packed = np.packbits(np.ascontiguousarray(mat.T), axis=1, bitorder="little")  # (N, nbytes)
    raw = packed.tobytes()
    out = np.empty(n, object)
    out[:] = [int.from_bytes(raw[k * nbytes:(k + 1) * nbytes], "little") for k in range(n)]
    return out


def ints_to_bits(values: np.ndarray, nbits: int) -> np.ndarray:
    """Object array of N non-negative Python ints below ``2^256`` -> ``(nbits, N)`` uint8 bits (LSB first)."""
    raw = b"".join([int(v).to_bytes(32, "little") for v in values])
    bits = np.unpackbits(np.frombuffer(raw, np.uint8).reshape(len(values), 32), axis=1, bitorder="little")
    return np.ascontiguousarray(bits[:, :nbits].T)


# -- batched word-level fast paths (vector_witness.BatchCS) ------------------------------------------------------------
# The per-bit gadgets above allocate a wire only for some bit combinations (constants fold, equal variables
# cancel); the fast paths walk the bits in the same order, take the per-bit gadget for every bit that does not
# allocate exactly as the common case does, and allocate the common-case bits in blocks -- so wires come out in
# the per-bit gadgets' order and with their values.


def word_bits(word: np.ndarray, nbits: int = 32) -> np.ndarray:
    """An int64 array of words -> ``(nbits, N)`` uint8 bits, least significant first."""
    shifts = _SHIFTS[:nbits] if nbits <= 64 else np.arange(nbits, dtype=np.int64)[:, None]
    return ((word[None, :] >> shifts) & 1).astype(np.uint8)


_SHIFTS = np.arange(64, dtype=np.int64)[:, None]


class _Blocks:
    """Pending common-case allocations -- rows of a source matrix (``src[idx] ^ neg``) and the Booleans they
    become -- flushed as one block."""

    def __init__(self, cs, src: np.ndarray):
        self.cs, self.src, self.idx, self.negs, self.slots = cs, src, [], [], []

    def add(self, row: int, neg: bool, out, i):
        self.idx.append(row)
        self.negs.append(neg)
        self.slots.append((out, i, neg, row))

    def flush(self):
        if not self.idx:
            return
        mat = self.src[self.idx]
        if any(self.negs):
            mat ^= np.asarray(self.negs, np.uint8)[:, None]
        j0 = self.cs.alloc_bits_block(mat)
        self.cs.num_constraints += len(self.idx)
        src = self.src
        for t, (out, i, neg, row) in enumerate(self.slots):
            out[i] = Boolean(-1 - (j0 + t), neg, src[row])
        self.idx, self.negs, self.slots = [], [], []


def xor_bits_batched(cs, abits, bbits, values: np.ndarray, label: str = "xor") -> list:
    """``[xor(a_i, b_i)]`` (see :func:`xor`) with ``values`` the ``(n, N)`` result bits."""
    out = [None] * len(abits)
    blk = _Blocks(cs, values)
    for i, (a, b) in enumerate(zip(abits, bbits)):
        if a.var is None or b.var is None or a.var == b.var:
            blk.flush()
            out[i] = xor(cs, a, b, label)
        else:
            blk.add(i, a.neg != b.neg, out, i)  # the wire holds the xor of the un-negated variables
    blk.flush()
    return out


def ch_bits_batched(cs, ebits, fbits, gbits, values: np.ndarray, label: str = "ch") -> list:
    """``[ch(e_i, f_i, g_i)]`` (see :func:`ch`) with ``values`` the ``(n, N)`` result bits."""
    out = [None] * len(ebits)
    blk = _Blocks(cs, values)
    for i, (e, f, g) in enumerate(zip(ebits, fbits, gbits)):
        if e.var is None or f.var is None or g.var is None or _same(f, g):
            blk.flush()
            out[i] = ch(cs, e, f, g, label)
        else:
            blk.add(i, False, out, i)
    blk.flush()
    return out


def maj_bits_batched(cs, abits, bbits, cbits, values: np.ndarray, bc_values: np.ndarray,
                     label: str = "maj") -> list:
    """``[maj(a_i, b_i, c_i)]`` (see :func:`maj`) with ``values`` the ``(n, N)`` result bits and ``bc_values``
    those of ``b_i & c_i`` (maj's and_ wire)."""
    n = len(abits)
    out = [None] * n
    scratch = [None]
    blk = _Blocks(cs, np.concatenate([values, bc_values]))
    for i, (a, b, c) in enumerate(zip(abits, bbits, cbits)):
        if (a.var is None or b.var is None or c.var is None or a.var == b.var or a.var == c.var
                or b.var == c.var):
            blk.flush()
            out[i] = maj(cs, a, b, c, label)
        else:
            blk.add(n + i, False, scratch, 0)  # the and_ wire bc, then maj's own (the per-bit order)
            blk.add(i, False, out, i)
    blk.flush()
    return out
