"""Groth16 keys and proofs, and their byte formats (arkworks ``data_structures.rs`` in spirit).

Points inside keys are kept two ways: the small verifying key and the few fixed proving-key points as host
reference points (affine tuples, ``None`` = infinity, see :mod:`cuzk_jax.reference.curve`), and the big queries as
device-resident :class:`cuzk_jax.ops.curve.Affine` arrays (limb-major Montgomery Fq/Fq2), so a loaded key stays
on the device between proofs (cuzk's resident SRS). :class:`ProvingKey` is a registered pytree whose leaves are
those arrays.

Formats (all integers little-endian; points in the zcash/bellperson encodings of :mod:`cuzk_jax.points`):

``Proof`` (192 bytes): A (48, compressed G1) | B (96, compressed G2) | C (48, compressed G1). Ten partitions
concatenate to 1920 bytes.

Verifying key file::

    magic  b"CUZKVK01"          8
    u32    num_ic                4   (= 1 + number of public inputs)
    alpha_g1, beta_g2, gamma_g2, delta_g2   uncompressed (96 + 3 * 192)
    ic[num_ic]                  uncompressed G1 (96 each)
    sha256 of everything above  32

Proving key file::

    magic  b"CUZKPK01"          8
    u32    num_inputs, num_aux, domain_size   12
    circuit digest              32  (sha256 of the R1CS structure, ``R1CS.digest()``)
    u64    vk_len                8
    verifying key file          vk_len
    beta_g1, delta_g1           uncompressed G1 (96 each)
    5 x { u64 count, points }   a_query (G1, num_vars), b_g1_query (G1, num_vars), b_g2_query (G2, num_vars),
                                h_query (G1, domain_size - 1), l_query (G1, num_aux); uncompressed
    sha256 of everything above  32

A key whose H query is in Lagrange form (``h_form == "lagrange"``, :data:`H_FORMS`) is written as ``b"CUZKPK02"``:
the same layout with one more u32 after ``domain_size``, the form's code (0 coefficients, 1 lagrange), and an
``h_query`` of ``domain_size`` points. Coefficient-form keys are still written as ``CUZKPK01``; both are read.

This byte format is portable (zcash encodings) but converts every coordinate and hashes in one thread; the key
cache and sector-sized keys use the raw format of :mod:`cuzk_jax.groth16.keyfile` (the device's limb arrays,
memory-mapped on load, threaded checksums), which ``ProvingKey.save_raw`` / ``ProvingKey.load_raw`` also reach.

Loading checks the magic, every length, the checksum, and every point (canonical coordinates, on the curve, in the
prime-order subgroup; the query points in one batched device program per query); the verifying key's alpha, beta,
gamma, delta and IC points and the proving key's beta_g1 / delta_g1 must not be the point at infinity (a
degenerate pairing equation). Any failure is one :class:`KeyFormatError` (a ``ValueError``) naming the section.
``ProvingKey.load(path, subgroup_check=False)`` skips only the subgroup test of the five big queries (the
verifying key and the fixed points are always fully checked): a proving-key point outside the subgroup can only
make the prover's own proofs fail verification, never make a bad proof pass, so for keys this library wrote itself
(the key cache) the checksum plus the curve equation suffice (bellman's ``Parameters::read`` has the same
``checked`` switch, and zcash_proofs reads its hash-verified parameter files with it off). The full check of a 2^20-domain key (4.4M points) is the slow part of loading it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
from typing import Optional

import jax
import numpy as np

# KeyFormatError is re-exported here: the key-file error
from cuzk_jax.errors import BadInput, FormatError, KeyFormatError  # noqa: F401
from cuzk_jax.fileio import atomic_write
from cuzk_jax.reference.curve import g1 as ref_g1, g2 as ref_g2

PROOF_BYTES = 192
VK_MAGIC = b"CUZKVK01"
PK_MAGIC = b"CUZKPK01"
PK_MAGIC_2 = b"CUZKPK02"  # with the H form's code (module doc)
#: A proving key's H query forms: ``"coefficients"`` (bellman / arkworks: ``h_query[i] = tau^i Z(tau) / delta`` G1
#: for ``i < n - 1``; the prover feeds it h's coefficients, :func:`cuzk_jax.ops.qap.compute_h`) and ``"lagrange"``
#: (snarkjs's H section on this project's domain: ``h_query[i] = L^(2n)_(2i+1)(tau) / delta`` G1 for ``i < n``, the
#: size-2n Lagrange basis at the odd points; the prover feeds it ``A B - C`` on the odd coset,
#: :func:`cuzk_jax.ops.qap.compute_h_lagrange`, one transform fewer). Same proofs from either.
H_FORMS = ("coefficients", "lagrange")


def check_h_form(h_form) -> None:
    """:class:`~cuzk_jax.errors.BadInput` (a ``ValueError``) unless ``h_form`` is one of :data:`H_FORMS`."""
    if h_form not in H_FORMS:
        raise BadInput(f"unknown H query form {h_form!r}; expected one of {H_FORMS}")


def h_query_size(domain_size: int, h_form: str = "coefficients") -> int:
    """Points of a key's H query for a domain of ``domain_size`` (:data:`H_FORMS`)."""
    check_h_form(h_form)
    return domain_size if h_form == "lagrange" else domain_size - 1


def query_sizes(num_inputs: int, num_aux: int, domain_size: int, h_form: str = "coefficients") -> dict[str, int]:
    """Points per query for a key of these sizes and H query form (both key file formats check against it)."""
    nv = num_inputs + num_aux
    return {"a_query": nv, "b_g1_query": nv, "b_g2_query": nv, "h_query": h_query_size(domain_size, h_form),
            "l_query": num_aux}


# ---------------------------------------------------------------------------------------------------------------
# Proof
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Proof:
    """A Groth16 proof ``(A in G1, B in G2, C in G1)`` as host reference points."""

    a: Optional[tuple]
    b: Optional[tuple]
    c: Optional[tuple]

    def to_bytes(self) -> bytes:
        return ref_g1.encode(self.a) + ref_g2.encode(self.b) + ref_g1.encode(self.c)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Proof":
        """Parse 192 bytes; :class:`~cuzk_jax.errors.FormatError` (a ValueError) on a wrong length or an invalid
        point (not canonical, off the curve, outside the subgroup)."""
        if not isinstance(data, (bytes, bytearray)) or len(data) != PROOF_BYTES:
            raise FormatError(f"a proof is {PROOF_BYTES} bytes, got "
                              f"{len(data) if hasattr(data, '__len__') else type(data).__name__}")
        data = bytes(data)
        try:
            return cls(ref_g1.decode(data[:48]), ref_g2.decode(data[48:144]), ref_g1.decode(data[144:]))
        except ValueError as e:
            raise FormatError(f"invalid proof encoding: {e}") from None

    def arkworks(self):
        """The three points as py_arkworks_bls12381 objects (for pairing checks)."""
        import py_arkworks_bls12381 as ark

        data = self.to_bytes()
        return (ark.G1Point.from_compressed_bytes(data[:48]), ark.G2Point.from_compressed_bytes(data[48:144]),
                ark.G1Point.from_compressed_bytes(data[144:]))


def proofs_to_bytes(proofs) -> bytes:
    """Concatenate proofs (10 partitions -> 1920 bytes)."""
    return b"".join(p.to_bytes() for p in proofs)


def proofs_from_bytes(data: bytes) -> list[Proof]:
    """Split and parse concatenated proofs; FormatError naming the proof index on a bad one."""
    if not isinstance(data, (bytes, bytearray)):
        raise FormatError(f"proof bytes expected, got {type(data).__name__}")
    if len(data) % PROOF_BYTES:
        raise FormatError(f"proof bytes must be a multiple of {PROOF_BYTES}, got {len(data)}")
    out = []
    for k, i in enumerate(range(0, len(data), PROOF_BYTES)):
        try:
            out.append(Proof.from_bytes(data[i:i + PROOF_BYTES]))
        except FormatError as e:
            raise FormatError(f"proof {k}: {e}") from None
    return out


# ---------------------------------------------------------------------------------------------------------------
# Verifying key
# ---------------------------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes, what: str):
        self.data, self.pos, self.what = data, 0, what

    def take(self, n: int, section: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise KeyFormatError(f"{self.what}: truncated in {section} (needs {n} bytes at offset {self.pos}, "
                                 f"file has {len(self.data)})")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u32(self, section: str) -> int:
        return struct.unpack("<I", self.take(4, section))[0]

    def u64(self, section: str) -> int:
        return struct.unpack("<Q", self.take(8, section))[0]


def _checked_body(data: bytes, magic: bytes, what: str) -> bytes:
    if not isinstance(data, (bytes, bytearray)):
        raise KeyFormatError(f"{what}: expected bytes")
    data = bytes(data)
    if len(data) < len(magic) + 32 or data[:len(magic)] != magic:
        raise KeyFormatError(f"{what}: bad magic (not a cuzk_jax {what} file, or truncated)")
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        raise KeyFormatError(f"{what}: checksum mismatch (file truncated or corrupt)")
    return body


def _decode_ref(curve, raw: bytes, section: str, what: str):
    try:
        return curve.decode(raw, compressed=False)
    except ValueError as e:
        raise KeyFormatError(f"{what}: invalid {curve.name} point in {section}: {e}") from None


@dataclasses.dataclass
class VerifyingKey:
    """Host-side verifying key: ``alpha_g1``, ``beta_g2``, ``gamma_g2``, ``delta_g2`` and ``ic`` (1 + #public)."""

    alpha_g1: tuple
    beta_g2: tuple
    gamma_g2: tuple
    delta_g2: tuple
    ic: list

    @property
    def num_public(self) -> int:
        return len(self.ic) - 1

    def to_bytes(self) -> bytes:
        body = VK_MAGIC + struct.pack("<I", len(self.ic))
        body += ref_g1.encode(self.alpha_g1, compressed=False)
        for p in (self.beta_g2, self.gamma_g2, self.delta_g2):
            body += ref_g2.encode(p, compressed=False)
        body += b"".join(ref_g1.encode(p, compressed=False) for p in self.ic)
        return body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes) -> "VerifyingKey":
        what = "verifying key"
        body = _checked_body(data, VK_MAGIC, what)
        rd = _Reader(body, what)
        rd.take(8, "magic")
        n = rd.u32("header")
        alpha = _decode_ref(ref_g1, rd.take(96, "alpha_g1"), "alpha_g1", what)
        beta, gamma, delta = (_decode_ref(ref_g2, rd.take(192, s), s, what) for s in ("beta_g2", "gamma_g2", "delta_g2"))
        if n < 1 or 96 * n != len(body) - rd.pos:
            raise KeyFormatError(f"{what}: header declares {n} IC points, the file holds "
                                 f"{(len(body) - rd.pos) / 96:g} (at least 1 needed)")
        ic = [_decode_ref(ref_g1, rd.take(96, "ic"), f"ic[{i}]", what) for i in range(n)]
        vk = cls(alpha, beta, gamma, delta, ic)
        vk.check_points()
        return vk

    def check_points(self) -> None:
        """Refuse a key with the point at infinity as alpha, beta, gamma, delta or any IC point (KeyFormatError).

        Curve and subgroup membership are checked where the points are decoded; an identity here would make the
        pairing equation degenerate (e.g. identity gamma drops the public inputs from it), and no honest setup
        produces one (every public input has its own independence row, so its IC point is never zero)."""
        names = [("alpha_g1", self.alpha_g1), ("beta_g2", self.beta_g2), ("gamma_g2", self.gamma_g2),
                 ("delta_g2", self.delta_g2)] + [(f"ic[{i}]", p) for i, p in enumerate(self.ic)]
        for name, p in names:
            if p is None:
                raise KeyFormatError(f"verifying key: {name} is the point at infinity")

    def arkworks(self) -> dict:
        """The key's points as py_arkworks_bls12381 objects (cached)."""
        cached = self.__dict__.get("_ark")
        if cached is None:
            import py_arkworks_bls12381 as ark

            cached = {
                "alpha_g1": ark.G1Point.from_compressed_bytes(ref_g1.encode(self.alpha_g1)),
                "beta_g2": ark.G2Point.from_compressed_bytes(ref_g2.encode(self.beta_g2)),
                "gamma_g2": ark.G2Point.from_compressed_bytes(ref_g2.encode(self.gamma_g2)),
                "delta_g2": ark.G2Point.from_compressed_bytes(ref_g2.encode(self.delta_g2)),
                "ic": [ark.G1Point.from_compressed_bytes(ref_g1.encode(p)) for p in self.ic],
            }
            self.__dict__["_ark"] = cached
        return cached

    def __eq__(self, other):
        return isinstance(other, VerifyingKey) and self.to_bytes() == other.to_bytes()

    def __hash__(self):  # pytree metadata of ProvingKey must be hashable
        return hash(self.to_bytes())


# ---------------------------------------------------------------------------------------------------------------
# Proving key
# ---------------------------------------------------------------------------------------------------------------

_QUERIES = (("a_query", "g1"), ("b_g1_query", "g1"), ("b_g2_query", "g2"), ("h_query", "g1"), ("l_query", "g1"))


@dataclasses.dataclass(eq=False)
class ProvingKey:
    """Proving key with device-resident queries (``ops.curve.Affine`` arrays, batch axis = query index).

    ``a_query``/``b_g1_query``/``b_g2_query`` cover all ``num_inputs + num_aux`` columns of ``z``;
    ``h_query`` has :func:`h_query_size` points (``domain_size - 1`` in ``"coefficients"`` form, ``domain_size`` in
    ``"lagrange"`` form: ``h_form``, :data:`H_FORMS`); ``l_query`` covers the ``num_aux`` private columns.
    """

    vk: VerifyingKey
    beta_g1: tuple
    delta_g1: tuple
    a_query: object
    b_g1_query: object
    b_g2_query: object
    h_query: object
    l_query: object
    num_inputs: int
    num_aux: int
    domain_size: int
    circuit_digest: str
    h_form: str = "coefficients"

    def __post_init__(self):
        check_h_form(self.h_form)

    @property
    def num_vars(self) -> int:
        return self.num_inputs + self.num_aux

    def nbytes(self) -> int:
        """Device bytes held by the queries (for the key manager's LRU budget)."""
        return sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(self))

    def to_bytes(self) -> bytes:
        from cuzk_jax import points

        body = PK_MAGIC + struct.pack("<III", self.num_inputs, self.num_aux, self.domain_size)
        if self.h_form != "coefficients":
            body = PK_MAGIC_2 + body[len(PK_MAGIC):] + struct.pack("<I", H_FORMS.index(self.h_form))
        body += bytes.fromhex(self.circuit_digest)
        vkb = self.vk.to_bytes()
        body += struct.pack("<Q", len(vkb)) + vkb
        body += ref_g1.encode(self.beta_g1, compressed=False) + ref_g1.encode(self.delta_g1, compressed=False)
        for name, group in _QUERIES:
            enc = points.encode_array(getattr(self, name), group, compressed=False)
            body += struct.pack("<Q", enc.shape[0]) + enc.tobytes()
        return body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes, subgroup_check: bool = True) -> "ProvingKey":
        """Parse and validate a proving-key file (format above); ``subgroup_check=False`` skips the subgroup test
        of the queries only (see the module docstring)."""
        from cuzk_jax import points

        what = "proving key"
        v2 = bytes(data[:len(PK_MAGIC_2)]) == PK_MAGIC_2
        body = _checked_body(data, PK_MAGIC_2 if v2 else PK_MAGIC, what)
        rd = _Reader(body, what)
        rd.take(8, "magic")
        num_inputs, num_aux, domain = rd.u32("header"), rd.u32("header"), rd.u32("header")
        h_form = "coefficients"
        if v2:
            code = rd.u32("header")
            if code >= len(H_FORMS):
                raise KeyFormatError(f"{what}: unknown H query form code {code}")
            h_form = H_FORMS[code]
        digest = rd.take(32, "header").hex()
        vk = VerifyingKey.from_bytes(rd.take(rd.u64("vk length"), "verifying key"))
        beta = _decode_ref(ref_g1, rd.take(96, "beta_g1"), "beta_g1", what)
        delta = _decode_ref(ref_g1, rd.take(96, "delta_g1"), "delta_g1", what)
        for name, p in (("beta_g1", beta), ("delta_g1", delta)):
            if p is None:
                raise KeyFormatError(f"{what}: {name} is the point at infinity")
        expected = query_sizes(num_inputs, num_aux, domain, h_form)
        fields = {}
        for name, group in _QUERIES:
            count = rd.u64(f"{name} count")
            if count != expected[name]:
                raise KeyFormatError(f"{what}: {name} has {count} points, the header implies {expected[name]}")
            size = 96 if group == "g1" else 192
            raw = np.frombuffer(rd.take(count * size, name), np.uint8).reshape(count, size)
            try:
                fields[name] = points.decode(raw, group, compressed=False, check=subgroup_check)
            except ValueError as e:
                raise KeyFormatError(f"{what}: invalid point in {name}: {e}") from None
        if rd.pos != len(body):
            raise KeyFormatError(f"{what}: {len(body) - rd.pos} trailing bytes")
        if len(vk.ic) != num_inputs:
            raise KeyFormatError(f"{what}: verifying key has {len(vk.ic)} IC points for {num_inputs} inputs")
        return cls(vk=vk, beta_g1=beta, delta_g1=delta, num_inputs=num_inputs, num_aux=num_aux, domain_size=domain,
                   circuit_digest=digest, h_form=h_form, **fields)

    def save(self, path: str) -> None:
        atomic_write(path, self.to_bytes())

    def save_raw(self, path: str) -> int:
        """Write this key in the raw format of :mod:`cuzk_jax.groth16.keyfile`; returns the bytes on disk."""
        from . import keyfile

        return keyfile.save(self, path)

    @classmethod
    def load_raw(cls, path: str, **checks) -> "ProvingKey":
        """Read a raw key file (:func:`cuzk_jax.groth16.keyfile.load`; ``checks``: ``verify``, ``check``,
        ``subgroup_check``, ``device``)."""
        from . import keyfile

        return keyfile.load(path, **checks)

    @classmethod
    def load(cls, path: str, subgroup_check: bool = True) -> "ProvingKey":
        with open(path, "rb") as fh:
            return cls.from_bytes(fh.read(), subgroup_check=subgroup_check)


jax.tree_util.register_dataclass(
    ProvingKey,
    data_fields=["a_query", "b_g1_query", "b_g2_query", "h_query", "l_query"],
    meta_fields=["vk", "beta_g1", "delta_g1", "num_inputs", "num_aux", "domain_size", "circuit_digest", "h_form"],
)
