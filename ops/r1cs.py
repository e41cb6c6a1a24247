"""R1CS constraint evaluation as XLA programs: ``A z``, ``B z``, ``C z`` over Fr limb arrays, batched over partitions.

This is cuzk's "pre-compiled constraint evaluator": the R1CS of a circuit is fixed (uploaded once as a
:class:`DeviceR1CS`), only the assignment ``z`` changes, and one compiled program serves every partition / proof of
that shape.

Layouts:

* ``z``: uint32 ``(8, *batch, n_vars)`` -- Fr limbs (limb-major, Montgomery form, fully reduced, see
  :mod:`cuzk_jax.ops.field`), variables on the last axis in the order ``[1, public..., private...]``; for
  partitions ``batch = (P,)``, i.e. ``z`` is ``(8, P, n_vars)`` (:func:`cuzk_jax.circuits.r1cs.stack_z`).
* outputs ``az, bz, cz``: uint32 ``(8, *batch, m)``, same representation.
* :class:`DeviceR1CS`: the three matrices stacked into one CSR nonzero list -- rows of A are ``[0, m)``, of B
  ``[m, 2m)``, of C ``[2m, 3m)`` -- so the whole evaluation is ONE gather, ONE stacked Fr multiplication and ONE
  segmented sum (the compile-time rule: one ``mul`` in the program). Per nonzero the device holds its column and
  coefficient id (8 B); the rows are only the CSR row pointers ``indptr`` (4 B per stacked row), which is all the
  prefix sum below needs -- no per-nonzero row ids.

Algorithm. Every nonzero contributes ``z[col] * coeff`` (a CIOS Montgomery product, < r). The row sums are
accumulated *without* modular reduction: the 8 limbs of all products of a row are summed as uint64 (a row of ``k``
terms gives limb sums < ``k * 2^32``, exact for ``k < 2^31``) by a segmented prefix sum -- ``S = cumsum`` of the
products along the nonzeros (in CSR order, with a leading zero), differenced at the row boundaries: row ``i``'s sum
is ``S[indptr[i + 1]] - S[indptr[i]]``. uint64 arithmetic is exact modulo 2^64 and every row sum is below 2^64, so
a wrap-around of ``S`` cancels in the difference (with the < 2^31 nonzeros of int32 indexing, ``S < 2^63`` anyway).
Carries are then propagated into a 9-limb integer ``V < k * r``, and one word of Montgomery reduction (REDC with a
single 32-bit quotient digit ``m = V_0 * (-r^-1) mod 2^32``) gives ``(V + m r) / 2^32 < 2r``; a conditional
subtraction finishes. That division by 2^32 is pre-compensated by storing the coefficient table as
``c * R * 2^32 mod r`` (Montgomery form with one extra factor 2^32), so the result is exactly the Montgomery form of
``sum c * z``.

Sizes and memory (issue 22 item 2, issue 18 item 3):

* **Buckets.** ``to_device(r1cs, bucket_steps=s)`` pads rows, nonzeros and the coefficient table to
  :func:`bucket` sizes (padded rows evaluate to exactly zero, see :class:`DeviceR1CS`), and :func:`pad_z` pads
  ``z``'s variable axis, so circuits of nearby sizes share one compiled program.
* **Row chunks.** :func:`evaluate_chunked` evaluates a :class:`ChunkedR1CS` (:func:`chunk_rows`) one chunk of
  constraints at a time in a ``fori_loop`` -- one compiled body, results written in place -- for sizes where the
  one-shot gather of every nonzero does not fit; :func:`evaluate_device_bytes` / :func:`rows_per_chunk_for` size
  the chunks for a memory budget.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax import encoding
from cuzk_jax.errors import BadInput, MemoryBudgetError, Unsatisfied
from cuzk_jax.reference.constants import R

from .field import MASK32, cond_sub_limbs, fr, x64

class DeviceR1CS(NamedTuple):
    """The stacked nonzeros of A, B, C on device (a pytree; pass it to the jitted functions as an argument).

    With ``M`` stacked rows per matrix (``M = m``, or ``M = bucket(m)`` when padded, see :func:`to_device`):

    * ``cols``: int32 (nnz,) column of z; ``coeff_ids``: int32 (nnz,) into ``coeffs`` -- the nonzeros in CSR
      order of the stacked matrix (A rows ``[0, M)``, B ``[M, 2M)``, C ``[2M, 3M)``);
    * ``indptr``: int32 (3M + 1,) CSR row pointers of the stacked matrix: stacked row ``i`` holds the nonzeros
      ``[indptr[i], indptr[i + 1])`` (``indptr[-1] == nnz``, the padded count). There is no per-nonzero row id
      array: the prefix-sum evaluation needs only these pointers (a nonzero's row, where host code wants it, is
      ``np.repeat(np.arange(3M), np.diff(indptr))``);
    * ``coeffs``: uint32 (8, K), the coefficient table as ``c * R * 2^32 mod r`` limbs (module docstring);
    * ``sizes``: int32 (4,) ``[m, nnz, num_vars, z_width]`` -- the real sizes of a padded R1CS (constraints,
      nonzeros, variables) and the width of the ``z`` its program is compiled for -- or ``None`` (an R1CS built
      elsewhere, e.g. from a zkey: every size is the array shape). A *leaf*, not static data, so that circuits of
      different real sizes in one bucket share one compiled program; no program reads it.

    Device bytes: 8 per (padded) nonzero, 4 per stacked row (12 per constraint) and 32 per coefficient.

    Padding invariant (``to_device(..., bucket_steps=s)``): the padded nonzeros sit in the last stacked row
    ``3M - 1`` (``indptr[3M]`` is the padded nonzero count) with column 0 and a coefficient id whose table entry
    is zero, so they add exactly zero; the padded rows ``[m, M)`` of each matrix have no other nonzeros. Hence
    rows ``[m, M)`` of ``A z, B z, C z`` are exactly zero (``0 * 0 = 0``: satisfied, never reported as the first
    failure) and rows ``[0, m)`` equal the unpadded evaluation bit for bit.
    """

    cols: jax.Array
    coeff_ids: jax.Array
    indptr: jax.Array
    coeffs: jax.Array
    sizes: np.ndarray | jax.Array | None = None

    def _size(self, i: int, default: int) -> int:
        return default if self.sizes is None else int(np.asarray(self.sizes)[i])

    @property
    def padded_constraints(self) -> int:
        """``M``: rows per matrix as stored (the length of the evaluations' last axis)."""
        return (self.indptr.shape[0] - 1) // 3

    @property
    def num_constraints(self) -> int:
        """``m``: the real number of constraints (rows ``[m, M)`` of a padded R1CS evaluate to zero)."""
        return self._size(0, self.padded_constraints)

    @property
    def nnz(self) -> int:
        """The real number of nonzeros of A, B and C together (without the padding)."""
        return self._size(1, self.cols.shape[0])

    @property
    def num_vars(self) -> int | None:
        """The real length of ``z`` (None when unknown: ``sizes`` is None)."""
        return None if self.sizes is None else self._size(2, 0)

    @property
    def z_width(self) -> int | None:
        """The length of ``z``'s variable axis the programs of this R1CS are meant to be called with
        (``bucket(num_vars)`` when padded; :func:`pad_z`), or None when unknown."""
        return None if self.sizes is None else self._size(3, 0)


#: Default steps per octave of :func:`bucket` for :func:`to_device` (padding <= 25%; 4 programs per doubling).
BUCKET_STEPS = 4


def bucket(n: int, steps: int = BUCKET_STEPS) -> int:
    """The smallest ``b >= n`` of the form ``k * 2^e`` with ``steps <= k < 2 * steps`` (``steps`` per octave: 1
    gives powers of two, 8 gives 1/8-octave steps); ``n`` itself when ``n <= 2 * steps``.

    Invariants: ``n <= bucket(n) <= next_pow2(n)`` (so a bucketed constraint count never exceeds the QAP domain,
    a power of two >= m), ``bucket(n) < n * (1 + 1 / steps)``, and ``bucket`` is monotone: sizes in one bucket
    share every array shape derived from it."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise BadInput(f"bucket needs a non-negative int, got {n!r}")
    if not isinstance(steps, int) or steps < 1 or steps & (steps - 1):
        raise BadInput(f"bucket steps must be a power of two >= 1, got {steps!r}")
    n = int(n)
    shift = max(0, n.bit_length() - 1 - (steps.bit_length() - 1))
    return -(-n >> shift) << shift


def _scaled(coeffs) -> list[int]:
    """The coefficient table as the evaluator stores it: ``c * R * 2^32 mod r`` (module docstring)."""
    return [c * fr.r_mod % R * (1 << 32) % R for c in coeffs]


def _with_zero(coeffs: np.ndarray) -> tuple[np.ndarray, int]:
    """``(coeffs with a zero entry appended, its id)``: the padding nonzeros' coefficient."""
    return np.concatenate([coeffs, np.zeros((fr.limbs, 1), np.uint32)], axis=1), coeffs.shape[1]


def _check_int32(m: int, nnz: int, mp: int, nnzp: int) -> None:
    if nnzp >= 2**31 or 3 * mp >= 2**31:
        raise BadInput(
            f"R1CS too large for the device evaluation's int32 indexing: {nnz} nonzeros ({nnz / max(m, 1):.1f} per "
            f"constraint) in {m} constraints, padded to {nnzp} nonzeros and {3 * mp} stacked rows (each must stay "
            f"below 2^31); a circuit this dense or large cannot be proved here")


def check_indexable(r1cs, *, bucket_steps: int | None = BUCKET_STEPS, appended: bool = True) -> None:
    """BadInput unless :func:`to_device` can lay out ``r1cs`` (a host R1CS) with int32 indices; ``appended``:
    ``r1cs`` is before bellman's input constraints, which this then counts (one constraint and one nonzero per
    input). Cheap (sizes only): setup calls it so that a circuit the prover cannot evaluate fails before hours of
    key generation, not after."""
    extra = r1cs.num_inputs if appended else 0
    m = r1cs.num_constraints + extra
    nnz = sum(mat.nnz for mat in r1cs.matrices()) + extra
    if bucket_steps is None:
        _check_int32(m, nnz, m, nnz)
    else:
        _check_int32(m, nnz, bucket(m, bucket_steps), bucket(nnz, bucket_steps))


def flat_bytes(r1cs, *, bucket_steps: int | None = BUCKET_STEPS, appended: bool = True) -> int:
    """Device bytes of :func:`to_device`'s flat layout of ``r1cs`` (a host R1CS; ``appended`` as in
    :func:`check_indexable`), from its sizes alone: 8 per padded nonzero (column and coefficient id), 4 per stacked
    row pointer and 32 per coefficient."""
    extra = r1cs.num_inputs if appended else 0
    m = r1cs.num_constraints + extra
    nnz = sum(mat.nnz for mat in r1cs.matrices()) + extra
    k = len(r1cs.coeffs)
    if bucket_steps is not None:  # as to_device pads them (the table to a power of two, with a zero entry)
        m, nnz, k = bucket(m, bucket_steps), bucket(nnz, bucket_steps), 1 << k.bit_length()
    return 8 * nnz + 4 * (3 * m + 1) + 32 * k


def to_device(r1cs, *, bucket_steps: int | None = None, upload: bool = True) -> DeviceR1CS:
    """Upload a :class:`cuzk_jax.circuits.r1cs.R1CS` (host numpy arrays) as a :class:`DeviceR1CS`.

    ``upload=False``: the same layout with numpy leaves, left on the host for a caller that decides later how it
    goes to the device (the resident key: whole, or cut by :func:`chunk_rows` under a memory plan -- at a 2^27
    partition ~8 GB that would otherwise be uploaded, read back and uploaded again in chunks).

    ``bucket_steps=None``: exact shapes (one compiled program per circuit size). ``bucket_steps=s``: rows per
    matrix padded to ``bucket(m, s)``, nonzeros to ``bucket(nnz, s)``, the coefficient table to a power of two
    (with a zero entry for the padding), and ``z_width = bucket(num_vars, s)`` -- circuits whose sizes fall in the
    same buckets share every evaluation program when ``z`` is padded with :func:`pad_z` (padding invariant:
    :class:`DeviceR1CS`)."""
    m = r1cs.num_constraints
    mats = r1cs.matrices()
    nnz = sum(mat.nnz for mat in mats)
    if bucket_steps is None:
        mp, nnzp, vp = m, nnz, r1cs.num_vars
    else:
        mp, nnzp, vp = bucket(m, bucket_steps), bucket(nnz, bucket_steps), bucket(r1cs.num_vars, bucket_steps)
    _check_int32(m, nnz, mp, nnzp)
    scaled = _scaled(r1cs.coeffs)
    zero_id = len(scaled)
    if bucket_steps is not None:  # entry zero_id is zero: the padding's coefficient
        scaled = scaled + [0] * ((1 << zero_id.bit_length()) - zero_id)
    # filled in place (at sector scale each array is ~1 GB per matrix: no concatenation copies)
    cols, cids = (np.empty(nnzp, np.int32) for _ in range(2))
    pos = 0
    for mat in mats:
        end = pos + mat.nnz
        cols[pos:end] = mat.cols
        cids[pos:end] = mat.coeff_ids
        pos = end
    cols[pos:], cids[pos:] = 0, zero_id  # the padding nonzeros (none without buckets), in the last stacked row
    indptr = _stacked_row_pointers(mats, mp, nnzp)
    coeffs = encoding.ints_to_limbs(scaled, "fr", montgomery=False)
    sizes = np.array([m, nnz, r1cs.num_vars, vp], np.int32)
    put = jnp.asarray if upload else (lambda a: a)
    return DeviceR1CS(cols=put(cols), coeff_ids=put(cids), indptr=put(indptr), coeffs=put(coeffs), sizes=sizes)


def _stacked_row_pointers(mats, mp: int, total: int) -> np.ndarray:
    """Row pointers (int32, ``3 mp + 1``) of the stacked rows of :func:`to_device`: row ``r`` of matrix ``k`` is
    stacked row ``k mp + r``, rows ``num_rows .. mp - 1`` of each matrix are empty, and the ``total - nnz`` padding
    nonzeros sit in the last stacked row. The same array as ``np.searchsorted(rows, arange(3 mp + 1))`` over the
    stacked row ids (which the device form does not hold), made from the matrices' own CSR pointers in one pass
    instead of a binary search per row over every nonzero (seconds at 2^24 constraints, about a minute at a 2^27
    sector partition)."""
    out = np.empty(3 * mp + 1, np.int64)
    off = 0
    for k, mat in enumerate(mats):
        m = mat.num_rows
        out[k * mp:k * mp + m] = off + np.asarray(mat.indptr[:m], np.int64)
        off += mat.nnz
        out[k * mp + m:(k + 1) * mp] = off
    out[3 * mp] = total
    return out.astype(np.int32)


def pad_z(dr: DeviceR1CS, z):
    """``z`` (``(8, *batch, num_vars)``, numpy or jax) with its variable axis zero-padded to ``dr.z_width`` (the
    shape a bucketed R1CS's program is shared at; the padding columns are never read). Unchanged when it already
    has that width or ``dr`` does not know it."""
    width = dr.z_width
    if width is None or z.shape[-1] == width:
        return z
    if z.shape[-1] > width:
        raise BadInput(f"z has {z.shape[-1]} variables, more than this R1CS's z width {width}")
    xp = np if isinstance(z, np.ndarray) else jnp
    return xp.pad(z, [(0, 0)] * (z.ndim - 1) + [(0, width - z.shape[-1])])


def _check_z(dr: DeviceR1CS, z, chunk: int | None = None) -> None:
    if getattr(z, "ndim", 0) < 2 or z.shape[0] != fr.limbs:
        raise BadInput(f"z must have shape (8, *batch, n_vars), got {getattr(z, 'shape', type(z).__name__)}")
    if z.dtype != jnp.uint32:
        raise BadInput(f"z must be uint32 limbs, got {z.dtype}")
    if getattr(dr, "sizes", None) is not None:
        try:
            need = dr.num_vars
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            need = None  # under a caller's jit the sizes are traced: nothing to compare
        if need is not None and z.shape[-1] < need:
            raise BadInput(f"z has {z.shape[-1]} variables, the R1CS {need}")
    if chunk is not None:
        if not isinstance(chunk, int) or chunk < 1:
            raise BadInput(f"chunk must be a positive int, got {chunk!r}")
        if z.ndim != 3 or z.shape[1] % chunk:
            raise BadInput(f"chunk={chunk} needs z of shape (8, P, n_vars) with P a multiple of it, got {z.shape}")


def reduce_wide(s: list) -> jax.Array:
    """Limb sums (8 uint64 arrays, each < 2^63) -> the canonical residue / 2^32 (see the module docstring)."""
    p = fr.p_limbs
    t, carry = [], None
    for l in range(8):
        v = s[l] if carry is None else s[l] + carry
        t.append(v & MASK32)
        carry = v >> 32
    m = (t[0] * fr.pinv) & MASK32
    c = (t[0] + m * p[0]) >> 32  # the low word of V + m r is zero by the choice of m
    out = []
    for j in range(1, 8):
        v = t[j] + m * p[j] + c
        out.append(v & MASK32)
        c = v >> 32
    out.append(carry + c)  # < 2^32 because (V + m r) / 2^32 < 2r < 2^256
    return jnp.stack(cond_sub_limbs(out, p)).astype(jnp.uint32)


def _abc(dr: DeviceR1CS, z: jax.Array) -> jax.Array:
    """Stacked ``[A z | B z | C z]`` -> uint32 (8, *batch, 3m): the row sums by the prefix sum of the module
    docstring, then :func:`reduce_wide`."""
    m3 = dr.indptr.shape[0] - 1
    batch = z.shape[1:-1]
    nnz = dr.cols.shape[0]
    if nnz == 0:
        return jnp.zeros((fr.limbs,) + batch + (m3,), jnp.uint32)
    zc = jnp.take(z, dr.cols, axis=-1)  # (8, *batch, nnz)
    cf = jnp.take(dr.coeffs, dr.coeff_ids, axis=1).reshape((fr.limbs,) + (1,) * len(batch) + (nnz,))
    prod = fr.mul(zc, cf).astype(jnp.uint64)  # one stacked Montgomery product for all three matrices
    # the prefix sum with a leading zero, differenced at the row boundaries (exact mod 2^64: wrap-around cancels)
    cs = jnp.cumsum(prod, axis=-1)
    cs = jnp.concatenate([jnp.zeros(cs.shape[:-1] + (1,), jnp.uint64), cs], axis=-1)
    sums = jnp.take(cs, dr.indptr[1:], axis=-1) - jnp.take(cs, dr.indptr[:-1], axis=-1)
    return reduce_wide([sums[l] for l in range(fr.limbs)])


def _abc_chunked(dr: DeviceR1CS, z: jax.Array, chunk: int | None) -> jax.Array:
    """:func:`_abc`, optionally over the partition axis in sequential chunks of ``chunk`` (``lax.map``) to bound
    the memory of the per-nonzero intermediates (``z`` must then be ``(8, P, n_vars)`` with ``chunk | P``)."""
    if not chunk or z.ndim != 3 or z.shape[1] <= chunk:
        return _abc(dr, z)
    L, P, n = z.shape
    zs = z.reshape(L, P // chunk, chunk, n).transpose(1, 0, 2, 3)
    out = jax.lax.map(lambda zz: _abc(dr, zz), zs)  # (P / chunk, 8, chunk, 3m)
    return out.transpose(1, 0, 2, 3).reshape(L, P, out.shape[-1])


@functools.partial(jax.jit, static_argnames=("chunk",))
def evaluate_program(dr, z, chunk=None):
    """The jitted program of :func:`evaluate`, without its input checks or x64 scope (``.lower`` it to time the
    compile; call it under ``jax.enable_x64``)."""
    abc = _abc_chunked(dr, z, chunk)
    m = (dr.indptr.shape[0] - 1) // 3
    return abc[..., :m], abc[..., m:2 * m], abc[..., 2 * m:]


@functools.partial(jax.jit, static_argnames=("chunk",))
def check_program(dr, z, chunk=None):
    """The jitted program of :func:`check`, without its input checks or x64 scope (as :func:`evaluate_program`)."""
    abc = _abc_chunked(dr, z, chunk)
    m = (dr.indptr.shape[0] - 1) // 3
    az, bz, cz = abc[..., :m], abc[..., m:2 * m], abc[..., 2 * m:]
    bad = ~fr.eq(fr.mul(az, bz), cz)  # (*batch, m)
    ok = ~jnp.any(bad, axis=-1)
    first = jnp.where(ok, -1, jnp.argmax(bad, axis=-1)).astype(jnp.int32)
    return ok, first


@x64
def evaluate(dr: DeviceR1CS, z, chunk: int | None = None):
    """``(A z, B z, C z)``, each uint32 ``(8, *batch, M)`` in Montgomery form (jitted; compiled once per shape).
    ``M = dr.padded_constraints``: the real ``m`` rows, then (bucketed ``dr``) zero rows.

    ``chunk``: evaluate the partitions of ``z`` (``(8, P, n_vars)``) ``chunk`` at a time (sequential ``lax.map``)
    to bound device memory; ``None`` evaluates all at once.
    """
    _check_z(dr, z, chunk)
    return evaluate_program(dr, z, chunk)


@x64
def check(dr: DeviceR1CS, z, chunk: int | None = None):
    """``(ok, first_bad)``: per batch element, whether every constraint holds, and the index of the first one that
    does not (``-1`` when ``ok``). Shapes ``batch``."""
    _check_z(dr, z, chunk)
    return check_program(dr, z, chunk)


def assert_satisfied(r1cs, z, dr: DeviceR1CS | None = None, *, rows_per_chunk: int | None = None) -> None:
    """Raise :class:`cuzk_jax.errors.Unsatisfied` naming the first failing constraint (index and namespaced
    name; with a batch, the first failing partition) -- the device twin of ``R1CS.check``. ``rows_per_chunk``:
    evaluate in chunks of that many constraints (:func:`evaluate_chunked`; same report)."""
    dr = dr if dr is not None else to_device(r1cs)
    if z.shape[-1] != r1cs.num_vars:
        raise BadInput(f"z has {z.shape[-1]} variables, the R1CS {r1cs.num_vars}")
    zd = pad_z(dr, jnp.asarray(z))
    if rows_per_chunk is None:
        ok, first = check(dr, zd)
    else:
        ok, first = evaluate_chunked(dr, zd, rows_per_chunk=rows_per_chunk)[3:]
    ok, first = np.asarray(ok).reshape(-1), np.asarray(first).reshape(-1)
    if not ok.all():
        p = int(np.argmin(ok))
        i = int(first[p])
        raise Unsatisfied(i, r1cs.constraint_name(i), p if z.ndim > 2 else None)


def evaluate_host(r1cs, z_limbs, dr: DeviceR1CS | None = None):
    """Convenience: evaluate and return ``(az, bz, cz)`` as lists of canonical ints (single partition)."""
    dr = dr if dr is not None else to_device(r1cs)
    m = dr.num_constraints
    out = evaluate(dr, pad_z(dr, jnp.asarray(z_limbs)))
    return tuple(encoding.limbs_to_ints(np.asarray(x[..., :m]), "fr", montgomery=True) for x in out)


# ---------------------------------------------------------------------------------------------------------------
# Evaluation in row chunks (issue 18 item 3): when the gather of every nonzero for every partition does not fit
# ---------------------------------------------------------------------------------------------------------------


class ChunkedR1CS(NamedTuple):
    """A :class:`DeviceR1CS` cut into ``C`` chunks of ``Rc`` constraints each, every chunk padded to the same ``N``
    nonzeros, so one compiled loop body evaluates every chunk (a pytree of arrays, like :class:`DeviceR1CS`).

    Chunk ``j`` holds the constraints ``[j Rc, (j + 1) Rc)`` of *all three* matrices, stacked locally (A rows
    ``[0, Rc)``, B ``[Rc, 2Rc)``, C ``[2Rc, 3Rc)``), so a chunk evaluates whole constraints and can check them:

    * ``cols``: int32 (C, N); ``coeff_ids``: int32 (C, N) into ``coeffs``: chunk ``j``'s nonzeros in CSR order
      of its local stacked rows;
    * ``indptr``: int32 (C, 3Rc + 1) local CSR row pointers (``indptr[j, -1] == N``; no per-nonzero row ids, as
      :class:`DeviceR1CS`);
    * ``coeffs``: uint32 (8, K) the source's table with one zero entry appended (the padding's coefficient).

    Padding: a chunk's padded nonzeros sit in its last local row with column 0 and the zero coefficient, adding
    exactly zero; the constraints past the source's ``M`` rows in the last chunk have no other nonzeros, so they
    evaluate to zero and are satisfied. ``C = ceil(M / Rc)``. Device bytes: ``C (8 N + 12 Rc + 4)`` and the table.
    """

    cols: jax.Array
    coeff_ids: jax.Array
    indptr: jax.Array
    coeffs: jax.Array

    @property
    def rows_per_chunk(self) -> int:
        return (self.indptr.shape[1] - 1) // 3

    @property
    def num_chunks(self) -> int:
        return self.cols.shape[0]

    @property
    def nbytes(self) -> int:
        return int(sum(x.nbytes for x in self))


def _row_nnz(dr: DeviceR1CS) -> np.ndarray:
    """Nonzeros per constraint of A, B and C together: int64 (M,) (host; reads ``dr.indptr``)."""
    indptr = np.asarray(dr.indptr).astype(np.int64)
    per_row = np.diff(indptr)  # (3M,)
    return per_row.reshape(3, -1).sum(axis=0)


def _max_chunk_nnz(row_nnz: np.ndarray, rows_per_chunk: int) -> int:
    m = row_nnz.shape[0]
    if m == 0:
        return 0
    return int(np.add.reduceat(row_nnz, np.arange(0, m, rows_per_chunk)).max())


def _check_rows_per_chunk(rows_per_chunk) -> int:
    if not isinstance(rows_per_chunk, (int, np.integer)) or isinstance(rows_per_chunk, bool) or rows_per_chunk < 1:
        raise BadInput(f"rows_per_chunk must be a positive int, got {rows_per_chunk!r}")
    return int(rows_per_chunk)


def chunk_rows(dr: DeviceR1CS, rows_per_chunk: int, *, nnz_steps: int | None = BUCKET_STEPS) -> ChunkedR1CS:
    """Cut ``dr`` into chunks of ``rows_per_chunk`` constraints (host work, one pass over the nonzeros: build it
    once per R1CS and keep it, as the :class:`DeviceR1CS`). The chunk's nonzero count ``N`` (the largest chunk's)
    is rounded up with :func:`bucket` (``nnz_steps``; ``None``: exact) so nearby circuits share the chunk program.

    No sort: the stacked nonzeros of matrix ``k`` and constraints ``[r0, r1)`` are one contiguous range of ``dr``
    (``indptr[k M + r0] : indptr[k M + r1]``), copied whole into the chunk after the previous matrices' ranges."""
    rc = _check_rows_per_chunk(rows_per_chunk)
    M = dr.padded_constraints
    indptr = np.asarray(dr.indptr).astype(np.int64)
    cols, cids = np.asarray(dr.cols), np.asarray(dr.coeff_ids)
    coeffs, zero_id = _with_zero(np.asarray(dr.coeffs))
    C = max(1, -(-M // rc))
    r0 = np.minimum(np.arange(C, dtype=np.int64) * rc, M)
    r1 = np.minimum(r0 + rc, M)
    per_chunk = sum(indptr[k * M + r1] - indptr[k * M + r0] for k in range(3))  # (C,)
    n = int(per_chunk.max()) if per_chunk.size else 0
    n = max(1, bucket(n, nnz_steps) if nnz_steps else n)
    if n >= 2**31 or 3 * rc >= 2**31:
        raise BadInput(f"chunk too large for int32 indexing ({n} nonzeros, {rc} rows)")
    # padding: column 0, the zero coefficient, in the last local row (indptr[j, -1] == n below)
    out_cols = np.zeros((C, n), np.int32)
    out_cids = np.full((C, n), zero_id, np.int32)
    out_ptr = np.empty((C, 3 * rc + 1), np.int32)
    for j in range(C):
        a, nrows, pos = int(r0[j]), int(r1[j] - r0[j]), 0
        for k in range(3):
            s0, s1 = int(indptr[k * M + a]), int(indptr[k * M + a + nrows])
            cnt = s1 - s0
            out_cols[j, pos:pos + cnt] = cols[s0:s1]
            out_cids[j, pos:pos + cnt] = cids[s0:s1]
            out_ptr[j, k * rc:k * rc + nrows + 1] = indptr[k * M + a:k * M + a + nrows + 1] - s0 + pos
            out_ptr[j, k * rc + nrows + 1:(k + 1) * rc + 1] = pos + cnt  # rows past M: empty
            pos += cnt
        out_ptr[j, -1] = n  # the padding belongs to the last local row
    return ChunkedR1CS(cols=jnp.asarray(out_cols), coeff_ids=jnp.asarray(out_cids), indptr=jnp.asarray(out_ptr),
                       coeffs=jnp.asarray(coeffs))


@functools.partial(jax.jit, static_argnames=("m",))
def chunked_program(cr: ChunkedR1CS, z, m: int):
    """The jitted program of :func:`evaluate_chunked` (no checks, no x64 scope: call it under
    ``jax.enable_x64``): a ``fori_loop`` over the chunks, each evaluated by :func:`_abc` and written in place into
    the outputs; the first failing constraint of each batch element is the first chunk's with a failure, at its
    first failing row (chunks run in order) -- the index the one-shot :func:`check` reports."""
    C = cr.cols.shape[0]
    rc = (cr.indptr.shape[1] - 1) // 3

    def chunk(j):
        return DeviceR1CS(cols=cr.cols[j], coeff_ids=cr.coeff_ids[j], indptr=cr.indptr[j], coeffs=cr.coeffs)

    # buffers of C rc rows: when C rc == m the final slices are whole arrays (no copy)
    return _step_loop(C, rc, C * rc, chunk, lambda j: j * rc, z, m)


def _step_loop(steps: int, rc: int, rows: int, sub_of, start_of, z, m: int):
    """The loop of :func:`chunked_program` and :func:`tiled_program`: step ``j`` evaluates ``sub_of(j)`` (a
    :class:`DeviceR1CS` of ``rc`` rows per matrix) with :func:`_abc`, checks its constraints and writes its A, B,
    C rows in place from row ``start_of(j)`` of three ``rows``-row buffers; the first failing constraint of each
    batch element is the first step's with a failure, at its first failing row (steps run in row order) -- the
    index the one-shot :func:`check` reports. Returns ``(A z, B z, C z)`` cut to ``m`` rows, ``ok``, ``first``."""
    batch = z.shape[1:-1]

    def body(j, carry):
        outs, first = carry
        abc = _abc(sub_of(j), z)  # (8, *batch, 3 rc): this step's A, B, C rows
        a, b, c = abc[..., :rc], abc[..., rc:2 * rc], abc[..., 2 * rc:]
        bad = ~fr.eq(fr.mul(a, b), c)  # (*batch, rc)
        start = jnp.asarray(start_of(j), jnp.int32)
        hit = jnp.any(bad, axis=-1) & (first < 0)
        first = jnp.where(hit, start + jnp.argmax(bad, axis=-1).astype(jnp.int32), first)
        at = (jnp.int32(0),) * (1 + len(batch)) + (start,)  # one index type (x64 would make literals int64)
        outs = tuple(jax.lax.dynamic_update_slice(o, x, at) for o, x in zip(outs, (a, b, c)))
        return outs, first

    outs0 = tuple(jnp.zeros((fr.limbs,) + batch + (rows,), jnp.uint32) for _ in range(3))
    first0 = jnp.full(batch, -1, jnp.int32)
    (az, bz, cz), first = jax.lax.fori_loop(0, steps, body, (outs0, first0))
    return az[..., :m], bz[..., :m], cz[..., :m], first < 0, first


class TiledR1CS(NamedTuple):
    """An R1CS made of a header, ``count`` identical blocks and bellman's input constraints, laid out for the
    device as a few row *patterns* evaluated in order (a pytree of arrays, like :class:`ChunkedR1CS`).

    A circuit tiled from one block (:mod:`cuzk_jax.circuits.tiling`: WindowPoSt's sectors, SnapDeals' and PoRep's
    challenges) repeats one block's rows with its wires shifted. The flat layout holds 8 bytes per nonzero on the
    device (a full WindowPoSt partition: 2.94G nonzeros, ~25 GB, past int32 indexing); here a pattern is one range of
    constraints -- the header, a group of ``g`` blocks, the last (shorter) group, the input constraints -- and the
    group pattern is evaluated once per group with its columns moved: ``cols + mult[j] * steps``.

    * ``cols``, ``steps``, ``coeff_ids``: int32 (K, N), pattern ``k``'s nonzeros as :class:`ChunkedR1CS`'s chunk
      (CSR order of its local stacked rows ``[0, 3 Rc)``; ``cols`` the columns of the pattern's first occurrence,
      ``steps`` the column shift per block: 0 for ONE and header wires) -- 12 B per pattern nonzero;
    * ``indptr``: int32 (K, 3Rc + 1), the patterns' local CSR row pointers (no per-nonzero row ids; the padding
      nonzeros are in the last local row); ``coeffs``: uint32 (8, Kc + 1) with a zero entry last (the padding's);
    * ``pattern``, ``mult``, ``start``: int32 (C,): evaluation step ``j`` runs pattern ``pattern[j]`` with column
      multiplier ``mult[j]`` and writes its ``Rc`` rows from output row ``start[j]`` on.

    Steps run in order of ``start``; a step's rows past its pattern's own are zero (and satisfied) and fall on the
    next step's rows, which overwrite them (the output buffer has ``Rc`` spare rows for the last step).
    """

    cols: jax.Array
    steps: jax.Array
    coeff_ids: jax.Array
    indptr: jax.Array
    coeffs: jax.Array
    pattern: jax.Array
    mult: jax.Array
    start: jax.Array

    @property
    def rows_per_chunk(self) -> int:
        return (self.indptr.shape[1] - 1) // 3

    @property
    def num_chunks(self) -> int:
        return self.pattern.shape[0]

    @property
    def nbytes(self) -> int:
        return int(sum(x.nbytes for x in self))


def _pattern_arrays(mats, r0: int, nrows: int, rc: int, n: int, zero_id: int, step_of):
    """Pattern arrays (cols, steps, coeff_ids, indptr) of constraints ``[r0, r0 + nrows)`` of the three
    matrices, padded to ``n`` nonzeros (in the last local row) and ``rc`` rows per matrix; ``step_of(cols) ->
    steps`` (int64)."""
    out_cols = np.zeros(n, np.int32)
    out_steps = np.zeros(n, np.int32)
    out_cids = np.full(n, zero_id, np.int32)
    out_ptr = np.empty(3 * rc + 1, np.int64)
    pos = 0
    for k, mat in enumerate(mats):
        indptr = np.asarray(mat.indptr[r0:r0 + nrows + 1], np.int64)
        s0, s1 = int(indptr[0]), int(indptr[-1])
        cnt = s1 - s0
        cols = np.asarray(mat.cols[s0:s1], np.int64)
        out_cols[pos:pos + cnt] = cols
        out_steps[pos:pos + cnt] = step_of(cols)
        out_cids[pos:pos + cnt] = mat.coeff_ids[s0:s1]
        out_ptr[k * rc:k * rc + nrows + 1] = indptr - s0 + pos
        out_ptr[k * rc + nrows + 1:(k + 1) * rc + 1] = pos + cnt
        pos += cnt
    out_ptr[-1] = n
    return out_cols, out_steps, out_cids, out_ptr.astype(np.int32)


#: Nonzeros one step of a :class:`TiledR1CS` aims at (the blocks per group are chosen to stay near it).
TILED_STEP_NNZ = 1 << 24


def tile(r1cs, tiling, *, step_nnz: int = TILED_STEP_NNZ, nnz_steps: int | None = BUCKET_STEPS,
         input_rows: bool = False) -> TiledR1CS:
    """The :class:`TiledR1CS` of ``r1cs`` (a host R1CS *with* bellman's input constraints appended, rows: header,
    blocks, inputs) whose blocks ``tiling`` describes (attributes ``m_h``, ``m_b``, ``count`` (rows), ``ni_h``,
    ``ni_b``, ``na_h``, ``na_b`` (wires): :class:`cuzk_jax.circuits.tiling.Tiling`). Host work over one group of
    blocks, the header and the input rows only: the other blocks' nonzeros are never read.

    ``input_rows=True``: ``r1cs`` is the circuit's own R1CS, *without* the input constraints, and they are
    appended here to the last pattern -- the same result as tiling ``r1cs.with_input_constraints()``, without that
    whole-matrix copy (for a full WindowPoSt partition, ~12 GB of host memory)."""
    mats = r1cs.matrices()
    m_h, m_b, count = int(tiling.m_h), int(tiling.m_b), int(tiling.count)
    m = r1cs.num_constraints
    tail_rows = m - m_h - count * m_b
    if tail_rows < 0 or count < 1 or m_b < 1:
        raise BadInput(f"tiling does not fit the R1CS: {m_h} + {count} x {m_b} rows > {m}")
    if input_rows:  # the rows after the blocks and the input rows, without copying the rest
        tail = r1cs.with_input_rows(m_h + count * m_b)
        tail_rows += r1cs.num_inputs
    ni_h, ni_b, na_h, na_b = (int(getattr(tiling, k)) for k in ("ni_h", "ni_b", "na_h", "na_b"))
    n_in = ni_h + count * ni_b
    if n_in != r1cs.num_inputs:
        raise BadInput(f"tiling does not fit the R1CS: {n_in} inputs, the R1CS has {r1cs.num_inputs}")
    block_nnz = sum(int(mat.indptr[m_h + m_b] - mat.indptr[m_h]) for mat in mats)
    g = max(1, min(count, step_nnz // max(1, block_nnz)))
    groups, rest = divmod(count, g)

    def block_step(cols):  # block input columns shift by ni_b per block, block aux columns by na_b
        return np.where((cols >= ni_h) & (cols < n_in), ni_b, np.where(cols >= n_in + na_h, na_b, 0))

    none = lambda cols: np.zeros_like(cols)  # noqa: E731
    # (matrices, first row in them, rows, step function) per pattern; steps: (pattern, mult, start)
    pats, steps = [], []
    if m_h:
        steps.append((len(pats), 0, 0))
        pats.append((mats, 0, m_h, none))
    gid = len(pats)
    pats.append((mats, m_h, g * m_b, block_step))
    steps += [(gid, j * g, m_h + j * g * m_b) for j in range(groups)]
    if rest:
        steps.append((len(pats), 0, m_h + groups * g * m_b))
        pats.append((mats, m_h + groups * g * m_b, rest * m_b, none))
    if tail_rows:  # rows after the blocks (the input rows: their own small matrices with input_rows)
        steps.append((len(pats), 0, m_h + count * m_b))
        pats.append((tail, 0, tail_rows, none) if input_rows else (mats, m_h + count * m_b, tail_rows, none))
    rc = max(nrows for _, _, nrows, _ in pats)
    n = max(sum(int(mat.indptr[r0 + nrows] - mat.indptr[r0]) for mat in ms) for ms, r0, nrows, _ in pats)
    n = max(1, bucket(n, nnz_steps) if nnz_steps else n)
    if n >= 2**31 or 3 * rc >= 2**31 or n_in + r1cs.num_aux >= 2**31:
        raise BadInput(f"tiled pattern too large for int32 indexing ({n} nonzeros, {rc} rows)")
    coeffs, zero_id = _with_zero(encoding.ints_to_limbs(_scaled(r1cs.coeffs), "fr", montgomery=False))
    arrays = [_pattern_arrays(ms, r0, nrows, rc, n, zero_id, fn) for ms, r0, nrows, fn in pats]
    stacked = [np.stack([a[i] for a in arrays]) for i in range(4)]
    table = np.array(steps, np.int32).reshape(-1, 3)
    return TiledR1CS(cols=stacked[0], steps=stacked[1], coeff_ids=stacked[2], indptr=stacked[3], coeffs=coeffs,
                     pattern=table[:, 0].copy(), mult=table[:, 1].copy(), start=table[:, 2].copy())


@functools.partial(jax.jit, static_argnames=("m",))
def tiled_program(tr: TiledR1CS, z, m: int):
    """The jitted program of :func:`evaluate_tiled` (no checks, no x64 scope: call it under ``jax.enable_x64``):
    :func:`_step_loop` over the steps of ``tr``, each a pattern with its columns moved, written from its
    ``start`` row; the first failing constraint is the first step's with a failure (steps run in row order)."""
    C = tr.pattern.shape[0]
    rc = (tr.indptr.shape[1] - 1) // 3

    def step(j):
        p = tr.pattern[j]
        return DeviceR1CS(cols=tr.cols[p] + tr.mult[j] * tr.steps[p], coeff_ids=tr.coeff_ids[p], indptr=tr.indptr[p],
                          coeffs=tr.coeffs)

    # buffers of m + Rc rows: the last step writes Rc rows from its start, past m where its pattern is shorter
    return _step_loop(C, rc, m + rc, step, lambda j: tr.start[j], z, m)


@x64
def evaluate_tiled(tr: TiledR1CS, z, num_rows: int):
    """``(A z, B z, C z, ok, first)`` of a :class:`TiledR1CS` (``num_rows``: the source's constraints), equal to
    :func:`evaluate_chunked` on the flat layout."""
    return tiled_program(tr, z, int(num_rows))


# Bytes of the evaluation's live intermediates, fitted (rounded up) to XLA's buffer assignment
# (``compiled.memory_analysis().temp_size_in_bytes``; tests/test_r1cs_device.py checks the bound on this platform).
# Per nonzero and partition: the gathered z limbs, the uint64 products and the Montgomery product's temporaries --
# measured ~600 B with the CPU's rolled CIOS (a fori_loop carrying uint64 limb arrays) and ~150 B unrolled.
_PER_NNZ = {"rolled": 640, "unrolled": 192}
# Per nonzero, once: the gathered coefficient limbs (uint32 and uint64).
_PER_NNZ_SHARED = 128
# Per stacked row and partition: the uint64 row sums of 8 limbs (the reduction's temporaries reuse them).
_PER_ROW = 64


def _eval_bytes(M: int, nnz: int, batch: int, rows_per_chunk: int | None, schedule: str | None = None) -> int:
    per_nnz = _PER_NNZ[schedule or fr.schedule]
    outputs = 3 * 32 * M * batch  # az, bz, cz: (8, P, M) uint32 each
    rows = M if rows_per_chunk is None else rows_per_chunk
    work = batch * (per_nnz * nnz + _PER_ROW * 3 * rows) + _PER_NNZ_SHARED * nnz
    if rows_per_chunk is None:
        return outputs + work
    padded = max(1, -(-M // rows_per_chunk)) * rows_per_chunk
    staging = 3 * 32 * padded * batch if padded != M else 0  # the loop's buffers, when the outputs are slices
    return staging + outputs + work


def evaluate_device_bytes(dr: DeviceR1CS, batch: int, rows_per_chunk: int | None = None, *,
                          schedule: str | None = None) -> int:
    """Estimated peak device bytes the evaluation of ``batch`` partitions adds on top of its inputs (``z`` and the
    R1CS tables, which the caller holds anyway): the intermediates of the one-shot gather (``rows_per_chunk``
    None) or of one chunk, plus the outputs ``A z, B z, C z`` (and, chunked with ``C Rc != M``, the loop's
    buffers the outputs are sliced from). An upper
    bound of what XLA's buffer assignment reports on CPU, for the memory planner. ``dr``: a
    :class:`DeviceR1CS` (host-readable) or a :class:`ChunkedR1CS` (its chunk shape is used). ``schedule``: the
    field multiplication schedule the program is compiled with (``"rolled"`` / ``"unrolled"``; default: this
    platform's, :func:`cuzk_jax.ops.config.default_schedule`) -- the rolled CPU schedule keeps ~3x more live."""
    if not isinstance(batch, (int, np.integer)) or batch < 1:
        raise BadInput(f"batch must be a positive int, got {batch!r}")
    if isinstance(dr, ChunkedR1CS):
        M = dr.num_chunks * dr.rows_per_chunk
        return _eval_bytes(M, dr.cols.shape[1], int(batch), dr.rows_per_chunk, schedule)
    if isinstance(dr, TiledR1CS):  # every step has at most Rc rows: C Rc bounds M; the loop's buffers hold M + Rc
        rc = dr.rows_per_chunk
        M = dr.num_chunks * rc
        return _eval_bytes(M, dr.cols.shape[1], int(batch), rc, schedule) + 3 * 32 * (M + rc) * int(batch)
    if rows_per_chunk is None:
        return _eval_bytes(dr.padded_constraints, dr.cols.shape[0], int(batch), None, schedule)
    rc = _check_rows_per_chunk(rows_per_chunk)
    n = max(1, bucket(_max_chunk_nnz(_row_nnz(dr), rc)))
    return _eval_bytes(dr.padded_constraints, n, int(batch), rc, schedule)


def rows_per_chunk_for(dr: DeviceR1CS, batch: int, budget_bytes: int, *, schedule: str | None = None) -> int | None:
    """The largest power-of-two rows per chunk whose :func:`evaluate_device_bytes` fits ``budget_bytes`` for a
    batch of ``batch`` partitions; ``None`` when the one-shot evaluation fits. Raises
    :class:`~cuzk_jax.errors.MemoryBudgetError` when not even one row per chunk fits."""
    if _eval_bytes(dr.padded_constraints, dr.cols.shape[0], batch, None, schedule) <= budget_bytes:
        return None
    row_nnz = _row_nnz(dr)  # one host pass; each candidate below sums it per chunk
    rc = 1 << max(0, (dr.padded_constraints - 1).bit_length())
    while rc >= 1:
        if _eval_bytes(dr.padded_constraints, max(1, bucket(_max_chunk_nnz(row_nnz, rc))), batch, rc,
                       schedule) <= budget_bytes:
            return rc
        rc //= 2
    raise MemoryBudgetError(
        f"constraint evaluation of {batch} partition(s) needs more than the {budget_bytes} bytes given even one "
        f"row at a time (the outputs alone are {_eval_bytes(dr.padded_constraints, 0, batch, 1, schedule)} bytes)")


@x64
def evaluate_chunked(dr, z, *, budget_bytes: int | None = None, rows_per_chunk: int | None = None,
                     num_rows: int | None = None):
    """``(A z, B z, C z, ok, first)`` evaluated ``rows_per_chunk`` constraints at a time (one compiled loop body
    for every chunk): the evaluations as :func:`evaluate` returns them (``(8, *batch, M)``), and per batch element
    whether every constraint holds and the first that does not (-1 when ok) -- equal to :func:`check`.

    ``dr``: a :class:`ChunkedR1CS` (from :func:`chunk_rows`: keep it with the key) or a :class:`DeviceR1CS`, cut
    here (host work over every nonzero) with ``rows_per_chunk`` or the largest chunk fitting ``budget_bytes``
    (:func:`rows_per_chunk_for`; one chunk of all rows when the one-shot evaluation fits).

    Output rows: ``dr``'s ``M`` for a :class:`DeviceR1CS`; for a :class:`ChunkedR1CS`, ``num_rows`` (the source's
    ``M``; default ``C * Rc``, whose rows past the source's ``M`` are zero)."""
    if isinstance(dr, ChunkedR1CS):
        if budget_bytes is not None or rows_per_chunk is not None:
            raise BadInput("a ChunkedR1CS has its chunk size already: pass neither budget_bytes nor rows_per_chunk")
        cr, m = dr, num_rows
    else:
        if (budget_bytes is None) == (rows_per_chunk is None):
            raise BadInput("evaluate_chunked needs exactly one of budget_bytes and rows_per_chunk")
        _check_z(dr, z)
        if rows_per_chunk is None:
            batch = int(np.prod(z.shape[1:-1], dtype=np.int64))
            rows_per_chunk = rows_per_chunk_for(dr, max(batch, 1), budget_bytes) or max(1, dr.padded_constraints)
        cr, m = chunk_rows(dr, rows_per_chunk), dr.padded_constraints
    _check_z(cr, z)
    if m is None:
        m = cr.num_chunks * cr.rows_per_chunk
    if not isinstance(m, (int, np.integer)) or not 0 <= m <= cr.num_chunks * cr.rows_per_chunk:
        raise BadInput(f"num_rows must be an int in [0, {cr.num_chunks * cr.rows_per_chunk}], got {m!r}")
    return chunked_program(cr, z, m)
