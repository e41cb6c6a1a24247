"""The synthesized constraint system (:class:`R1CS`) and assignment (:class:`Witness`) as host arrays.

Layout (fixed; the device evaluator :mod:`cuzk_jax.ops.r1cs` and the Groth16 prover rely on it):

* Columns index ``z = [1, public..., private...]`` (see :mod:`cuzk_jax.circuits.cs`): ``num_inputs = 1 +
  num_public`` leading columns, then ``num_aux`` private ones; ``num_vars = num_inputs + num_aux``.
* Each of A, B, C is a :class:`SparseMatrix` in CSR form over the ``m = num_constraints`` rows:
  ``indptr`` (int64, ``m + 1``; int32 in an R1CS loaded from a compiled file whose nnz fit, see
  :mod:`.compiled`), ``cols`` (int32, nnz) and ``coeff_ids`` (int32, nnz) indexing the shared
  coefficient table ``R1CS.coeffs`` (canonical Python ints in ``[0, r)``; ``coeffs[0] == 1``). Rows appear in
  synthesis order, terms within a row in the order the circuit wrote them; a column may repeat within a row (the
  terms add up).
* ``R1CS.coeff_limbs()`` gives the table as Fr limbs ``(8, K)`` uint32 (Montgomery form by default), the device
  representation; canonical ints (``coeffs``) are the reference representation.
* Constraint ``i`` is named ``namespaces[row_namespace[i]] + "/" + labels[row_label[i]]`` (the id arrays are int32
  from the builder, the narrowest unsigned type that holds the table's ids when loaded from a compiled file).
* Arrays may be read-only views of a memory-mapped file (:func:`cuzk_jax.circuits.compiled.load`): treat them as
  immutable (every method here builds new arrays).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Sequence

import numpy as np

from cuzk_jax import encoding
from cuzk_jax.errors import Unsatisfied
from cuzk_jax.reference import r1cs as ref_r1cs
from cuzk_jax.reference.constants import R

LIMBS_FR = 8  # uint32 limbs of an Fr element
# the namespace and label of bellman's input constraints (R1CS.with_input_constraints)
INPUT_NAMESPACE, INPUT_LABEL = "input_constraints", "input"


@dataclasses.dataclass(frozen=True)
class SparseMatrix:
    """CSR rows of one R1CS matrix: ``indptr`` (int64 -- or int32, see the module docstring -- m+1), ``cols``
    (int32, nnz), ``coeff_ids`` (int32, nnz)."""

    indptr: np.ndarray
    cols: np.ndarray
    coeff_ids: np.ndarray

    @property
    def num_rows(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return len(self.cols)

    def row_ids(self) -> np.ndarray:
        """The row of every nonzero (int32, nnz), sorted ascending."""
        return np.repeat(np.arange(self.num_rows, dtype=np.int32), np.diff(self.indptr))

    def row_lengths(self) -> np.ndarray:
        return np.diff(self.indptr)


@dataclasses.dataclass(frozen=True, eq=False)
class R1CS:
    """A rank-1 constraint system over BLS12-381 Fr in the layout of the module docstring."""

    num_inputs: int
    num_aux: int
    A: SparseMatrix
    B: SparseMatrix
    C: SparseMatrix
    coeffs: tuple
    namespaces: tuple
    labels: tuple
    row_namespace: np.ndarray
    row_label: np.ndarray
    input_names: tuple = ()
    appended_constraints: int = 0  # rows added after synthesis (with_input_constraints)
    # a header and identical blocks (circuits.tiling.Tiling), when the circuit says so: lets the prover evaluate
    # one block's rows per block instead of holding every nonzero (ops.r1cs.TiledR1CS); carried by
    # with_input_constraints, whose rows go after the blocks
    tiling: Any = dataclasses.field(default=None, compare=False, repr=False)
    # digest() of an R1CS whose arrays cannot change (read-only views of a checksummed compiled file); not an init
    # argument, so dataclasses.replace() never carries it over to a different structure
    _digest: str | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

    # -- sizes -------------------------------------------------------------------------------------------------------
    @property
    def num_public(self) -> int:
        return self.num_inputs - 1

    @property
    def num_private(self) -> int:
        return self.num_aux

    @property
    def num_vars(self) -> int:
        return self.num_inputs + self.num_aux

    @property
    def num_constraints(self) -> int:
        return self.A.num_rows

    @property
    def nnz(self) -> tuple[int, int, int]:
        return self.A.nnz, self.B.nnz, self.C.nnz

    def matrices(self) -> tuple[SparseMatrix, SparseMatrix, SparseMatrix]:
        return self.A, self.B, self.C

    def summary(self) -> dict:
        a, b, c = self.nnz
        return {"constraints": self.num_constraints, "public": self.num_public, "private": self.num_aux,
                "vars": self.num_vars, "nnz_a": a, "nnz_b": b, "nnz_c": c, "coeffs": len(self.coeffs)}

    def __repr__(self) -> str:
        s = self.summary()
        return "R1CS(" + ", ".join(f"{k}={v}" for k, v in s.items()) + ")"

    # -- names ---------------------------------------------------------------------------------------------------------
    def extended_constraint_name(self, i: int) -> str:
        """:meth:`constraint_name` of row ``i`` of :meth:`with_input_constraints`, without building it."""
        m = self.num_constraints
        return self.constraint_name(i) if i < m or not 0 <= i < m + self.num_inputs else \
            f"{INPUT_NAMESPACE}/{INPUT_LABEL}"

    def constraint_name(self, i: int) -> str:
        if not 0 <= i < self.num_constraints:
            raise ValueError(f"constraint index {i} out of range [0, {self.num_constraints})")
        ns = self.namespaces[int(self.row_namespace[i])]
        label = self.labels[int(self.row_label[i])]
        return f"{ns}/{label}" if ns and label else (ns or label or "<unnamed>")

    # -- representations -------------------------------------------------------------------------------------------
    def coeff_limbs(self, montgomery: bool = True) -> np.ndarray:
        """The coefficient table as Fr limbs ``(8, K)`` uint32 (Montgomery form unless ``montgomery=False``)."""
        return encoding.ints_to_limbs(list(self.coeffs), "fr", montgomery=montgomery)

    def reference_matrices(self) -> tuple:
        """``(A, B, C)`` as CSR triples of Python lists with canonical int coefficients (for the reference)."""
        out = []
        for m in self.matrices():
            table = self.coeffs
            out.append((m.indptr.tolist(), m.cols.tolist(), [table[i] for i in m.coeff_ids.tolist()]))
        return tuple(out)

    def digest(self) -> str:
        """SHA-256 over the whole structure (sizes, matrices, coefficients): equal digests = same R1CS shape.

        ``indptr`` is hashed as int64 whatever its stored width, so an R1CS loaded from a compiled file has the
        builder's digest; arrays are hashed in place (no copy of a memory-mapped matrix).
        """
        if self._digest is not None:
            return self._digest
        h = hashlib.sha256()
        h.update(np.array([self.num_inputs, self.num_aux, self.num_constraints], np.int64).tobytes())
        for m in self.matrices():
            _hash_array(h, m.indptr, np.int64)
            for arr in (m.cols, m.coeff_ids):
                _hash_array(h, arr, None)
        h.update(b"".join(c.to_bytes(32, "little") for c in self.coeffs))
        return h.hexdigest()

    def same_structure(self, other: "R1CS") -> bool:
        return self.digest() == other.digest()

    def with_input_rows(self, r0: int = 0) -> tuple:
        """``(A, B, C)``: rows ``[r0, m)`` of each matrix (re-based to start at row 0) followed by bellman's input
        constraints ``z_i * 0 = 0`` for every input column ``i`` (ONE included): A gets one nonzero, coefficient
        id 0 (``coeffs[0] == 1``), at column ``i``; B and C empty rows. ``r0 = 0``: the whole extended matrices
        (:meth:`with_input_constraints`); ``r0 = m``: the input rows alone, without a copy of the others (the
        tiled layout and the device setup append them this way at full size)."""
        assert self.coeffs[0] == 1
        n = self.num_inputs

        def extend(mat: SparseMatrix, with_inputs: bool) -> SparseMatrix:
            indptr = np.asarray(mat.indptr[r0:], np.int64)
            s0 = int(indptr[0])
            indptr, cols, cids = indptr - s0, mat.cols[s0:], mat.coeff_ids[s0:]
            if with_inputs:
                indptr = np.concatenate([indptr, indptr[-1] + np.arange(1, n + 1, dtype=np.int64)])
                cols = np.concatenate([cols, np.arange(n, dtype=np.int32)])
                cids = np.concatenate([cids, np.zeros(n, np.int32)])
            else:
                indptr = np.concatenate([indptr, np.full(n, indptr[-1], np.int64)])
            return SparseMatrix(indptr=indptr, cols=cols, coeff_ids=cids)

        return extend(self.A, True), extend(self.B, False), extend(self.C, False)

    def with_input_constraints(self) -> "R1CS":
        """Append bellman's input constraints ``z_i * 0 = 0`` for every input column ``i`` (ONE included;
        :meth:`with_input_rows`).

        Groth16 (bellman/bellperson ``prover.rs``) adds them so that the QAP polynomials of the public inputs are
        linearly independent; they are trivially satisfied, so the witness does not change.
        """
        n = self.num_inputs
        A, B, C = self.with_input_rows()
        ns = self.namespaces + (INPUT_NAMESPACE,)
        labels = self.labels + (INPUT_LABEL,)
        return dataclasses.replace(
            self,
            A=A, B=B, C=C,
            namespaces=ns, labels=labels,
            row_namespace=np.concatenate([self.row_namespace, np.full(n, len(ns) - 1, np.int32)]),
            row_label=np.concatenate([self.row_label, np.full(n, len(labels) - 1, np.int32)]),
            appended_constraints=self.appended_constraints + n,
        )

    # -- checks -------------------------------------------------------------------------------------------------------
    def check_shape(self, witness: "Witness") -> None:
        """ValueError unless ``witness`` has this system's input/private/constraint counts."""
        if len(witness.inputs) != self.num_inputs or len(witness.aux) != self.num_aux:
            raise ValueError(f"witness shape (inputs={len(witness.inputs)}, aux={len(witness.aux)}) does not match "
                             f"the R1CS (inputs={self.num_inputs}, aux={self.num_aux})")
        synthesized = self.num_constraints - self.appended_constraints
        if witness.num_constraints is not None and witness.num_constraints != synthesized:
            raise ValueError(f"witness was synthesized with {witness.num_constraints} constraints, the R1CS with "
                             f"{synthesized}: not the same circuit shape")

    def evaluate(self, witness: "Witness") -> tuple[list[int], list[int], list[int]]:
        """``(A z, B z, C z)`` with the Python-int reference."""
        self.check_shape(witness)
        return ref_r1cs.evaluate(*self.reference_matrices(), witness.z)

    def check(self, witness: "Witness", partition: int | None = None) -> None:
        """Raise :class:`~cuzk_jax.errors.Unsatisfied` naming the first failing constraint (Python ints)."""
        self.check_shape(witness)
        i = ref_r1cs.first_unsatisfied(*self.reference_matrices(), witness.z)
        if i is not None:
            raise Unsatisfied(i, self.constraint_name(i), partition)

    def is_satisfied(self, witness: "Witness") -> bool:
        try:
            self.check(witness)
        except Unsatisfied:
            return False
        return True


_HASH_CHUNK = 1 << 22  # elements per converted chunk in _hash_array


def _hash_array(h, arr: np.ndarray, dtype) -> None:
    """Feed ``arr``'s native little-endian bytes (as ``dtype`` if given) to ``h`` without copying a contiguous array
    of that dtype; other widths are converted a bounded chunk at a time."""
    arr = np.asarray(arr)
    if dtype is None or arr.dtype == np.dtype(dtype):
        if arr.flags.c_contiguous:
            h.update(memoryview(arr).cast("B") if arr.size else b"")
        else:
            h.update(np.ascontiguousarray(arr).tobytes())
        return
    for i in range(0, arr.size, _HASH_CHUNK):
        h.update(arr[i:i + _HASH_CHUNK].astype(dtype).tobytes())


@dataclasses.dataclass
class Witness:
    """An assignment: ``inputs = [1, public...]`` and ``aux = [private...]`` as canonical ints in ``[0, r)``."""

    inputs: list
    aux: list
    num_constraints: int | None = None

    @property
    def z(self) -> list[int]:
        return self.inputs + self.aux

    @property
    def public_inputs(self) -> list[int]:
        return self.inputs[1:]

    @property
    def num_vars(self) -> int:
        return len(self.inputs) + len(self.aux)

    def z_limbs(self, montgomery: bool = True, out: np.ndarray | None = None) -> np.ndarray:
        """``z`` as Fr limbs ``(8, num_vars)`` uint32 (Montgomery form unless ``montgomery=False``), written into
        ``out`` (an ``(8, num_vars)`` uint32 view, e.g. one partition of :func:`stack_z`'s array) if given.

        Two paths, the same limbs. Most entries of SHA-256-heavy witnesses are bits: those are encoded with numpy
        (0 -> 0, 1 -> the limbs of ``R mod r`` or of 1) from one object-array comparison, and only the others (1 %
        of a porep_like witness) go through Python-int conversion, which also checks them (ints in ``[0, r)``).
        When fewer than half the entries are 0 or 1 (Poseidon-heavy witnesses such as WinningPoSt's), the whole
        list goes through that conversion at once instead (no object array, gather or scatter).

        For such witnesses ``montgomery=False`` is much cheaper (a byte copy per value instead of a Python multiply
        and reduction), which is why the prover stages canonical limbs and converts on the device
        (:func:`stack_z_native`).
        """
        values = self.z
        one = encoding.ints_to_limbs([1], "fr", montgomery=montgomery)[:, 0]
        if out is None:
            out = np.empty((len(one), len(values)), np.uint32)
        elif out.shape != (len(one), len(values)) or out.dtype != np.uint32:
            raise ValueError(f"z_limbs: out must be uint32 of shape {(len(one), len(values))}, got {out.dtype} "
                             f"{out.shape}")
        try:
            bits = values.count(0) + values.count(1)
        except Exception:  # noqa: BLE001 -- an element that cannot be compared: the split below reports it
            bits = len(values)
        if 2 * bits < len(values):
            # mostly other values (Poseidon-heavy): one conversion of the whole list beats the 0/1 split's
            # object-array pass, gather and scatter; a value it refuses (bad, or a bool the split takes as 0/1)
            # goes through the split, which gives the usual error
            try:
                out[...] = encoding.ints_to_limbs(values, "fr", montgomery=montgomery)
                return out
            except ValueError:
                pass
        z = np.array(values, dtype=object)
        if z.ndim != 1:
            raise ValueError("witness values must be ints in [0, r)")
        ones = z == 1
        big = np.flatnonzero(~(ones | (z == 0)))
        np.multiply.outer(one, ones, out=out, casting="unsafe")
        if big.size:
            vals = z[big].tolist()
            try:
                out[:, big] = encoding.ints_to_limbs(vals, "fr", montgomery=montgomery)
            except ValueError as e:
                raise ValueError(f"witness values must be ints in [0, r): {e}") from None
        return out

    def with_value(self, column: int, value: int) -> "Witness":
        """A copy with ``z[column]`` replaced (tests: build a bad witness)."""
        z = self.z
        if not 0 <= column < len(z):
            raise ValueError(f"column {column} out of range [0, {len(z)})")
        z[column] = value % R
        n = len(self.inputs)
        return Witness(inputs=z[:n], aux=z[n:], num_constraints=self.num_constraints)


def stack_z(witnesses: Sequence[Witness], montgomery: bool = True) -> np.ndarray:
    """Witnesses of one circuit shape -> ``(8, P, num_vars)`` uint32 limbs (the batched layout of ops.r1cs),
    Montgomery form unless ``montgomery=False``."""
    if not witnesses:
        raise ValueError("stack_z: no witnesses")
    n = witnesses[0].num_vars
    for w in witnesses:
        if w.num_vars != n:
            raise ValueError(f"stack_z: witnesses have different sizes ({w.num_vars} vs {n})")
    out = np.empty((LIMBS_FR, len(witnesses), n), np.uint32)
    for p, w in enumerate(witnesses):
        w.z_limbs(montgomery, out=out[:, p, :])
    return out


def stack_z_native(witnesses: Sequence[Witness]) -> tuple[np.ndarray, bool]:
    """``(z, montgomery)``: :func:`stack_z` in the form that costs the host least, and which form that is.

    Montgomery when every witness already holds Montgomery limbs (:class:`PackedWitness`, the porep_like batched
    path: a plain copy); otherwise canonical -- Python ints are byte-copied, never multiplied by ``R`` on the host
    -- and the prover's stage converts on the device (:func:`cuzk_jax.groth16.pipeline.stage` with
    ``montgomery=False``: one ``to_mont``, the same limbs as the host conversion). A batch mixing Montgomery
    :class:`PackedWitness` objects with other witnesses is canonical (the packed ones go through Python ints)."""
    montgomery = bool(witnesses) and all(isinstance(w, PackedWitness) and w.montgomery for w in witnesses)
    return stack_z(witnesses, montgomery=montgomery), montgomery


class PackedWitness(Witness):
    """A :class:`Witness` held as Fr limbs ``(8, num_vars)`` uint32 (what the batched witness path produces).

    ``z_limbs`` (hence :func:`stack_z` and the prover) copies the limbs instead of converting Python ints; ``inputs``
    is a list of ints (small); ``aux`` is a read-only sequence that converts on access, and ``z`` converts every
    value (reference checks and tests; slow at scale by nature).
    """

    def __init__(self, limbs: np.ndarray, num_inputs: int, num_constraints: int | None = None,
                 montgomery: bool = True):
        limbs = np.asarray(limbs)
        if limbs.ndim != 2 or limbs.shape[0] != LIMBS_FR or limbs.dtype != np.uint32:
            raise ValueError(f"PackedWitness: limbs must be (8, num_vars) uint32, got {limbs.dtype} {limbs.shape}")
        self.limbs, self.montgomery = limbs, montgomery
        inputs = encoding.limbs_to_ints(limbs[:, :num_inputs], "fr", montgomery=montgomery)
        super().__init__(inputs=inputs, aux=_PackedAux(self, num_inputs), num_constraints=num_constraints)

    @property
    def num_vars(self) -> int:
        return self.limbs.shape[1]

    @property
    def z(self) -> list[int]:
        return encoding.limbs_to_ints(self.limbs, "fr", montgomery=self.montgomery)

    def z_limbs(self, montgomery: bool = True, out: np.ndarray | None = None) -> np.ndarray:
        if montgomery != self.montgomery:
            return Witness(self.inputs, list(self.aux), self.num_constraints).z_limbs(montgomery, out)
        if out is None:
            return self.limbs.copy()
        if out.shape != self.limbs.shape or out.dtype != np.uint32:
            raise ValueError(f"z_limbs: out must be uint32 of shape {self.limbs.shape}, got {out.dtype} {out.shape}")
        out[...] = self.limbs
        return out


class _PackedAux:
    def __init__(self, w: PackedWitness, start: int):
        self.w, self.start = w, start

    def __len__(self) -> int:
        return self.w.limbs.shape[1] - self.start

    def __getitem__(self, i):
        n = len(self)
        if isinstance(i, slice):
            idx = range(n)[i]
            cols = np.arange(self.start + idx.start, self.start + idx.stop, idx.step) if len(idx) else []
            return encoding.limbs_to_ints(self.w.limbs[:, cols], "fr", montgomery=self.w.montgomery) if len(idx) \
                else []
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return encoding.limbs_to_ints(self.w.limbs[:, self.start + i], "fr", montgomery=self.w.montgomery)[0]

    def __iter__(self):
        return iter(self[:])

    def __add__(self, other):
        return list(self) + list(other)

    def __radd__(self, other):
        return list(other) + list(self)
