"""The scalar side of a Groth16 setup as device array programs (Groth 2016, section 3.2; arkworks ``generator.rs``).

All field elements here are Fr limb arrays ``(8, N)`` uint32, limb-major, Montgomery form, fully reduced (the
representation of :mod:`cuzk_jax.ops.field`). The programs use the rolled multiplication schedule on every
platform: they run once per setup on a small share of its work, so compile time matters more than speed here.
Each function is one jitted program over a chunk of static size, so a setup of any size reuses a few compiled
programs and holds at most one chunk of intermediates:

* :func:`powers` -- ``base^i`` for ``i`` in ``[start, start + chunk)`` as ``lo[i mod 2^a] * hi[i >> a]`` from two
  small host-made tables (``lo[j] = base^j``, ``hi[j] = c * base^(j 2^a)``; a constant ``c`` folded into ``hi``):
  one product per element, no sequential chain. Used for the domain roots ``w^j`` and the H query scalars
  ``tau^i Z(tau) / delta``.
* :func:`lagrange` -- the Lagrange basis of the size-``n`` domain at ``tau``,
  ``L_j(tau) = (tau^n - 1) / n * w^j / (tau - w^j)`` (the barycentric form; e.g. Aurora / Marlin's
  ``evaluate_all_lagrange_coefficients``), with the ``tau - w^j`` of a chunk inverted at once (Montgomery's trick,
  ``fr.batch_inv``).
* :func:`column_sums` -- ``u_i(tau) = sum_j M[j][i] L_j(tau)`` for one R1CS matrix ``M`` given as its nonzeros
  ``(row, col, coeff_id)``: per nonzero one Montgomery product ``L[row] * coeff`` and a scatter-add by column of
  the UNREDUCED limbs into ``uint64`` accumulators (a column with ``k`` nonzeros sums to less than ``k 2^32`` per
  limb: exact for ``k < 2^31``), then one reduction per column. The reduction and the coefficient scaling
  (``c R 2^32 mod r``, compensating the one-word REDC) are those of :mod:`cuzk_jax.ops.r1cs`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax import encoding
from cuzk_jax.reference.constants import R

from .field import fr_rolled as fr
from .r1cs import reduce_wide


def mont_limbs(values) -> np.ndarray:
    """Canonical ints in ``[0, r)`` -> Montgomery Fr limbs ``(8, N)`` (host, for small tables and constants)."""
    return encoding.ints_to_limbs([int(v) % R for v in values], "fr", montgomery=True)


def power_tables(base: int, count: int, scale: int = 1) -> tuple[np.ndarray, np.ndarray, int]:
    """Host tables for :func:`powers`: ``(lo, hi, a)`` with ``lo[j] = base^j`` (``j < 2^a``) and
    ``hi[j] = scale * base^(j 2^a)`` covering ``count`` powers; about ``2 sqrt(count)`` Python products."""
    bits = max(1, (max(count, 2) - 1).bit_length())
    a = (bits + 1) // 2
    nlo, nhi = 1 << a, 1 << max(0, bits - a)
    lo = [1] * nlo
    for j in range(1, nlo):
        lo[j] = lo[j - 1] * base % R
    step = pow(base, nlo, R)
    hi = [scale % R] * nhi
    for j in range(1, nhi):
        hi[j] = hi[j - 1] * step % R
    return mont_limbs(lo), mont_limbs(hi), a


def _powers(lo, hi, start, chunk: int, a: int):
    idx = start + jnp.arange(chunk, dtype=jnp.int32)
    lo_g = jnp.take(lo, idx & ((1 << a) - 1), axis=1, mode="clip")
    hi_g = jnp.take(hi, idx >> a, axis=1, mode="clip")
    return fr.mul(lo_g, hi_g)


@functools.partial(jax.jit, static_argnames=("chunk", "a"))
def powers(lo, hi, start, chunk: int, a: int):
    """``scale * base^i`` for ``i = start .. start + chunk - 1`` (Montgomery Fr ``(8, chunk)``) from the tables of
    :func:`power_tables`; indices past the tables are clipped (callers drop those lanes)."""
    with jax.enable_x64(True):
        return _powers(lo, hi, jnp.asarray(start, jnp.int32), chunk, a)


@functools.partial(jax.jit, static_argnames=("chunk", "a", "inv_chunk"))
def lagrange(lo, hi, start, tau, k, chunk: int, a: int, inv_chunk: int = 64):
    """``L_j(tau) = k * w^j / (tau - w^j)`` for ``j`` in ``[start, start + chunk)``: ``lo``/``hi`` the
    :func:`power_tables` of the root of unity ``w``, ``tau`` and ``k = (tau^n - 1) / n`` Montgomery Fr ``(8, 1)``.
    ``tau`` must not be a power of ``w`` (the caller checks ``tau^n != 1``)."""
    with jax.enable_x64(True):
        wj = _powers(lo, hi, jnp.asarray(start, jnp.int32), chunk, a)
        inv = fr.batch_inv(fr.sub(jnp.broadcast_to(tau, wj.shape), wj), chunk=inv_chunk)
        t, = fr.mul_many([(wj, inv)])
        return fr.mul(t, jnp.broadcast_to(k, t.shape))


def scaled_coeffs(coeffs) -> np.ndarray:
    """The coefficient table as ``c R 2^32 mod r`` limbs (see :mod:`cuzk_jax.ops.r1cs`) plus one trailing zero
    entry (the padding nonzeros of :func:`column_sums` point at it)."""
    scaled = [c * fr.r_mod % R * (1 << 32) % R for c in coeffs] + [0]
    return encoding.ints_to_limbs(scaled, "fr", montgomery=False)


def _column_sums_chunk_fn(acc, lag, rows, cols, cids, coeffs):
    with jax.enable_x64(True):
        lr = jnp.take(lag, rows, axis=1, mode="clip")
        cf = jnp.take(coeffs, cids, axis=1, mode="clip")
        prod = fr.mul(lr, cf).astype(jnp.uint64)
        return acc.at[:, cols].add(prod, mode="drop")


@functools.lru_cache(maxsize=None)
def _column_sums_chunk(platform: str):
    # the accumulator is donated (updated in place) where the platform supports donation (not XLA:CPU)
    return jax.jit(_column_sums_chunk_fn, donate_argnums=() if platform == "cpu" else (0,))


@jax.jit
def _finish_sums(acc):
    with jax.enable_x64(True):
        return reduce_wide([acc[l] for l in range(8)])


def column_chunk(nnz: int, chunk: int = 1 << 22) -> int:
    """Nonzeros per call of :func:`column_sums` for a matrix of ``nnz``: ``chunk``, or the power of two at or above
    ``nnz`` when that is smaller (the static shape of its compiled program)."""
    return max(1, min(chunk, 1 << max(0, (max(nnz, 1) - 1).bit_length())))


def column_sums(lag, rows: np.ndarray | None, cols: np.ndarray, cids: np.ndarray, coeffs, num_vars: int,
                chunk: int = 1 << 22, *, indptr: np.ndarray | None = None, extra: tuple | None = None):
    """``sum_j M[j][i] L_j`` for every column ``i < num_vars`` (Montgomery Fr ``(8, num_vars)``, device).

    ``lag``: the Lagrange values ``(8, >= rows.max() + 1)`` (device, Montgomery); ``rows``/``cols``/``cids``: the
    nonzeros of ``M`` (host int arrays, any order; a column may repeat) -- or ``rows=None`` with ``indptr`` (the
    CSR row pointers of ``cols``), the rows then derived chunk by chunk (no row array of every nonzero: 4 B per
    nonzero of host memory at a full WindowPoSt partition's ~10^9 per matrix); ``extra``: more nonzeros
    ``(rows, cols, cids)`` taken after those (e.g. bellman's input rows, without copying the matrix to append
    them); ``coeffs``: :func:`scaled_coeffs` of the R1CS's coefficient table. The nonzeros go to the device
    ``chunk`` at a time (the last chunk padded with zero-coefficient entries), so one compiled program serves every
    chunk.
    """
    coeffs = jnp.asarray(coeffs)
    zero_id = coeffs.shape[1] - 1
    if (rows is None) == (indptr is None):
        raise ValueError("column_sums: give rows or indptr, not both")
    main = len(cols)
    ex_rows, ex_cols, ex_cids = (np.asarray(a) for a in extra) if extra is not None else (None, None, None)
    nnz = main + (len(ex_cols) if extra is not None else 0)
    chunk = column_chunk(nnz, chunk)
    step = _column_sums_chunk(jax.default_backend())

    def piece(a: int, b: int):  # nonzeros [a, b) of the main arrays
        if rows is not None:
            return rows[a:b], cols[a:b], cids[a:b]
        r0 = int(np.searchsorted(indptr, a, side="right")) - 1  # the rows holding nonzeros a and b - 1
        r1 = int(np.searchsorted(indptr, b - 1, side="right")) - 1
        counts = np.diff(np.clip(np.asarray(indptr[r0:r1 + 2], np.int64), a, b))
        return np.repeat(np.arange(r0, r1 + 1, dtype=np.int32), counts), cols[a:b], cids[a:b]

    with jax.enable_x64(True):
        acc = jnp.zeros((8, num_vars), jnp.uint64)
        for s in range(0, max(nnz, 1), chunk):
            r_ = np.zeros(chunk, np.int32)
            c_ = np.zeros(chunk, np.int32)
            k_ = np.full(chunk, zero_id, np.int32)
            e = min(main, s + chunk) - s
            if e > 0:
                r_[:e], c_[:e], k_[:e] = piece(s, s + e)
            x0, x1 = max(s, main) - main, min(nnz, s + chunk) - main  # the extra nonzeros in this chunk
            if x1 > x0:
                at = max(e, 0)
                r_[at:at + x1 - x0], c_[at:at + x1 - x0], k_[at:at + x1 - x0] = (
                    ex_rows[x0:x1], ex_cols[x0:x1], ex_cids[x0:x1])
            acc = step(acc, lag, r_, c_, k_, coeffs)
        return _finish_sums(acc)


@functools.partial(jax.jit, static_argnames=("width", "num_inputs"))
def _query_scalars_chunk(u, v, w, start, alpha, beta, ginv, dinv, width: int, num_inputs: int):
    """Columns ``[start, start + width)`` of :func:`query_scalars`'s ``(a, b, lin / gamma-or-delta)`` (canonical)."""
    with jax.enable_x64(True):
        u, v, w = (jax.lax.dynamic_slice_in_dim(x, start, width, axis=1) for x in (u, v, w))
        bu, av = fr.mul_many([(u, jnp.broadcast_to(beta, u.shape)), (v, jnp.broadcast_to(alpha, v.shape))])
        lin = fr.add(fr.add(bu, av), w)
        factor = jnp.where((start + jnp.arange(width) < num_inputs)[None], ginv, dinv)
        lq, = fr.mul_many([(lin, factor)])
        return tuple(fr.from_mont(x) for x in (u, v, lq))


def query_scalars(u, v, w, alpha, beta, ginv, dinv, num_inputs: int, chunk: int = 1 << 22):
    """From the column sums (Montgomery) to CANONICAL Fr limbs of the query scalars: ``(a, b, l, ic)`` with
    ``a = u``, ``b = v``, ``lin = beta u + alpha v + w``, ``l = lin[num_inputs:] / delta``,
    ``ic = lin[:num_inputs] / gamma`` (``alpha``, ``beta``, ``ginv``, ``dinv``: Montgomery ``(8, 1)``).

    ``chunk`` columns per call of one compiled program (the wide products of a whole 2^27-column key at once need
    more than an H200's memory); the last call's window is moved back to end at the last column (it recomputes
    a few columns instead of compiling a second shape).
    """
    n = int(u.shape[1])
    width = min(chunk, n)
    pieces = []
    for s in range(0, n, width):
        start = min(s, n - width)
        out = _query_scalars_chunk(u, v, w, jnp.int32(start), alpha, beta, ginv, dinv, width=width,
                                   num_inputs=num_inputs)
        pieces.append(tuple(x[:, s - start:] for x in out) if s != start else out)
    a, b, lq = (x[0] if len(x) == 1 else jnp.concatenate(x, axis=1) for x in zip(*pieces))
    return a, b, lq[:, num_inputs:], lq[:, :num_inputs]


@jax.jit
def from_mont(x):
    """Montgomery -> canonical Fr limbs (for the fixed-base multiplication)."""
    with jax.enable_x64(True):
        return fr.from_mont(x)


def compile_jobs(lag_tables: tuple, h_tables: tuple, *, chunk: int, lag_width: int, nnz, num_coeffs: int,
                 num_vars: int, num_inputs: int, lag_chunk: int | None = None) -> dict:
    """The scalar programs of a device setup as thunks that compile them without running them (ahead-of-time
    lowering on abstract shapes; a later call with the same shapes finds its program compiled), by name:
    ``lagrange``, ``column_sums`` (one per distinct :func:`column_chunk` of the matrices' ``nnz``), ``finish_sums``,
    ``query``, ``h_powers``, ``from_mont``. Why: the programs are small but each is a compile of its own, one
    after the other at first use; a setup on an accelerator runs these thunks in threads (compiling releases the
    GIL) while it works (:func:`cuzk_jax.groth16.generator.development_setup`).

    ``lag_tables``: ``(lo, hi, a, tau, k)`` of :func:`lagrange`; ``h_tables``: ``(lo, hi, a)`` of :func:`powers`
    (the arrays themselves: small), or None for a Lagrange H query (its scalars come from the ``lagrange``
    program on tables of the same shapes, and ``from_mont`` is compiled for its chunk); ``chunk``: elements per call
    of those programs (``lag_chunk``: of :func:`lagrange`, default ``chunk``); ``lag_width``: the columns of the
    Lagrange array the column sums read; ``nnz``: each matrix's nonzeros (its extra rows included);
    ``num_coeffs``: the rows of :func:`scaled_coeffs` (with its zero entry). Each thunk must run with x64 off in
    its thread (the setup's calls are made so; ``column_sums`` and ``finish_sums`` switch it on as their calls
    do)."""
    lo, hi, a, tau, k = lag_tables
    spec = jax.ShapeDtypeStruct

    def wide(fn):  # the column-sum programs are called with x64 on (their uint64 accumulator)
        def run():
            with jax.enable_x64(True):
                fn()
        return run

    def sums_step(size: int):
        return wide(lambda: _column_sums_chunk(jax.default_backend()).lower(
            spec((8, num_vars), jnp.uint64), spec((8, lag_width), jnp.uint32), spec((size,), jnp.int32),
            spec((size,), jnp.int32), spec((size,), jnp.int32), spec((8, num_coeffs), jnp.uint32)).compile())

    def query():
        with jax.enable_x64(True):
            u = jax.eval_shape(_finish_sums, spec((8, num_vars), jnp.uint64))
        c = spec((8, 1), jnp.uint32)
        _query_scalars_chunk.lower(u, u, u, jnp.int32(0), c, c, c, c, width=min(chunk, num_vars),
                                   num_inputs=num_inputs).compile()

    jobs = {"lagrange": lambda: lagrange.lower(lo, hi, 0, tau, k, chunk=lag_chunk or chunk, a=a).compile()}
    for size in sorted({column_chunk(int(x)) for x in nnz}):
        jobs[f"column_sums_{size}"] = sums_step(size)
    jobs["finish_sums"] = wide(lambda: _finish_sums.lower(spec((8, num_vars), jnp.uint64)).compile())
    jobs["query"] = query
    if h_tables is not None:
        hlo, hhi, ha = h_tables
        jobs["h_powers"] = lambda: powers.lower(hlo, hhi, 0, chunk=chunk, a=ha).compile()
    width = chunk if h_tables is not None else lag_chunk or chunk
    jobs["from_mont"] = lambda: from_mont.lower(spec((8, width), jnp.uint32)).compile()
    return jobs

