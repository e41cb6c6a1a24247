"""Plain-Python SHA-256 (FIPS 180-4): the compression function and padding, the oracle for the SHA-256 gadget.

The constants are derived here from their definition (first 32 bits of the fractional parts of the square roots of
the first 8 primes for the IV, cube roots of the first 64 primes for K, FIPS 180-4 sections 4.2.2 and 5.3.3) with
integer arithmetic; the test suite checks :func:`sha256` against :mod:`hashlib`.
"""

from __future__ import annotations

import math

MASK32 = 0xFFFFFFFF


def _primes(n: int) -> list[int]:
    out, k = [], 2
    while len(out) < n:
        if all(k % p for p in out if p * p <= k):
            out.append(k)
        k += 1
    return out


def _icbrt(n: int) -> int:
    x = 1 << ((n.bit_length() + 2) // 3)
    while True:
        y = (2 * x + n // (x * x)) // 3
        if y >= x:
            break
        x = y
    while x * x * x > n:
        x -= 1
    while (x + 1) ** 3 <= n:
        x += 1
    return x


IV = tuple(math.isqrt(p << 64) & MASK32 for p in _primes(8))
K = tuple(_icbrt(p << 96) & MASK32 for p in _primes(64))
assert IV[0] == 0x6A09E667 and K[0] == 0x428A2F98 and K[63] == 0xC67178F2


def _rotr(x: int, n: int) -> int:
    return ((x >> n) | (x << (32 - n))) & MASK32


def compress(state, block: bytes) -> tuple:
    """One SHA-256 compression: 8-word state, 64-byte block -> new 8-word state."""
    if len(block) != 64 or len(state) != 8:
        raise ValueError("compress: need an 8-word state and a 64-byte block")
    w = [int.from_bytes(block[4 * i: 4 * i + 4], "big") for i in range(16)]
    for t in range(16, 64):
        s0 = _rotr(w[t - 15], 7) ^ _rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
        s1 = _rotr(w[t - 2], 17) ^ _rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
        w.append((w[t - 16] + s0 + w[t - 7] + s1) & MASK32)
    a, b, c, d, e, f, g, h = state
    for t in range(64):
        S1 = _rotr(e, 6) ^ _rotr(e, 11) ^ _rotr(e, 25)
        ch = (e & f) ^ (~e & g & MASK32)
        t1 = (h + S1 + ch + K[t] + w[t]) & MASK32
        S0 = _rotr(a, 2) ^ _rotr(a, 13) ^ _rotr(a, 22)
        mj = (a & b) ^ (a & c) ^ (b & c)
        t2 = (S0 + mj) & MASK32
        a, b, c, d, e, f, g, h = (t1 + t2) & MASK32, a, b, c, (d + t1) & MASK32, e, f, g
    return tuple((x + y) & MASK32 for x, y in zip(state, (a, b, c, d, e, f, g, h)))


def pad(message: bytes) -> bytes:
    """FIPS 180-4 section 5.1.1 padding: 0x80, zeros, 64-bit big-endian bit length."""
    n = len(message)
    zeros = (55 - n) % 64
    return message + b"\x80" + b"\x00" * zeros + (8 * n).to_bytes(8, "big")


def sha256(message: bytes) -> bytes:
    padded = pad(message)
    state = IV
    for i in range(0, len(padded), 64):
        state = compress(state, padded[i: i + 64])
    return b"".join(x.to_bytes(4, "big") for x in state)


def trunc254(digest: bytes) -> bytes:
    """Filecoin's truncation of a 32-byte digest to a field element: clear the 2 top bits of the last byte."""
    return digest[:31] + bytes([digest[31] & 0x3F])


def sha256_trunc254(message: bytes) -> bytes:
    import hashlib

    return trunc254(hashlib.sha256(message).digest())


def fr_to_bytes(v: int) -> bytes:
    """A field element (< 2^256) as 32 little-endian bytes (filecoin's ``Fr`` repr)."""
    return v.to_bytes(32, "little")


def bytes_to_fr(b: bytes) -> int:
    return int.from_bytes(b, "little")


def num_blocks(message_len: int) -> int:
    """Number of compressions SHA-256 spends on a message of ``message_len`` bytes."""
    return (message_len + 9 + 63) // 64
