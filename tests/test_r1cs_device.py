"""ops.r1cs at scale: size buckets (nearby circuits share one compiled program, issue 22 item 2) and evaluation in
row chunks under a memory budget (issue 18 item 3).

Oracles: the Python-int reference (:mod:`cuzk_jax.reference.r1cs`), the host ``R1CS.check`` and the one-shot
device path. Programs are compiled for a few small shapes only (module fixtures share them).
"""

import dataclasses
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cuzk_jax import encoding
from cuzk_jax.circuits import ConstraintSystem, ONE, Unsatisfied, get_circuit, stack_z
from cuzk_jax.circuits.r1cs import Witness
from cuzk_jax.errors import BadInput, MemoryBudgetError
from cuzk_jax.ops import r1cs as O
from cuzk_jax.reference import r1cs as ref
from cuzk_jax.reference.constants import R


def _ints(x):
    return encoding.limbs_to_ints(np.asarray(x), "fr", montgomery=True)


def _system(seed, m, n_aux, n_inputs=3, partitions=2):
    """Random sparse rows (empty rows, duplicates, a long row, edge coefficients) and random z per partition."""
    rng = random.Random(seed)
    cs = ConstraintSystem("structure")
    ins = [cs.alloc_input(None) for _ in range(n_inputs)]
    aux = [cs.alloc(None) for _ in range(n_aux)]
    pool = [ONE] + ins + aux
    coeffs = [1, 2, R - 1, R - 2, (1 << 32) - 1] + [rng.randrange(R) for _ in range(3)]

    def terms(n):
        return [(rng.choice(pool).index, rng.choice(coeffs)) for _ in range(n)]

    for i in range(m):
        sizes = [40, 0, 9] if i == 3 else [rng.choice([0, 1, 2, 3]) for _ in range(3)]
        cs.enforce_raw(terms(sizes[0]), terms(sizes[1]), terms(sizes[2]), f"row{i}")
    r1cs = cs.to_r1cs()
    ws = []
    for _ in range(partitions):
        z = [1] + [rng.choice([0, 1, R - 1, rng.randrange(R)]) for _ in range(r1cs.num_vars - 1)]
        ws.append(Witness(inputs=z[:r1cs.num_inputs], aux=z[r1cs.num_inputs:]))
    return r1cs, ws


def _want(r1cs, ws):
    mats = r1cs.reference_matrices()
    return [ref.evaluate(*mats, w.z) for w in ws]


def _assert_chunk_layout(dr, cr):
    """Chunk ``j``'s local row ``k Rc + r`` holds exactly the nonzeros of ``dr``'s stacked row ``k M + j Rc + r`` in
    order (none past ``M``), as CSR ranges of ``cr.indptr`` -- the chunks hold no per-nonzero row ids -- and the
    chunk's padding closes its last local row (column 0, a zero coefficient)."""
    M, rc = dr.padded_constraints, cr.rows_per_chunk
    sp, sc, si = (np.asarray(x) for x in (dr.indptr, dr.cols, dr.coeff_ids))
    ptr, cols, cids, table = (np.asarray(x) for x in (cr.indptr, cr.cols, cr.coeff_ids, cr.coeffs))
    assert not hasattr(cr, "rows") and ptr.shape == (cr.num_chunks, 3 * rc + 1)
    for j in range(cr.num_chunks):
        assert ptr[j, 0] == 0 and ptr[j, -1] == cols.shape[1] and (np.diff(ptr[j]) >= 0).all()
        for i in range(3 * rc):
            k, r = divmod(i, rc)
            g = j * rc + r
            s0, s1 = (int(sp[k * M + g]), int(sp[k * M + g + 1])) if g < M else (0, 0)
            a, b, cnt = int(ptr[j, i]), int(ptr[j, i + 1]), s1 - s0
            assert b - a == cnt or (i == 3 * rc - 1 and b - a > cnt), (j, i)
            assert cols[j, a:a + cnt].tolist() == sc[s0:s1].tolist()
            assert cids[j, a:a + cnt].tolist() == si[s0:s1].tolist()
            pad = slice(a + cnt, b)
            assert not cols[j, pad].any() and not table[:, cids[j, pad]].any()


def _assert_evals(got, want, m):
    """``got`` = (az, bz, cz) of shape (8, P, M >= m): rows [0, m) equal the reference, rows [m, M) are zero."""
    for k in range(3):
        x = np.asarray(got[k])
        assert not x[..., m:].any()
        for p, w in enumerate(want):
            assert _ints(x[:, p, :m]) == list(w[k]), (k, p)


# ---------------------------------------------------------------------------------------------------------------
# Buckets
# ---------------------------------------------------------------------------------------------------------------


def test_bucket_bounds():
    assert [O.bucket(n, 1) for n in (0, 1, 2, 3, 5, 64, 65)] == [0, 1, 2, 4, 8, 64, 128]
    assert [O.bucket(n, 4) for n in (7, 8, 9, 61, 64, 65, 81)] == [7, 8, 10, 64, 64, 80, 96]
    prev = 0
    for n in range(1, 5000):
        for s in (1, 2, 4, 8):
            b = O.bucket(n, s)
            assert n <= b <= 1 << (n - 1).bit_length() and b < n * (1 + 1 / s) + 1
        b = O.bucket(n)
        assert b >= prev and O.bucket(b) == b  # monotone; buckets are fixed points
        prev = b
    for bad in (-1, 2.0, "3", True):
        with pytest.raises(BadInput):
            O.bucket(bad)
    with pytest.raises(BadInput, match="power of two"):
        O.bucket(10, 3)


@pytest.fixture(scope="module")
def nearby():
    """Two circuits of different sizes in the same buckets (steps 4): 58 / 61 constraints, 44 / 47 variables."""
    a = _system(1, 58, 40)
    b = _system(2, 61, 43)
    return [(r1cs, ws, O.to_device(r1cs, bucket_steps=4)) for r1cs, ws in (a, b)]


@pytest.mark.parametrize("m,mp,pad,empty", [(7, 7, 0, 0.0), (7, 7, 5, 0.3), (5, 8, 3, 0.5), (6, 16, 0, 1.0),
                                              (1, 1, 2, 0.0)])
def test_stacked_row_pointers_equal_the_search(m, mp, pad, empty):
    """The row pointers built from the matrices' CSR pointers equal ``searchsorted`` over the stacked row ids, with
    empty rows (some or all), bucket-padded rows (``mp > m``) and padding nonzeros in the last stacked row -- also
    when that row is a real row of C (``m == mp``)."""
    from cuzk_jax.circuits.r1cs import SparseMatrix

    rng = np.random.default_rng(m * 100 + mp + pad)
    mats = []
    for _ in range(3):
        lengths = np.where(rng.random(m) < empty, 0, rng.integers(1, 4, m))
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        mats.append(SparseMatrix(indptr=indptr, cols=np.zeros(indptr[-1], np.int32),
                                 coeff_ids=np.zeros(indptr[-1], np.int32)))
    nnz = sum(mat.nnz for mat in mats)
    rows = np.concatenate([mat.row_ids() + k * mp for k, mat in enumerate(mats)] + [np.full(pad, 3 * mp - 1)])
    want = np.searchsorted(rows, np.arange(3 * mp + 1), side="left")
    got = O._stacked_row_pointers(mats, mp, nnz + pad)
    assert got.dtype == np.int32 and got.tolist() == want.tolist()


def test_bucketed_layout(nearby):
    (ra, _, da), (rb, _, db) = nearby
    assert (ra.num_constraints, rb.num_constraints) == (58, 61) and ra.num_vars != rb.num_vars
    for r1cs, dr in ((ra, da), (rb, db)):
        assert dr.num_constraints == r1cs.num_constraints and dr.padded_constraints == 64
        nnzp = O.bucket(dr.nnz, 4)
        assert dr.nnz == sum(r1cs.nnz) and dr.cols.shape == dr.coeff_ids.shape == (nnzp,) and nnzp > dr.nnz
        assert (dr.num_vars, dr.z_width) == (r1cs.num_vars, 48)
        # no per-nonzero row ids on the device: the CSR row pointers are the rows (8 B per nonzero in all)
        assert "rows" not in dr._fields
        ptr = np.asarray(dr.indptr)
        assert ptr.shape == (3 * 64 + 1,) and ptr[0] == 0 and ptr[-1] == nnzp and (np.diff(ptr) >= 0).all()
        assert sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(dr)) == \
            8 * nnzp + 4 * (3 * 64 + 1) + np.asarray(dr.coeffs).nbytes + np.asarray(dr.sizes).nbytes
        rows = np.repeat(np.arange(3 * 64), np.diff(ptr))  # each nonzero's stacked row, from the pointers
        mats = r1cs.matrices()
        assert rows[:dr.nnz].tolist() == np.concatenate([m.row_ids() + k * 64 for k, m in enumerate(mats)]).tolist()
        assert np.asarray(dr.cols)[:dr.nnz].tolist() == np.concatenate([m.cols for m in mats]).tolist()
        assert np.asarray(dr.coeff_ids)[:dr.nnz].tolist() == np.concatenate([m.coeff_ids for m in mats]).tolist()
        pad = slice(dr.nnz, None)  # the padding: last stacked row, column 0, a zero coefficient
        assert (rows[pad] == 3 * 64 - 1).all() and not np.asarray(dr.cols)[pad].any()
        assert not np.asarray(dr.coeffs)[:, np.asarray(dr.coeff_ids)[pad]].any()
    # every array of the two has the same shape and dtype: one compiled program serves both
    shapes = [jax.tree_util.tree_map(lambda x: (np.shape(x), np.asarray(x).dtype), d) for d in (da, db)]
    assert shapes[0] == shapes[1]


def test_nearby_sizes_share_one_program(nearby):
    counts = []
    for r1cs, ws, dr in nearby:
        z = O.pad_z(dr, stack_z(ws))
        assert z.shape == (8, 2, 48) and not z[..., r1cs.num_vars:].any()
        _assert_evals(O.evaluate(dr, jnp.asarray(z)), _want(r1cs, ws), r1cs.num_constraints)
        ok, first = O.check(dr, jnp.asarray(z))
        for p, w in enumerate(ws):
            i = ref.first_unsatisfied(*r1cs.reference_matrices(), w.z)
            assert int(np.asarray(first)[p]) == (-1 if i is None else i)
        counts.append((O.evaluate_program._cache_size(), O.check_program._cache_size()))
    assert counts[1] == counts[0]  # the second size compiled nothing: it ran the first one's programs
    # the host helper truncates to the real rows
    r1cs, ws, dr = nearby[1]
    assert O.evaluate_host(r1cs, ws[0].z_limbs(), dr=dr) == _want(r1cs, ws[:1])[0]


def test_pad_z_and_width_checks(nearby):
    r1cs, ws, dr = nearby[0]
    z = stack_z(ws)
    assert isinstance(O.pad_z(dr, z), np.ndarray) and O.pad_z(dr, O.pad_z(dr, z)).shape == (8, 2, 48)
    assert isinstance(O.pad_z(dr, jnp.asarray(z)), jax.Array)
    with pytest.raises(BadInput, match="z width 48"):
        O.pad_z(dr, np.zeros((8, 2, 49), np.uint32))
    with pytest.raises(BadInput, match="variables"):
        O.evaluate(dr, jnp.zeros((8, 2, r1cs.num_vars - 1), jnp.uint32))


def test_satisfied_bucketed_names_the_same_constraint():
    """A real circuit, bucketed: satisfied partitions pass; a tampered one is named as the host names it."""
    circuit = get_circuit("cube")
    r1cs = circuit.r1cs()
    w = circuit.witness(circuit.sample_inputs())
    dr = O.to_device(r1cs, bucket_steps=1)
    O.assert_satisfied(r1cs, stack_z([w, w]), dr)
    bad = w.with_value(r1cs.num_vars - 1, w.z[-1] + 1)
    with pytest.raises(Unsatisfied) as want:
        r1cs.check(bad)
    with pytest.raises(Unsatisfied) as got:
        O.assert_satisfied(r1cs, stack_z([w, bad]), dr)
    assert (got.value.index, got.value.partition) == (want.value.index, 1)


# ---------------------------------------------------------------------------------------------------------------
# Row chunks
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def porep():
    """porep_like/mini (2866 constraints, ~80k nonzeros): partition 0 satisfied, partition 1 tampered so that its
    first failing constraint lies far into the circuit (a later chunk)."""
    circuit = get_circuit("porep_like", "mini")
    r1cs = circuit.r1cs()
    w0, w1 = (circuit.witness(circuit.sample_inputs(p, 0)) for p in range(2))
    mats = r1cs.reference_matrices()
    bad = None
    for col in range(r1cs.num_vars - 1, r1cs.num_inputs, -7):  # a late variable: first used by a late constraint
        cand = w1.with_value(col, w1.z[col] + 1)
        i = ref.first_unsatisfied(*mats, cand.z)
        if i is not None and i > r1cs.num_constraints // 2:
            bad = cand
            break
    assert bad is not None
    dr = O.to_device(r1cs)
    z = jnp.asarray(stack_z([w0, bad]))
    one_shot = O.evaluate(dr, z) + O.check(dr, z)
    return r1cs, [w0, bad], dr, z, one_shot


def _same(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_chunked_equals_one_shot_and_host(porep):
    r1cs, ws, dr, z, one_shot = porep
    with pytest.raises(Unsatisfied) as want:
        r1cs.check(ws[1])
    first = want.value.index
    assert int(np.asarray(one_shot[4])[1]) == first and first > 1000
    cr = O.chunk_rows(dr, 256)
    assert cr.rows_per_chunk == 256 and cr.num_chunks == -(-r1cs.num_constraints // 256)
    _assert_chunk_layout(dr, cr)
    assert first // 256 > 0  # the failure is in a later chunk
    got = O.evaluate_chunked(cr, z, num_rows=r1cs.num_constraints)
    _same(got, one_shot)
    assert np.asarray(got[3]).tolist() == [True, False]
    # exact values against the Python-int reference
    _assert_evals(got[:3], _want(r1cs, ws), r1cs.num_constraints)
    # the same from a DeviceR1CS with a row count that does not divide m
    _same(O.evaluate_chunked(dr, z, rows_per_chunk=1000), one_shot)
    # the report names the partition, the constraint and its gadget as the host does
    with pytest.raises(Unsatisfied) as got:
        O.assert_satisfied(r1cs, np.asarray(z), dr, rows_per_chunk=256)
    assert (got.value.index, got.value.name, got.value.partition) == (first, want.value.name, 1)


def test_chunked_reference_values_and_bucketed(nearby):
    """Exact values against the Python-int reference, on a bucketed R1CS, chunks of 7 rows (the last one partial
    and reaching into the padded rows)."""
    r1cs, ws, dr = nearby[1]
    z = jnp.asarray(O.pad_z(dr, stack_z(ws)))
    cr = O.chunk_rows(dr, 7)
    az, bz, cz, ok, first = O.evaluate_chunked(cr, z)  # without num_rows: C * Rc = 70 rows, those past m zero
    assert az.shape == (8, 2, 70) and cr.num_chunks == 10
    # layout: each chunk's local CSR ranges are the source's rows (the prefix sum is differenced at indptr), the
    # rows past M empty, the padding (the source's and the chunk's own) adding zero
    _assert_chunk_layout(dr, cr)
    _assert_evals((az, bz, cz), _want(r1cs, ws), r1cs.num_constraints)
    ok1, first1 = O.check(dr, z)
    _same((ok, first), (ok1, first1))


def test_device_bytes_bound_xla(porep):
    """The estimate is an upper bound of XLA's own buffer assignment (temporaries + outputs), and not loose by
    more than 2x, one-shot and chunked."""
    r1cs, _, dr, z, _ = porep
    with jax.enable_x64(True):
        for rc in (None, 512):
            if rc is None:
                compiled = O.check_program.lower(dr, z).compile()
                out3 = 3 * 32 * z.shape[1] * dr.padded_constraints  # check_program returns only ok/first
                used = compiled.memory_analysis().temp_size_in_bytes + out3
            else:
                cr = O.chunk_rows(dr, rc)
                compiled = O.chunked_program.lower(cr, z, dr.padded_constraints).compile()
                ma = compiled.memory_analysis()
                used = ma.temp_size_in_bytes + ma.output_size_in_bytes
            est = O.evaluate_device_bytes(dr, z.shape[1], rc)
            assert used <= est <= 2 * used, (rc, used, est)
    # a ChunkedR1CS is estimated with its default output rows, C * Rc: the loop's buffers are the outputs, where
    # cutting them to dr's m rows costs a copy of the outputs
    cr = O.chunk_rows(dr, 512)
    assert cr.num_chunks * 512 != dr.padded_constraints
    outputs = 3 * 32 * 2 * dr.padded_constraints
    assert O.evaluate_device_bytes(cr, 2) == O.evaluate_device_bytes(dr, 2, 512) - outputs


def test_budget_picks_rows(porep):
    _, _, dr, z, one_shot = porep
    P = 2
    whole = O.evaluate_device_bytes(dr, P)
    assert O.rows_per_chunk_for(dr, P, whole) is None
    budget = whole // 3
    rc = O.rows_per_chunk_for(dr, P, budget)
    assert rc and rc & (rc - 1) == 0
    assert O.evaluate_device_bytes(dr, P, rc) <= budget < O.evaluate_device_bytes(dr, P, 2 * rc)
    assert O.evaluate_device_bytes(dr, P, rc) < whole
    with pytest.raises(MemoryBudgetError, match="even one row"):
        O.rows_per_chunk_for(dr, P, 1000)
    _same(O.evaluate_chunked(dr, z, budget_bytes=O.evaluate_device_bytes(dr, P, 256)), one_shot)


def test_chunked_errors(nearby):
    _, ws, dr = nearby[0]
    z = jnp.asarray(O.pad_z(dr, stack_z(ws)))
    with pytest.raises(BadInput, match="exactly one"):
        O.evaluate_chunked(dr, z)
    with pytest.raises(BadInput, match="exactly one"):
        O.evaluate_chunked(dr, z, budget_bytes=1 << 30, rows_per_chunk=8)
    with pytest.raises(BadInput, match="rows_per_chunk"):
        O.evaluate_chunked(dr, z, rows_per_chunk=0)
    cr = O.chunk_rows(dr, 16)
    with pytest.raises(BadInput, match="chunk size already"):
        O.evaluate_chunked(cr, z, rows_per_chunk=8)
    with pytest.raises(BadInput, match="num_rows"):
        O.evaluate_chunked(cr, z, num_rows=65)
    with pytest.raises(BadInput, match="uint32"):
        O.evaluate_chunked(cr, z.astype(jnp.int32))
    with pytest.raises(BadInput, match="batch"):
        O.evaluate_device_bytes(dr, 0)


def test_too_dense_for_int32_is_one_clear_error_before_setup():
    """A full WindowPoSt partition's size (100.2M constraints, 2.94G nonzeros: Poseidon's MDS rows make ~29 per
    constraint) cannot be laid out with int32 indices: check_indexable says so, and both setups refuse the circuit
    before any work (no matrices are read beyond their sizes)."""
    import types

    from cuzk_jax.groth16 import generator
    from cuzk_jax.ops import r1cs as ops_r1cs

    def fake(nnz_each):
        mats = [types.SimpleNamespace(nnz=n) for n in nnz_each]
        return types.SimpleNamespace(num_constraints=100_236_529, num_inputs=25_840, matrices=lambda: mats)

    dense = fake([980_000_000, 1_860_000_000, 96_874_835])
    with pytest.raises(BadInput, match=r"int32 indexing: 2936\d+ nonzeros \(29\.\d per constraint\)"):
        ops_r1cs.check_indexable(dense)
    for method in ("host", "device"):
        with pytest.raises(BadInput, match="int32 indexing"):
            generator.setup(dense, method=method)
    ops_r1cs.check_indexable(fake([300_000_000, 300_000_000, 100_000_000]))  # a SnapDeals-sized partition fits


@pytest.mark.parametrize("name,over", [("window_post", {"sectors": 7}), ("snap_update", {})])
def test_tiled_evaluation_equals_the_flat_one(name, over):
    """ops.r1cs.tile / evaluate_tiled on a header-and-blocks R1CS (with bellman's input rows): the same A z, B z,
    C z as the flat layout for groups of one block, of several (a shorter last group) and of all blocks, and the
    same first failing constraint for a bad witness (in a block past the first group)."""
    from cuzk_jax.circuits import block_witness

    c = get_circuit(name, "tiny", **over)
    r1cs = c.r1cs()
    ext = r1cs.with_input_constraints()
    assert ext.tiling is not None and ext.tiling.count == c.block_count
    z, _ = block_witness.witness_batch(c, 2, 1, montgomery=True, num_vars=r1cs.num_vars)
    bad = np.array(z)
    col = ext.num_inputs + ext.tiling.na_h + 5 * ext.tiling.na_b // 2 + 3 if name == "window_post" else \
        ext.num_inputs + ext.tiling.na_h + ext.tiling.na_b + 7  # an aux wire of block 2 / block 1
    bad[:, 1, col] ^= 1
    zz = jnp.asarray(np.stack([z[:, 0], bad[:, 1]], axis=1))
    flat = O.evaluate_chunked(O.to_device(ext), zz, rows_per_chunk=ext.num_constraints)
    assert bool(flat[3][0]) and not bool(flat[3][1])
    # exact values against the Python-int reference (the tiled results below must equal these bit for bit)
    mats = ext.reference_matrices()
    _assert_evals(flat[:3], [ref.evaluate(*mats, _ints(np.asarray(zz)[:, p])) for p in range(2)], ext.num_constraints)
    block_nnz = sum(int(m.indptr[ext.tiling.m_h + ext.tiling.m_b] - m.indptr[ext.tiling.m_h]) for m in ext.matrices())
    for step in (1, 3 * block_nnz, 10**9):
        tr = jax.tree_util.tree_map(jnp.asarray, O.tile(ext, ext.tiling, step_nnz=step))
        # the patterns hold no per-nonzero row ids: local CSR pointers, the padding closing the last local row
        ptr = np.asarray(tr.indptr)
        assert "rows" not in tr._fields and tr.cols.shape == tr.steps.shape == tr.coeff_ids.shape
        assert ptr.shape == (tr.cols.shape[0], 3 * tr.rows_per_chunk + 1) and (ptr[:, 0] == 0).all()
        assert (ptr[:, -1] == tr.cols.shape[1]).all() and (np.diff(ptr, axis=1) >= 0).all()
        got = O.evaluate_tiled(tr, zz, ext.num_constraints)
        for a, b in zip(got, flat):
            assert np.array_equal(np.asarray(a), np.asarray(b)), step
        # the input rows appended by tile itself (what make_resident does: no copy of the whole R1CS): identical
        own = O.tile(r1cs, r1cs.tiling, step_nnz=step, input_rows=True)
        for a, b in zip(jax.tree_util.tree_leaves(own), jax.tree_util.tree_leaves(O.tile(ext, ext.tiling,
                                                                                      step_nnz=step))):
            assert np.array_equal(np.asarray(a), np.asarray(b)), step
    for r, rows in ((ext, False), (r1cs, True)):
        with pytest.raises(BadInput, match="tiling does not fit"):
            O.tile(r, dataclasses.replace(r.tiling, count=r.tiling.count + 1), input_rows=rows)
    # the plan's estimate bounds XLA's buffer assignment of the tiled program (loop buffers of M + Rc rows, the
    # outputs cut from them), within 2x
    for step in (1, 10**9):
        tr = O.tile(ext, ext.tiling, step_nnz=step)
        with jax.enable_x64(True):
            ma = O.tiled_program.lower(tr, zz, ext.num_constraints).compile().memory_analysis()
        used = ma.temp_size_in_bytes + ma.output_size_in_bytes
        assert used <= O.evaluate_device_bytes(tr, 2) <= 2 * used, step
