"""SHA-256 (FIPS 180-4) as constraints: the compression function and the padded hash over bits.

Bit order follows the standard (and bellpepper's ``sha256``): messages and digests are lists of
:class:`~cuzk_jax.circuits.gadgets.boolean.Boolean` in big-endian order -- byte 0 first, the most significant bit
of each byte first -- so ``hashlib.sha256(data).digest()`` corresponds bit for bit to ``sha256(cs, bits(data))``.

Cost per compression with a variable state and block: 26,416 constraints (message schedule ~7.2k, 64 rounds ~19k,
final additions ~0.3k); the first block (constant IV) costs a little less, and a constant block (e.g. the padding
block of a 64-byte message) folds the schedule away: SHA-256 of a 64-byte message costs 45,277. ``Sigma``
functions are two XORs per bit, ``ch`` one constraint per bit, ``maj`` two; the two additions of a round are
done as ``new_e = d + h + S1 + ch + K + W`` and ``new_a = h + S1 + ch + K + W + S0 + maj`` directly (35-bit sums),
which is cheaper than materialising T1.
"""

from __future__ import annotations

import numpy as np

from .. import sha256_native as native
from ..cs import ConstraintSystem
from . import boolean as B
from .uint32 import MASK32, BatchedWord, UInt32, add_many, as_batched, ch, maj, xor3


def bytes_to_bits(data: bytes) -> list[int]:
    """Bytes -> bit values in SHA-256 order (each byte most significant bit first)."""
    return [(byte >> (7 - i)) & 1 for byte in data for i in range(8)]


def bits_to_bytes(bits) -> bytes:
    vals = [b.value if isinstance(b, B.Boolean) else b for b in bits]
    if len(vals) % 8:
        raise ValueError("bits_to_bytes: length must be a multiple of 8")
    return bytes(sum(vals[8 * k + i] << (7 - i) for i in range(8)) for k in range(len(vals) // 8))


def constant_bits(data: bytes) -> list:
    return [B.constant(b) for b in bytes_to_bits(data)]


def iv() -> list:
    return [UInt32.constant(v) for v in native.IV]


def sha256_compress(cs: ConstraintSystem, state: list, block: list) -> list:
    """One compression: ``state`` = 8 :class:`UInt32`, ``block`` = 512 Booleans (big-endian) -> new state.

    In a batched witness run (:class:`~cuzk_jax.circuits.vector_witness.BatchCS`) a compression whose input shape
    has a verified plan replays it (:func:`_compress_planned`): the same wires, values and constraint count."""
    if len(state) != 8 or len(block) != 512:
        raise ValueError(f"sha256_compress: need 8 state words and 512 block bits, got {len(state)}, {len(block)}")
    if cs.batched and not cs.keep:
        out = _compress_planned(cs, state, block)
        if out is not None:
            return out
    return _compress_gadget(cs, state, block)


def _compress_gadget(cs: ConstraintSystem, state: list, block: list) -> list:
    w = [as_batched(cs, UInt32.from_bits_be(block[32 * i: 32 * i + 32])) for i in range(16)]
    state = [as_batched(cs, s) for s in state]
    with cs.namespace("schedule"):
        for t in range(16, 64):
            x, y = w[t - 15], w[t - 2]
            s0 = xor3(cs, x.rotr(7), x.rotr(18), x.shr(3), "s0")
            s1 = xor3(cs, y.rotr(17), y.rotr(19), y.shr(10), "s1")
            w.append(add_many(cs, [w[t - 16], s0, w[t - 7], s1], "w"))
    a, b, c, d, e, f, g, h = state
    for t in range(64):
        with cs.namespace(f"round_{t}"):
            S1 = xor3(cs, e.rotr(6), e.rotr(11), e.rotr(25), "S1")
            chv = ch(cs, e, f, g, "ch")
            S0 = xor3(cs, a.rotr(2), a.rotr(13), a.rotr(22), "S0")
            mj = maj(cs, a, b, c, "maj")
            k = UInt32.constant(native.K[t])
            new_e = add_many(cs, [d, h, S1, chv, k, w[t]], "new_e")
            new_a = add_many(cs, [h, S1, chv, k, w[t], S0, mj], "new_a")
        a, b, c, d, e, f, g, h = new_a, a, b, c, new_e, e, f, g
    with cs.namespace("final"):
        return [add_many(cs, [s, v], "add") for s, v in zip(state, (a, b, c, d, e, f, g, h))]


def state_to_bits(state: list) -> list:
    out = []
    for word in state:
        out.extend(word.to_bits_be())
    return out


def sha256(cs: ConstraintSystem, message_bits: list) -> list:
    """SHA-256 of a message given as Booleans (length a multiple of 8) -> 256 digest Booleans (big-endian)."""
    n = len(message_bits)
    if n % 8:
        raise ValueError(f"sha256: message length {n} bits is not a whole number of bytes")
    pad_bytes = native.pad(b"\x00" * (n // 8))[n // 8:]
    bits = list(message_bits) + constant_bits(pad_bytes)
    state = iv()
    for i in range(len(bits) // 512):
        with cs.namespace(f"compress_{i}"):
            state = sha256_compress(cs, state, bits[512 * i: 512 * (i + 1)])
    return state_to_bits(state)


def trunc254(digest_bits: list) -> list:
    """Filecoin's ``sha256_trunc254``: clear the 2 most significant bits of the last digest byte (free)."""
    out = list(digest_bits)
    out[248] = B.FALSE
    out[249] = B.FALSE
    return out


def fr_bits_order(nbits_le: list) -> list:
    """A field element's 256 little-endian bits -> SHA-256 byte order (32 LE bytes, each byte MSB first)."""
    if len(nbits_le) != 256:
        raise ValueError("fr_bits_order: need 256 bits")
    out = []
    for k in range(32):
        out.extend(reversed(nbits_le[8 * k: 8 * k + 8]))
    return out


def sha_bits_to_le(bits: list) -> list:
    """Inverse of :func:`fr_bits_order`: 256 bits in SHA-256 byte order -> little-endian value bits."""
    return fr_bits_order(bits)  # the permutation is an involution


# -- batched replay (vector_witness.BatchCS) ---------------------------------------------------------------------------
# A compression's wires depend on its inputs only through their *shape*: which input bits are constants (and their
# values), which are negated, and which share a variable. Every wire the gadget allocates holds bit b (possibly
# negated) of one of the compression's intermediate words -- a xor partial or result, ch, maj, b & c, or the full
# sum of an add_many -- so for each shape met, the gadget runs once on random probe lanes and each of its wires is
# identified with such a bit: a *plan*, i.e. a gather table. A compression of a known shape then computes the
# intermediate words with lane-packed Python ints (lane i of an int = its bits 64i .. 64i + 63; sums of at most 7
# words stay below 2^35, so no carry crosses a lane) and gathers its wires in one block: a few thousand big-int
# operations instead of a few thousand numpy calls. A plan is kept only if it reproduces a second, independent
# probe run of the gadget exactly (wires, constraint count, output words); other shapes take the gadget path.

_NPOS = 8 * 32 + 512  # input bit positions: state word i bit k (LSB first) at 32 i + k, block bit p at 256 + p
_NB = 40  # bit rows kept per intermediate word (every one is below 2^35)
_PROBE_LANES = 128  # the first half identifies the wires, the second checks the identification
_AUX_BASE = 1 << 20  # the probe runs' first wire index: above every input position's stand-in variable
_PLANS: dict = {}  # shape key -> _Plan, or None for a shape without a plan
_LANE_CONSTS: dict = {}


def _is_total(k: int) -> bool:
    """Whether intermediate word ``k`` of :func:`_intermediates` is an add_many sum (its other words are < 2^32)."""
    if k < 240:
        return k % 5 == 4
    return k >= 816 or (k - 240) % 9 >= 7


def _lane_consts(n: int):
    c = _LANE_CONSTS.get(n)
    if c is None:
        ones = int.from_bytes(b"\x01\x00\x00\x00\x00\x00\x00\x00" * n, "little")
        c = (ones, MASK32 * ones, [k * ones for k in native.K])
        _LANE_CONSTS[n] = c
    return c


def _intermediates(state: list, block: list, n: int) -> list:
    """The 824 intermediate words of a compression as lane-packed ints (``n`` lanes), in this order: per schedule
    step ``t = 16 .. 63`` ``rotr7 ^ rotr18``, ``s0``, ``rotr17 ^ rotr19``, ``s1``, the sum ``w_t``; per round
    ``rotr6 ^ rotr11``, ``S1``, ``ch``, ``rotr2 ^ rotr13``, ``S0``, ``maj``, ``b & c``, the sums ``new_e`` and
    ``new_a``; then the 8 final sums (``state + working variables``, unreduced)."""
    _, m, kt = _lane_consts(n)
    w = list(block)
    out = []
    put = out.extend
    for t in range(16, 64):
        x, y = w[t - 15], w[t - 2]
        xa = (((x >> 7) | (x << 25)) ^ ((x >> 18) | (x << 14))) & m
        s0 = xa ^ ((x >> 3) & m)
        ya = (((y >> 17) | (y << 15)) ^ ((y >> 19) | (y << 13))) & m
        s1 = ya ^ ((y >> 10) & m)
        tot = w[t - 16] + s0 + w[t - 7] + s1
        put((xa, s0, ya, s1, tot))
        w.append(tot & m)
    a, b, c, d, e, f, g, h = state
    for t in range(64):
        ea = (((e >> 6) | (e << 26)) ^ ((e >> 11) | (e << 21))) & m
        S1 = ea ^ (((e >> 25) | (e << 7)) & m)
        chv = (e & f) ^ ((e ^ m) & g)
        aa = (((a >> 2) | (a << 30)) ^ ((a >> 13) | (a << 19))) & m
        S0 = aa ^ (((a >> 22) | (a << 10)) & m)
        bc = b & c
        mj = (a & (b ^ c)) ^ bc
        base = h + S1 + chv + kt[t] + w[t]
        et = d + base
        at = base + S0 + mj
        put((ea, S1, chv, aa, S0, mj, bc, et, at))
        a, b, c, d, e, f, g, h = at & m, a, b, c, et & m, e, f, g
    put([s + v for s, v in zip(state, (a, b, c, d, e, f, g, h))])
    return out


def _bit_table(words: list, n: int) -> np.ndarray:
    """``(len(words) * _NB, n)`` uint8: row ``k * _NB + b`` = bit ``b`` of word ``k`` in every lane."""
    raw = b"".join([v.to_bytes(8 * n, "little") for v in words])
    u8 = np.frombuffer(raw, np.uint8).reshape(len(words), n, 8)[:, :, :_NB // 8]
    bits = np.unpackbits(u8, axis=2, bitorder="little")  # (K, n, _NB)
    return np.ascontiguousarray(bits.transpose(0, 2, 1)).reshape(len(words) * _NB, n)


def _lanes_of(values: np.ndarray) -> int:
    return int.from_bytes(np.ascontiguousarray(values, dtype="<u8").tobytes(), "little")


def _words_of(packed: list, n: int) -> np.ndarray:
    """Lane-packed ints (each lane < 2^63) -> ``(len(packed), n)`` int64."""
    raw = b"".join([v.to_bytes(8 * n, "little") for v in packed])
    return np.frombuffer(raw, "<i8").reshape(len(packed), n)


class _Plan:
    """A compression shape's replay: ``src`` (rows of :func:`_bit_table` holding its wires, in allocation order),
    ``flip`` (wires that hold the negated bit), ``constraints``; per output bit (256, word-major) ``new``/``off``
    (a wire of the block at offset ``off``, else the input at position ``off``), ``const``/``cval``/``neg``."""

    __slots__ = ("src", "flip", "constraints", "new", "off", "const", "cval", "neg", "allvar")


class _NoPlan(Exception):
    pass


def _shape(state: list, block: list, n: int):
    """The inputs of a batched compression: ``(key, var, state lanes, block lanes)`` (``var``: per input position
    the encoded variable, 0 for constants), or None when they are outside what plans cover (then the gadget runs)."""
    var = np.zeros(_NPOS, np.int64)
    const = np.zeros(_NPOS, bool)
    cval = np.zeros(_NPOS, np.uint8)
    neg = np.zeros(_NPOS, bool)
    ones = _lane_consts(n)[0]
    any_array = False
    slanes = []
    for i, s in enumerate(state):
        sl = slice(32 * i, 32 * i + 32)
        if isinstance(s.value, np.ndarray) and not isinstance(s, BatchedWord):
            s = BatchedWord.of(s, n)  # what as_batched does on the gadget path
        if isinstance(s, BatchedWord):
            if s.value.dtype != np.int64 or s.value.shape != (n,) or s.const.all():
                return None
            var[sl], const[sl], cval[sl], neg[sl] = s.var, s.const, s.cval, s.neg
            slanes.append(_lanes_of(s.value))
            any_array = True
        elif isinstance(s.value, int) and s.is_constant:
            const[sl] = True
            cval[sl] = [(s.value >> k) & 1 for k in range(32)]
            slanes.append(s.value * ones)
        else:
            return None
    zero, one = np.zeros(n, np.uint8), np.ones(n, np.uint8)
    bvar = [b.var for b in block]
    bconst = [v is None for v in bvar]
    values = [b.value for b in block]
    if not any_array and all(bconst):
        return None
    nd = np.ndarray
    bm = np.stack([v if v.__class__ is nd else (one if v else zero) for v in values])  # (512, n), words MSB first
    u8 = np.dtype(np.uint8)
    if bm.shape != (512, n) or not all((v.__class__ is nd and v.dtype == u8) != c for v, c in zip(values, bconst)):
        return None  # variable bits carry uint8 arrays, constants plain ints (what the probes reproduce)
    const[256:] = bconst
    var[256:] = [0 if c else v for v, c in zip(bvar, bconst)]
    neg[256:] = [b.neg for b in block]
    cval[256:] = np.where(const[256:], bm[:, 0], 0)
    pb = np.packbits(bm.reshape(16, 32, n), axis=1)  # (16, 4, n), big-endian bytes
    le = np.zeros((16, n, 8), np.uint8)
    le[:, :, :4] = pb[:, ::-1, :].transpose(0, 2, 1)
    blanes = [int.from_bytes(le[i].tobytes(), "little") for i in range(16)]
    neg &= ~const
    cval &= const.astype(np.uint8)
    var[const] = 0
    # canonical variables: each position names the first position sharing its variable (constants: themselves)
    keyed = np.where(const, np.int64(-(1 << 62)) - np.arange(_NPOS), var)
    _, first, inv = np.unique(keyed, return_index=True, return_inverse=True)
    rep = first[inv.reshape(-1)].astype(np.int16)
    flags = const.astype(np.uint8) | (cval << 1) | (neg.astype(np.uint8) << 2)
    return rep.tobytes() + flags.tobytes(), var, slanes, blanes


def _replay(cs, plan: _Plan, slanes: list, blanes: list, var: np.ndarray, n: int) -> list:
    words = _intermediates(slanes, blanes, n)
    table = _bit_table(words, n)
    reserve = getattr(cs, "reserve_bits", None)
    if reserve is not None:  # gathered straight into the wire buffer
        j0, mat = reserve(len(plan.src))
        np.take(table, plan.src, axis=0, out=mat)
    else:
        mat = table[plan.src]
    if len(plan.flip):
        mat[plan.flip] ^= 1
    if reserve is None:
        j0 = cs.alloc_bits_block(mat)
    cs.num_constraints += plan.constraints
    ovar = np.where(plan.new, -1 - (j0 + plan.off), var[np.where(plan.new, 0, plan.off)])
    vals = _words_of(words[-8:], n) & MASK32
    return [BatchedWord(ovar[32 * i:32 * i + 32], plan.const[i], plan.cval[i], plan.neg[i], vals[i], plan.allvar[i])
            for i in range(8)]


def _compress_planned(cs, state: list, block: list):
    """The compression by its shape's plan (built on first sight), or None when the shape has none."""
    n = cs.n
    shape = _shape(state, block, n)
    if shape is None:
        return None
    key, var, slanes, blanes = shape
    if key not in _PLANS:
        try:
            _PLANS[key] = _build_plan(key)
        except _NoPlan:
            _PLANS[key] = None
    plan = _PLANS[key]
    if plan is None:
        return None
    return _replay(cs, plan, slanes, blanes, var, n)


class _ProbeCS(ConstraintSystem):
    """A batched witness-mode constraint system over probe lanes that records each allocation (first row, rows,
    constraint count before it) and accepts bit wires only."""

    batched = True

    def __init__(self, n: int):
        super().__init__("witness")
        self.n = n
        self.num_aux = _AUX_BASE
        self.rows: list = []
        self.events: list = []
        self._nrows = 0

    def alloc_bits_block(self, mat: np.ndarray) -> int:
        j0 = self.num_aux
        k = mat.shape[0]
        self.events.append((self._nrows, k, self.num_constraints))
        self.rows.append(np.array(mat, np.uint8))
        self._nrows += k
        self.num_aux = j0 + k
        return j0

    def alloc_raw(self, value) -> int:
        if not (isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.shape == (self.n,)):
            raise _NoPlan("a compression allocated a wire that is not a bit")
        return -1 - self.alloc_bits_block(value[None, :])

    def value_raw(self, idx: int):
        raise _NoPlan("a compression read a wire value")

    def matrix(self) -> np.ndarray:
        return np.concatenate(self.rows) if self.rows else np.zeros((0, self.n), np.uint8)


def _probe(key: bytes, seed: int):
    """Random inputs of the shape ``key`` over the probe lanes: ``(state words, block Booleans, state lanes, block
    lanes, var)`` with stand-in variables ``-1 - canonical position``."""
    P = _PROBE_LANES
    rep = np.frombuffer(key[:2 * _NPOS], np.int16).astype(np.int64)
    flags = np.frombuffer(key[2 * _NPOS:], np.uint8)
    const, cval, neg = (flags & 1).astype(bool), (flags >> 1) & 1, ((flags >> 2) & 1).astype(bool)
    rnd = np.random.default_rng(seed).integers(0, 2, size=(_NPOS, P), dtype=np.uint8)
    bits = rnd[rep] ^ neg.astype(np.uint8)[:, None]
    bits[const] = cval[const][:, None]
    var = np.where(const, 0, -1 - rep)
    ones = _lane_consts(P)[0]
    weights = np.left_shift(np.int64(1), np.arange(32, dtype=np.int64))[:, None]
    state, slanes = [], []
    for i in range(8):
        sl = slice(32 * i, 32 * i + 32)
        value = (bits[sl].astype(np.int64) * weights).sum(axis=0)
        if const[sl].all():
            state.append(UInt32.constant(int(value[0])))
            slanes.append(int(value[0]) * ones)
        else:
            state.append(BatchedWord(var[sl].copy(), const[sl].copy(), cval[sl].copy(), neg[sl].copy(), value))
            slanes.append(_lanes_of(value))
    block = [B.constant(int(cval[p])) if const[p] else B.Boolean(int(var[p]), bool(neg[p]), bits[p])
             for p in range(256, _NPOS)]
    blanes = []
    for i in range(16):
        be = bits[256 + 32 * i: 256 + 32 * i + 32].astype(np.int64)
        blanes.append(_lanes_of((be * weights[::-1]).sum(axis=0)))
    return state, block, slanes, blanes, var


def _same_words(xs: list, ys: list) -> bool:
    for x, y in zip(xs, ys):
        if not (isinstance(x, BatchedWord) and isinstance(y, BatchedWord)):
            return False
        for f in ("var", "const", "cval", "neg", "value"):
            if not np.array_equal(getattr(x, f), getattr(y, f)):
                return False
        if x.allvar != y.allvar:
            return False
    return len(xs) == len(ys)


def _build_plan(key: bytes) -> _Plan:
    """Run the gadget on probe lanes of shape ``key`` and identify each wire with an intermediate word's bit by the
    first half of the lanes (add_many blocks, the only allocations with one more constraint than wires, with the
    next matching sum in order; other wires by their values); raises :class:`_NoPlan` when a wire has no match or
    the plan does not reproduce the gadget on all the lanes."""
    P = _PROBE_LANES
    state, block, slanes, blanes, var = _probe(key, 1)
    pcs = _ProbeCS(P)
    outs = _compress_gadget(pcs, state, block)
    mat = pcs.matrix()
    words = _intermediates(slanes, blanes, P)
    table = _bit_table(words, P)
    half = P // 2
    packed = np.packbits(table[:, :half], axis=1)
    # candidate keys: bits 0..31 of the non-sum words, plain then negated; a stable sort keeps the first of equal keys
    cand = np.array([k * _NB + b for k in range(len(words)) if not _is_total(k) for b in range(32)], np.int64)
    keys = np.concatenate([packed[cand], ~packed[cand]]).view("<u8").ravel()  # 64 lanes: one uint64 key per row
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    totals = [k for k in range(len(words)) if _is_total(k)]
    mpacked = np.packbits(mat[:, :half], axis=1)
    mkeys = np.ascontiguousarray(mpacked).view("<u8").ravel()
    src = np.full(len(mat), -1, np.int64)
    flip = np.zeros(len(mat), bool)
    single = np.zeros(len(mat), bool)
    ti = 0
    ends = [ev[2] for ev in pcs.events[1:]] + [pcs.num_constraints]
    for (r0, k, c0), c1 in zip(pcs.events, ends):
        if c1 - c0 == k + 1:  # an add_many: its sum's bits, least significant first
            if k > _NB or k < 32:
                raise _NoPlan("an add_many of an unexpected width")
            want = mpacked[r0:r0 + k].tobytes()
            while ti < len(totals) and packed[totals[ti] * _NB:totals[ti] * _NB + k].tobytes() != want:
                ti += 1
            if ti == len(totals):
                raise _NoPlan("an add_many matches no sum")
            src[r0:r0 + k] = totals[ti] * _NB + np.arange(k)
            ti += 1
        elif c1 - c0 == k:
            single[r0:r0 + k] = True
        else:
            raise _NoPlan("an allocation with an unexpected constraint count")
    rows = np.flatnonzero(single)
    at = np.minimum(np.searchsorted(sorted_keys, mkeys[rows]), len(sorted_keys) - 1)
    if (sorted_keys[at] != mkeys[rows]).any():
        raise _NoPlan("a wire matches no intermediate bit")
    hit = order[at]
    src[rows] = cand[hit % len(cand)]
    flip[rows] = hit >= len(cand)
    flip = np.flatnonzero(flip)
    plan = _Plan()
    plan.src, plan.flip, plan.constraints = src, flip, pcs.num_constraints
    if not all(isinstance(o, BatchedWord) for o in outs):
        raise _NoPlan("a constant output word")
    ovar = np.concatenate([o.var for o in outs])
    oconst = np.concatenate([o.const for o in outs])
    plan.new = ~oconst & (-1 - ovar >= _AUX_BASE)
    plan.off = np.where(oconst, 0, np.where(plan.new, -1 - ovar - _AUX_BASE, -1 - ovar))
    if ((plan.off < 0) | (~plan.new & (plan.off >= _NPOS))).any():
        raise _NoPlan("an output bit refers to an unknown variable")
    plan.const = [o.const.copy() for o in outs]
    plan.cval = [np.where(o.const, o.cval, 0).astype(np.uint8) for o in outs]
    plan.neg = [o.neg & ~o.const for o in outs]
    plan.allvar = [bool(o.allvar) for o in outs]
    # check: the plan reproduces the gadget on every probe lane, the second half of which it was not built from
    rcs = _ProbeCS(P)
    routs = _replay(rcs, plan, slanes, blanes, var, P)
    if (rcs.num_constraints != pcs.num_constraints or not np.array_equal(rcs.matrix(), mat)
            or not _same_words(routs, outs)):
        raise _NoPlan("the plan does not reproduce the gadget")
    return plan
