"""R1CS constraint evaluation as XLA programs: ``A z``, ``B z``, ``C z`` over Fr limb arrays, batched over partitions.

This is cuzk's "pre-compiled constraint evaluator": the R1CS of a circuit is fixed (uploaded once as a
:class:`DeviceR1CS`), only the assignment ``z`` changes, and one compiled program serves every partition / proof of
that shape.

Layouts:

* ``z``: uint32 ``(8, *batch, n_vars)`` -- Fr limbs (limb-major, Montgomery form, fully reduced, see
  :mod:`cuzk_jax.ops.field`), variables on the last axis in the order ``[1, public..., private...]``; for
  partitions ``batch = (P,)``, i.e. ``z`` is ``(8, P, n_vars)`` (:func:`cuzk_jax.circuits.r1cs.stack_z`).
* outputs ``az, bz, cz``: uint32 ``(8, *batch, m)``, same representation.
* :class:`DeviceR1CS`: the three matrices stacked into one nonzero list -- rows of A are ``[0, m)``, of B
  ``[m, 2m)``, of C ``[2m, 3m)`` -- so the whole evaluation is ONE gather, ONE stacked Fr multiplication and ONE
  segmented sum (the compile-time rule: one ``mul`` in the program).

Algorithm. Every nonzero contributes ``z[col] * coeff`` (a CIOS Montgomery product, < r). The row sums are
accumulated *without* modular reduction: the 8 limbs of all products of a row are summed as uint64 (a row of ``k``
terms gives limb sums < ``k * 2^32``, exact for ``k < 2^31``), either by a sorted scatter-add (``method="scatter"``)
or by a prefix sum along the nonzeros differenced at the row boundaries (``method="cumsum"``; exact modulo 2^64, so
wrap-around cancels). Carries are then propagated into a 9-limb integer ``V < k * r``, and one word of Montgomery
reduction (REDC with a single 32-bit quotient digit ``m = V_0 * (-r^-1) mod 2^32``) gives
``(V + m r) / 2^32 < 2r``; a conditional subtraction finishes. That division by 2^32 is pre-compensated by storing
the coefficient table as ``c * R * 2^32 mod r`` (Montgomery form with one extra factor 2^32), so the result is
exactly the Montgomery form of ``sum c * z``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax import encoding
from cuzk_jax.errors import Unsatisfied
from cuzk_jax.reference.constants import R

from .field import MASK32, cond_sub_limbs, fr, x64

METHODS = ("scatter", "cumsum")


class DeviceR1CS(NamedTuple):
    """The stacked nonzeros of A, B, C on device (a pytree; pass it to the jitted functions as an argument).

    rows: int32 (nnz,) sorted, in ``[0, 3m)``; cols: int32 (nnz,) column of z; coeff_ids: int32 (nnz,) into
    ``coeffs``; indptr: int32 (3m + 1,) CSR row pointers of the stacked matrix; coeffs: uint32 (8, K), the
    coefficient table as ``c * R * 2^32 mod r`` limbs (see the module docstring).
    """

    rows: jax.Array
    cols: jax.Array
    coeff_ids: jax.Array
    indptr: jax.Array
    coeffs: jax.Array

    @property
    def num_constraints(self) -> int:
        return (self.indptr.shape[0] - 1) // 3

    @property
    def nnz(self) -> int:
        return self.rows.shape[0]


def to_device(r1cs) -> DeviceR1CS:
    """Upload a :class:`cuzk_jax.circuits.r1cs.R1CS` (host numpy arrays) as a :class:`DeviceR1CS`."""
    m = r1cs.num_constraints
    mats = r1cs.matrices()
    nnz = sum(mat.nnz for mat in mats)
    if nnz >= 2**31 or 3 * m >= 2**31:
        raise ValueError(f"R1CS too large for int32 indexing (nnz={nnz}, constraints={m})")
    rows = np.concatenate([mat.row_ids().astype(np.int32) + k * m for k, mat in enumerate(mats)])
    cols = np.concatenate([mat.cols for mat in mats]).astype(np.int32)
    cids = np.concatenate([mat.coeff_ids for mat in mats]).astype(np.int32)
    indptr = np.concatenate([mats[0].indptr] + [mat.indptr[1:] + sum(x.nnz for x in mats[:k])
                                                 for k, mat in enumerate(mats) if k > 0]).astype(np.int32)
    scaled = [c * fr.r_mod % R * (1 << 32) % R for c in r1cs.coeffs]  # c * R * 2^32 mod r
    coeffs = encoding.ints_to_limbs(scaled, "fr", montgomery=False)
    return DeviceR1CS(rows=jnp.asarray(rows), cols=jnp.asarray(cols), coeff_ids=jnp.asarray(cids),
                      indptr=jnp.asarray(indptr), coeffs=jnp.asarray(coeffs))


def _check_z(dr: DeviceR1CS, z, chunk: int | None = None) -> None:
    if z.ndim < 2 or z.shape[0] != fr.limbs:
        raise ValueError(f"z must have shape (8, *batch, n_vars), got {z.shape}")
    if z.dtype != jnp.uint32:
        raise ValueError(f"z must be uint32 limbs, got {z.dtype}")
    if chunk is not None:
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive int, got {chunk!r}")
        if z.ndim != 3 or z.shape[1] % chunk:
            raise ValueError(f"chunk={chunk} needs z of shape (8, P, n_vars) with P a multiple of it, got {z.shape}")


def _reduce_wide(s: list) -> jax.Array:
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


def _abc(dr: DeviceR1CS, z: jax.Array, method: str) -> jax.Array:
    """Stacked ``[A z | B z | C z]`` -> uint32 (8, *batch, 3m)."""
    m3 = dr.indptr.shape[0] - 1
    batch = z.shape[1:-1]
    nnz = dr.rows.shape[0]
    if nnz == 0:
        return jnp.zeros((fr.limbs,) + batch + (m3,), jnp.uint32)
    zc = jnp.take(z, dr.cols, axis=-1)  # (8, *batch, nnz)
    cf = jnp.take(dr.coeffs, dr.coeff_ids, axis=1).reshape((fr.limbs,) + (1,) * len(batch) + (nnz,))
    prod = fr.mul(zc, cf).astype(jnp.uint64)  # one stacked Montgomery product for all three matrices
    if method == "scatter":
        acc = jnp.zeros((fr.limbs,) + batch + (m3,), jnp.uint64)
        sums = acc.at[..., dr.rows].add(prod, indices_are_sorted=True, mode="promise_in_bounds")
    elif method == "cumsum":
        cs = jnp.cumsum(prod, axis=-1)
        cs = jnp.concatenate([jnp.zeros(cs.shape[:-1] + (1,), jnp.uint64), cs], axis=-1)
        sums = jnp.take(cs, dr.indptr[1:], axis=-1) - jnp.take(cs, dr.indptr[:-1], axis=-1)
    else:
        raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")
    return _reduce_wide([sums[l] for l in range(fr.limbs)])


def _abc_chunked(dr: DeviceR1CS, z: jax.Array, method: str, chunk: int | None) -> jax.Array:
    """:func:`_abc`, optionally over the partition axis in sequential chunks of ``chunk`` (``lax.map``) to bound
    the memory of the per-nonzero intermediates (``z`` must then be ``(8, P, n_vars)`` with ``chunk | P``)."""
    if not chunk or z.ndim != 3 or z.shape[1] <= chunk:
        return _abc(dr, z, method)
    L, P, n = z.shape
    zs = z.reshape(L, P // chunk, chunk, n).transpose(1, 0, 2, 3)
    out = jax.lax.map(lambda zz: _abc(dr, zz, method), zs)  # (P / chunk, 8, chunk, 3m)
    return out.transpose(1, 0, 2, 3).reshape(L, P, out.shape[-1])


@functools.partial(jax.jit, static_argnames=("method", "chunk"))
def evaluate_program(dr, z, method, chunk=None):
    """The jitted program of :func:`evaluate`, without its input checks or x64 scope (``.lower`` it to time the
    compile; call it under ``jax.enable_x64``)."""
    abc = _abc_chunked(dr, z, method, chunk)
    m = (dr.indptr.shape[0] - 1) // 3
    return abc[..., :m], abc[..., m:2 * m], abc[..., 2 * m:]


@functools.partial(jax.jit, static_argnames=("method", "chunk"))
def check_program(dr, z, method, chunk=None):
    """The jitted program of :func:`check`, without its input checks or x64 scope (as :func:`evaluate_program`)."""
    abc = _abc_chunked(dr, z, method, chunk)
    m = (dr.indptr.shape[0] - 1) // 3
    az, bz, cz = abc[..., :m], abc[..., m:2 * m], abc[..., 2 * m:]
    bad = ~fr.eq(fr.mul(az, bz), cz)  # (*batch, m)
    ok = ~jnp.any(bad, axis=-1)
    first = jnp.where(ok, -1, jnp.argmax(bad, axis=-1)).astype(jnp.int32)
    return ok, first


@x64
def evaluate(dr: DeviceR1CS, z, method: str = "scatter", chunk: int | None = None):
    """``(A z, B z, C z)``, each uint32 ``(8, *batch, m)`` in Montgomery form (jitted; compiled once per shape).

    ``chunk``: evaluate the partitions of ``z`` (``(8, P, n_vars)``) ``chunk`` at a time (sequential ``lax.map``)
    to bound device memory; ``None`` evaluates all at once.
    """
    _check_z(dr, z, chunk)
    return evaluate_program(dr, z, method, chunk)


@x64
def check(dr: DeviceR1CS, z, method: str = "scatter", chunk: int | None = None):
    """``(ok, first_bad)``: per batch element, whether every constraint holds, and the index of the first one that
    does not (``-1`` when ``ok``). Shapes ``batch``."""
    _check_z(dr, z, chunk)
    return check_program(dr, z, method, chunk)


def assert_satisfied(r1cs, z, dr: DeviceR1CS | None = None, method: str = "scatter") -> None:
    """Raise :class:`cuzk_jax.errors.Unsatisfied` naming the first failing constraint (index and namespaced
    name; with a batch, the first failing partition) -- the device twin of ``R1CS.check``."""
    dr = dr if dr is not None else to_device(r1cs)
    if z.shape[-1] != r1cs.num_vars:
        raise ValueError(f"z has {z.shape[-1]} variables, the R1CS {r1cs.num_vars}")
    ok, first = check(dr, jnp.asarray(z), method)
    ok, first = np.asarray(ok).reshape(-1), np.asarray(first).reshape(-1)
    if not ok.all():
        p = int(np.argmin(ok))
        i = int(first[p])
        raise Unsatisfied(i, r1cs.constraint_name(i), p if z.ndim > 2 else None)


def evaluate_host(r1cs, z_limbs, method: str = "scatter", dr: DeviceR1CS | None = None):
    """Convenience: evaluate and return ``(az, bz, cz)`` as lists of canonical ints (single partition)."""
    dr = dr if dr is not None else to_device(r1cs)
    out = evaluate(dr, jnp.asarray(z_limbs), method)
    return tuple(encoding.limbs_to_ints(np.asarray(x), "fr", montgomery=True) for x in out)
