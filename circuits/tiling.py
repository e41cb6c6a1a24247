"""An R1CS made of a header and ``count`` identical blocks, built from ONE synthesized block (its wires shifted).

Circuits such as FallbackPoSt (one block per sector), EmptySectorUpdate and PoRep (one block per challenge) repeat
the same gates per block; only the wires differ. Synthesizing the header and block 0 with the builder and tiling
block 0's CSR rows ``count`` times -- each entry's column moved by the block's stride when it refers to a block wire,
kept when it refers to ONE or a header wire -- gives the builder's R1CS exactly (same digest, same constraint and
input names, tested), for the Python cost of one block.

Layout (the builder's, since blocks allocate in order): ``z = [1, header inputs, block_0 inputs, ...,
block_{count-1} inputs, header aux, block_0 aux, ...]``; constraint rows: the header's, then block by block.
Requirements (checked): every block-0 namespace is ``<prefix>_0`` or below it, and no header row refers to a block
wire.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from .cs import ConstraintSystem
from .r1cs import R1CS, SparseMatrix


@dataclasses.dataclass(frozen=True)
class Tiling:
    """How an R1CS is a header and ``count`` identical blocks: constraint rows (``m_h`` header rows, then ``m_b``
    per block; bellman's input constraints, when appended, follow) and wires (``ni_h`` header inputs, ONE
    included, and ``ni_b`` per block; ``na_h`` header aux and ``na_b`` per block), in the layout of the module
    docstring."""

    m_h: int
    m_b: int
    count: int
    ni_h: int
    ni_b: int
    na_h: int
    na_b: int


def block_tiling(header: Callable, block: Callable, count: int, prefix: str) -> Tiling:
    """The :class:`Tiling` of :func:`tiled_r1cs`'s R1CS from the header and block 0 alone (structure mode: sizes
    only, no matrices kept) -- for an R1CS loaded from a compiled file."""
    cs = ConstraintSystem("structure")
    # a counting run: the gadgets count their constraints without recording them (as in witness mode), ~7x faster
    # than recording one block (a 2^24 PoRep block: 2.4 s against 16.5 s) and no matrices held
    cs.keep = False
    shared = header(cs)
    ni_h, na_h, m_h = cs.num_inputs, cs.num_aux, cs.num_constraints
    with cs.namespace(f"{prefix}_0"):
        block(cs, shared)
    return Tiling(m_h=m_h, m_b=cs.num_constraints - m_h, count=count, ni_h=ni_h, ni_b=cs.num_inputs - ni_h,
                  na_h=na_h, na_b=cs.num_aux - na_h)


def tiled_r1cs(header: Callable, block: Callable, count: int, prefix: str) -> R1CS:
    """``header(cs) -> shared`` synthesizes the header; ``block(cs, shared)`` block 0 (called inside namespace
    ``<prefix>_0``); the result has ``count`` blocks named ``<prefix>_0 .. <prefix>_{count-1}``."""
    if count < 1:
        raise ValueError(f"tiled_r1cs: need at least one block, got {count}")
    first = f"{prefix}_0"
    cs = ConstraintSystem("structure")
    shared = header(cs)
    ni_h, na_h, m_h = cs.num_inputs, cs.num_aux, cs.num_constraints
    ns_h = len(cs.to_r1cs().namespaces)  # the header's namespaces (and the root)
    with cs.namespace(first):
        block(cs, shared)
    one = cs.to_r1cs()
    del cs
    ni1 = one.num_inputs
    ni_b, na_b = ni1 - ni_h, one.num_aux - na_h
    n_in = ni_h + count * ni_b
    block_ns = one.namespaces[ns_h:]
    if any(not (p == first or p.startswith(first + "/")) for p in block_ns):
        raise AssertionError(f"tiled_r1cs: a block namespace outside {first}")
    reps = np.arange(count, dtype=np.int64)[:, None]
    mats = []
    for mat in one.matrices():
        indptr = mat.indptr.astype(np.int64)
        cols1 = mat.cols.astype(np.int64)
        nnz_h = int(indptr[m_h])
        is_in = cols1 < ni1
        base = np.where(is_in, cols1, n_in + (cols1 - ni1))  # final columns in block 0
        step = np.where(is_in, np.where(cols1 >= ni_h, ni_b, 0), np.where(cols1 - ni1 >= na_h, na_b, 0))
        if step[:nnz_h].any():
            raise AssertionError("tiled_r1cs: a header row refers to a block wire")
        nb = len(cols1) - nnz_h
        cols = np.concatenate([base[:nnz_h], (base[None, nnz_h:] + reps * step[None, nnz_h:]).ravel()])
        cids = np.concatenate([mat.coeff_ids[:nnz_h], np.tile(mat.coeff_ids[nnz_h:], count)])
        rel = indptr[m_h + 1:] - nnz_h  # block 0's row ends, relative to its first entry
        ptr = np.concatenate([indptr[:m_h + 1], (nnz_h + reps * nb + rel[None, :]).ravel()])
        mats.append(SparseMatrix(indptr=ptr, cols=cols.astype(np.int32), coeff_ids=cids.astype(np.int32)))
    bns = one.row_namespace[m_h:].astype(np.int64)
    rns = np.concatenate([one.row_namespace[:m_h].astype(np.int64),
                          (bns[None, :] + np.where(bns >= ns_h, reps * len(block_ns), 0)).ravel()])
    rl = np.concatenate([one.row_label[:m_h], np.tile(one.row_label[m_h:], count)])
    namespaces = list(one.namespaces[:ns_h])
    names = list(one.input_names[:ni_h])
    for j in range(count):
        namespaces += [f"{prefix}_{j}" + p[len(first):] for p in block_ns]
        names += [f"{prefix}_{j}" + p[len(first):] if p.startswith(first) else p for p in one.input_names[ni_h:]]
    return R1CS(num_inputs=n_in, num_aux=na_h + count * na_b, A=mats[0], B=mats[1], C=mats[2], coeffs=one.coeffs,
                namespaces=tuple(namespaces), labels=one.labels, row_namespace=rns.astype(np.int32),
                row_label=rl.astype(np.int32), input_names=tuple(names),
                tiling=Tiling(m_h=m_h, m_b=one.num_constraints - m_h, count=count, ni_h=ni_h, ni_b=ni_b, na_h=na_h,
                              na_b=na_b))
