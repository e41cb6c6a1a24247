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

from .. import sha256_native as native
from ..cs import ConstraintSystem
from . import boolean as B
from .uint32 import UInt32, add_many, as_batched, ch, maj, xor3


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
    """One compression: ``state`` = 8 :class:`UInt32`, ``block`` = 512 Booleans (big-endian) -> new state."""
    if len(state) != 8 or len(block) != 512:
        raise ValueError(f"sha256_compress: need 8 state words and 512 block bits, got {len(state)}, {len(block)}")
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
