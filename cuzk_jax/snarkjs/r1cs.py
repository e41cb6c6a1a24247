"""Reader for circom's ``.r1cs`` constraint files (the iden3 r1cs binary format, version 1).

Encoding, as read by ``r1csfile/src/r1csfile.js`` (``readR1csHeader``, ``readConstraints``, ``readMap``) and
written by the circom compiler; all integers little-endian:

* section 1 (header): u32 n8 (32), prime (n8 bytes), u32 nWires, u32 nPubOut, u32 nPubIn, u32 nPrvIn,
  u64 nLabels, u32 nConstraints;
* section 2 (constraints): per constraint the linear combinations A, B, C, each ``u32 nTerms`` followed by
  ``nTerms x {u32 wire, n8-byte coefficient}``; coefficients are in **normal (non-Montgomery) form**
  (``r1csfile`` passes them through ``F.fromRprLE``, which converts to Montgomery for its own use);
* section 3 (wire -> label map): u64 label per wire;
* sections 4 / 5 (PLONK custom gates) are refused: Groth16 cannot prove them.

Wire 0 is the constant 1, then outputs, public inputs, private inputs, then internal wires -- the witness order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from cuzk_jax.reference import constants as C

from . import binfile

HEADER, CONSTRAINTS, WIRE2LABEL, CUSTOM_GATES_LIST, CUSTOM_GATES_USES = 1, 2, 3, 4, 5


@dataclass(frozen=True)
class SparseMatrix:
    """One R1CS matrix in coordinate (COO) form, in file order.

    ``rows`` (constraint index) and ``cols`` (wire index) are uint32 ``(nnz,)``; ``vals`` is limb-major uint32
    ``(8, nnz)`` holding the coefficients in canonical (non-Montgomery) form, each ``< r``.
    """

    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.rows.shape[0])

    def val_ints(self) -> list[int]:
        return binfile.le_ints(binfile.limbs_to_le(self.vals), 32) if self.nnz else []


@dataclass(frozen=True)
class R1cs:
    """A circom constraint system over BLS12-381's scalar field: ``(A w) * (B w) = (C w)`` row by row."""

    n_wires: int
    n_pub_out: int
    n_pub_in: int
    n_prv_in: int
    n_labels: int
    n_constraints: int
    a: SparseMatrix
    b: SparseMatrix
    c: SparseMatrix
    wire_to_label: np.ndarray | None  # uint64 (n_wires,), or None if the file has no section 3
    prime: int = C.R

    @property
    def n_public(self) -> int:
        """Public signals (outputs then public inputs), not counting the constant wire 0."""
        return self.n_pub_out + self.n_pub_in

    def constraint_lists(self) -> list[tuple[dict[int, int], dict[int, int], dict[int, int]]]:
        """Constraints as Python dicts ``{wire: coef}`` (slow; for tests and small circuits)."""
        out = [({}, {}, {}) for _ in range(self.n_constraints)]
        for k, m in enumerate((self.a, self.b, self.c)):
            for row, col, v in zip(m.rows.tolist(), m.cols.tolist(), m.val_ints()):
                out[row][k][col] = (out[row][k].get(col, 0) + v) % C.R
        return out

    def unsatisfied(self, witness: list[int]) -> list[int]:
        """Indices of the constraints the witness (Python ints, wire order) violates (host, Python ints)."""
        if len(witness) != self.n_wires:
            raise ValueError(f"witness has {len(witness)} values, the r1cs has {self.n_wires} wires")
        r = C.R
        bad = []
        for i, (a, b, c) in enumerate(self.constraint_lists()):
            ea = sum(v * witness[w] for w, v in a.items()) % r
            eb = sum(v * witness[w] for w, v in b.items()) % r
            ec = sum(v * witness[w] for w, v in c.items()) % r
            if ea * eb % r != ec:
                bad.append(i)
        return bad


def read_r1cs(source) -> R1cs:
    """Read a circom ``.r1cs`` file (path or bytes). Raises :class:`binfile.FormatError` (a ValueError)."""
    f = binfile.parse(source, "r1cs", 1)
    if f.has(CUSTOM_GATES_LIST) or f.has(CUSTOM_GATES_USES):
        raise f.error("the circuit uses PLONK custom gates, which Groth16 cannot prove")
    hdr = f.section(HEADER, what="header")
    if len(hdr) < 4:
        raise f.error("header section too short")
    n8 = struct.unpack_from("<I", hdr, 0)[0]
    if len(hdr) != 4 + n8 + 28:
        raise f.error(f"header section has {len(hdr)} bytes, expected {4 + n8 + 28} for n8 = {n8}")
    prime = int.from_bytes(bytes(hdr[4:4 + n8]), "little")
    binfile.check_prime(f, n8, prime)
    n_wires, n_out, n_pub, n_prv, n_labels, n_cons = struct.unpack_from("<IIIIQI", hdr, 4 + n8)
    if n_wires < 1 or 1 + n_out + n_pub + n_prv > n_wires:
        raise f.error(f"inconsistent wire counts: {n_wires} wires, {n_out} outputs, {n_pub} public inputs, "
                      f"{n_prv} private inputs")

    a, b, c = _read_constraints(f, n_cons, n_wires)

    labels = None
    if f.has(WIRE2LABEL):
        labels = np.frombuffer(f.section(WIRE2LABEL, 8 * n_wires, "wire-to-label map"), "<u8").astype(np.uint64)
    return R1cs(n_wires, n_out, n_pub, n_prv, n_labels, n_cons, a, b, c, labels)


_TERM = 36  # u32 wire + 32-byte coefficient


def _read_constraints(f: binfile.BinFile, n_cons: int, n_wires: int) -> tuple[SparseMatrix, ...]:
    sec = f.section(CONSTRAINTS, what="constraints")
    data = bytes(sec)
    size = len(data)
    # Every count is checked against the bytes present BEFORE anything is allocated: each linear combination takes
    # at least its 4-byte term count, so a hostile header (nConstraints = 2^32 - 1 in a few hundred bytes) is one
    # FormatError here, not a 96 GiB allocation.
    if 12 * n_cons > size:
        raise f.error(f"header declares {n_cons} constraints but the constraints section has only {size} bytes "
                      f"(at least {12 * n_cons} needed; truncated or corrupt file)")
    # One Python step per linear combination (3 per constraint) to find the variable-length blocks; the terms
    # themselves are then gathered with numpy.
    starts = np.empty(3 * n_cons, np.int64)
    counts = np.empty(3 * n_cons, np.int64)
    pos = 0
    unpack = struct.unpack_from
    try:
        for k in range(3 * n_cons):
            n = unpack("<I", data, pos)[0]
            if n > (size - pos - 4) // _TERM:
                raise struct.error
            starts[k] = pos + 4
            counts[k] = n
            pos += 4 + _TERM * n
            if pos > size:
                raise struct.error
    except struct.error:
        raise f.error(f"constraints section truncated in constraint {k // 3} of {n_cons}") from None
    if pos != size:
        raise f.error(f"constraints section has {size - pos} extra bytes after {n_cons} constraints (corrupt)")
    raw = np.frombuffer(data, np.uint8)
    mats = []
    for m in range(3):
        st, ct = starts[m::3], counts[m::3]
        total = int(ct.sum())
        rows = np.repeat(np.arange(n_cons, dtype=np.uint32), ct)
        first = np.repeat(st, ct)
        within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(ct) - ct, ct)
        offs = first + _TERM * within
        rec = raw[offs[:, None] + np.arange(_TERM)[None, :]] if total else np.zeros((0, _TERM), np.uint8)
        cols = np.ascontiguousarray(rec[:, :4]).view("<u4").reshape(-1).astype(np.uint32)
        vals = np.ascontiguousarray(np.ascontiguousarray(rec[:, 4:]).view("<u4").reshape(-1, 8).T).astype(np.uint32)
        if total and int(cols.max()) >= n_wires:
            bad = int(np.argmax(cols >= n_wires))
            raise f.error(f"constraint {int(rows[bad])} references wire {int(cols[bad])} >= nWires = {n_wires}")
        if total and not binfile.all_below(vals, C.R).all():
            bad = int(np.argmin(binfile.all_below(vals, C.R)))
            raise f.error(f"constraint {int(rows[bad])} has a coefficient >= r (corrupt file)")
        mats.append(SparseMatrix(rows, cols, vals))
    return tuple(mats)
