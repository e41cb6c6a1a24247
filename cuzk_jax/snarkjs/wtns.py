"""Reader and writer for ``.wtns`` witness files (snarkjs ``wtns_utils.js``, versions 1 and 2).

Encoding (little-endian): section 1: u32 n8 (32), prime (n8 bytes), u32 nWitness; section 2: nWitness values of
n8 bytes each in **normal (non-Montgomery) form**. ``w[0] = 1``, then outputs, public inputs, private inputs,
internal wires (circom's wire order, the same as the ``.r1cs``).
"""

from __future__ import annotations

import struct

import numpy as np

from cuzk_jax.reference import constants as C

from . import binfile

HEADER, VALUES = 1, 2


def read_wtns_limbs(source) -> np.ndarray:
    """Witness as limb-major uint32 ``(8, nWitness)``, canonical (non-Montgomery) form, every value ``< r``."""
    f = binfile.parse(source, "wtns", 2)
    hdr = f.section(HEADER, what="header")
    if len(hdr) < 4:
        raise f.error("header section too short")
    n8 = struct.unpack_from("<I", hdr, 0)[0]
    if len(hdr) != 4 + n8 + 4:
        raise f.error(f"header section has {len(hdr)} bytes, expected {4 + n8 + 4} for n8 = {n8}")
    prime = int.from_bytes(bytes(hdr[4:4 + n8]), "little")
    binfile.check_prime(f, n8, prime)
    n = struct.unpack_from("<I", hdr, 4 + n8)[0]
    if n < 1:
        raise f.error("witness is empty")
    limbs = binfile.limbs_from_le(f.section(VALUES, n * n8, f"{n} witness values"), n8)
    ok = binfile.all_below(limbs, C.R)
    if not ok.all():
        raise f.error(f"witness value {int(np.argmin(ok))} is >= r (corrupt file)")
    if binfile.le_ints(binfile.limbs_to_le(limbs[:, :1]), 32)[0] != 1:
        raise f.error("witness value 0 (the constant wire) is not 1")
    return limbs


def read_wtns(source) -> list[int]:
    """Witness values as Python ints (canonical), wire order; ``w[0] == 1``."""
    return binfile.le_ints(binfile.limbs_to_le(read_wtns_limbs(source)), 32)


def wtns_bytes(witness: list[int]) -> bytes:
    """Serialise a witness (Python ints in ``[0, r)``) as a version-2 ``.wtns`` file."""
    for i, v in enumerate(witness):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < C.R:
            raise ValueError(f"witness value {i} is not an int in [0, r): {v!r}")
    hdr = struct.pack("<I", 32) + C.R.to_bytes(32, "little") + struct.pack("<I", len(witness))
    body = b"".join(v.to_bytes(32, "little") for v in witness)
    return binfile.build("wtns", 2, [(HEADER, hdr), (VALUES, body)])


def write_wtns(path, witness: list[int]) -> None:
    with open(path, "wb") as fh:
        fh.write(wtns_bytes(witness))
