"""Constraint-system builder, R1CS layout, the Python-int reference and the device evaluator (ops.r1cs).

Oracle: :mod:`cuzk_jax.reference.r1cs` (Python ints, checked here on a hand-written system first). Device programs
are compiled for a handful of shapes only (module-level fixtures share them).
"""

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cuzk_jax import encoding
from cuzk_jax.circuits import (ONE, ConstraintSystem, LinearCombination, SynthesisError, Unsatisfied, Variable,
                               get_circuit, stack_z)
from cuzk_jax.circuits.r1cs import Witness
from cuzk_jax.ops import r1cs as ops_r1cs
from cuzk_jax.ops.field import x64
from cuzk_jax.reference import r1cs as ref
from cuzk_jax.reference.constants import R

# ---------------------------------------------------------------------------------------------------------------
# Reference
# ---------------------------------------------------------------------------------------------------------------


def test_reference_hand_example():
    # z = [1, 35, 3, 9, 27]: x*x = x2, x2*x = x3, (x3 + x + 5)*1 = y
    a = ([0, 1, 2, 5], [2, 3, 4, 2, 0], [1, 1, 1, 1, 5])
    b = ([0, 1, 2, 3], [2, 2, 0], [1, 1, 1])
    c = ([0, 1, 2, 3], [3, 4, 1], [1, 1, 1])
    z = [1, 35, 3, 9, 27]
    assert ref.evaluate(a, b, c, z) == ([3, 9, 35], [3, 3, 1], [9, 27, 35])
    assert ref.is_satisfied(a, b, c, z)
    assert ref.first_unsatisfied(a, b, c, [1, 35, 3, 9, 28]) == 1
    assert ref.unsatisfied(a, b, c, [1, 37, 3, 9, 28]) == [1, 2]
    # duplicates add up, reduction is mod r
    assert ref.matvec(([0, 2], [1, 1], [R - 1, 2]), [1, 5]) == [5]


# ---------------------------------------------------------------------------------------------------------------
# Builder
# ---------------------------------------------------------------------------------------------------------------


def test_linear_combination_arithmetic():
    x, y = Variable(-1), Variable(1)
    lc = 3 * x + y - 2 + x
    assert lc.terms == {-1: 4, 1: 1, 0: R - 2}
    assert (lc - lc).terms == {}
    assert (-(x - y)).terms == {-1: R - 1, 1: 1}
    assert (5 - x).terms == {0: 5, -1: R - 1}
    assert LinearCombination.of(7).constant_value() == 7
    assert (x * 0).terms == {}
    with pytest.raises(SynthesisError):
        LinearCombination.of("x")
    with pytest.raises(SynthesisError):
        lc * x


def test_z_layout_interleaved_allocation():
    cs = ConstraintSystem("full")
    a = cs.alloc(10, "a")
    p1 = cs.alloc_input(20, "p1")
    b = cs.alloc(30, "b")
    p2 = cs.alloc_input(40, "p2")
    cs.enforce(a + p1, ONE, b, "a + p1 = b")
    cs.enforce([(p2, 1)], [(ONE, 1)], 4 * a, "p2 = 4a")
    r1cs, w = cs.to_r1cs(), cs.witness()
    assert (r1cs.num_inputs, r1cs.num_aux, r1cs.num_public) == (3, 2, 2)
    assert w.z == [1, 20, 40, 10, 30]  # [1, public..., private...]
    assert r1cs.A.cols.tolist() == [3, 1, 2] and r1cs.C.cols.tolist() == [4, 3]
    assert r1cs.input_names == ("ONE", "p1", "p2")
    r1cs.check(w)
    assert cs.value(a + p1) == 30


def test_namespaces_name_constraints():
    cs = ConstraintSystem("full")
    x = cs.alloc(2)
    with cs.namespace("outer"):
        with cs.namespace("inner"):
            cs.enforce(x, x, 5, "square")
        cs.enforce(x, 1, x, "id")
    cs.enforce(x, 1, x)
    r1cs = cs.to_r1cs()
    assert [r1cs.constraint_name(i) for i in range(3)] == ["outer/inner/square", "outer/id", "<unnamed>"]
    with pytest.raises(Unsatisfied, match=r"#0 'outer/inner/square'") as e:
        cs.check()
    assert e.value.index == 0


def test_modes_and_errors():
    with pytest.raises(ValueError, match="mode"):
        ConstraintSystem("fast")
    cs = ConstraintSystem("witness")
    with pytest.raises(SynthesisError, match="missing witness value"):
        cs.alloc(None, "x")
    with pytest.raises(SynthesisError, match="must be an int"):
        cs.alloc("3", "x")
    x = cs.alloc(lambda: -1)  # callables are evaluated, values reduced mod r
    assert cs.aux_values == [R - 1]
    cs.enforce(x, x, 1)
    assert cs.num_constraints == 1
    with pytest.raises(SynthesisError, match="witness"):
        cs.to_r1cs()
    s = ConstraintSystem("structure")
    s.alloc(lambda: 1 / 0)  # never evaluated in structure mode
    with pytest.raises(SynthesisError):
        s.witness()
    with pytest.raises(SynthesisError):
        s.enforce(Variable(-5), 1, 1)  # not allocated here


def test_structure_mode_matches_full_mode():
    circuit = get_circuit("porep_like", "mini")
    inputs = circuit.sample_inputs(0, 0)
    full, w = circuit.full(inputs)
    assert circuit.r1cs().digest() == full.digest()
    assert circuit.witness(inputs).z == w.z


def test_witness_limbs():
    vals = [0, 1, 2, R - 1, R - 2, 1, 0, (1 << 254) + 3]
    w = Witness(inputs=[1, 5], aux=vals)
    for mont in (True, False):
        assert np.array_equal(w.z_limbs(mont), encoding.ints_to_limbs(w.z, "fr", montgomery=mont))
    assert encoding.limbs_to_ints(w.z_limbs(), "fr", montgomery=True) == w.z
    for bad in (-1, R, "3", 0.5, None, 1 << 256, [1]):
        with pytest.raises(ValueError, match=r"\[0, r\)"):
            Witness(inputs=[1], aux=[0, bad, 1]).z_limbs()
    # stack_z writes each partition in place: equal to stacking the single conversions
    w2 = Witness(inputs=[1, 7], aux=vals[::-1])
    want = np.stack([w.z_limbs(), w2.z_limbs()], axis=1)
    assert np.array_equal(stack_z([w, w2]), want)
    out = np.zeros((8, 2, w.num_vars), np.uint32)
    w2.z_limbs(out=out[:, 1])
    assert np.array_equal(out[:, 1], want[:, 1]) and not out[:, 0].any()
    with pytest.raises(ValueError, match="out must be"):
        w.z_limbs(out=np.zeros((8, 3), np.uint32))


def _host_mont(vals):
    """The host's Montgomery limbs, value by value (the conversion the prover used to stage with)."""
    return encoding.ints_to_limbs([v * encoding.fr.mont_r % R for v in vals], "fr")


EDGES = [0, 1, R - 1, 2]


@pytest.mark.parametrize("bits", [0.0, 0.05, 0.9], ids=["dense", "poseidon_like", "bit_heavy"])
def test_canonical_limbs_then_device_to_mont_equal_host_montgomery(bits):
    """Both z_limbs paths (whole list when most values are not 0/1, the 0/1 split otherwise) give the host's
    limbs in either form, and canonical limbs + the device's to_mont (what stage does for Python-int witnesses)
    equal the host's Montgomery limbs bit for bit -- random values and the edges 0, 1, r - 1, 2."""
    from cuzk_jax.circuits.r1cs import stack_z_native
    from cuzk_jax.ops import field as ops_field

    rng = random.Random(24)
    vals = [rng.randrange(2) if rng.random() < bits else rng.randrange(R) for _ in range(300)] + EDGES
    w = Witness(inputs=[1, R - 1], aux=vals)
    canon, mont = w.z_limbs(montgomery=False), w.z_limbs()
    assert np.array_equal(canon, encoding.ints_to_limbs(w.z, "fr"))
    assert np.array_equal(mont, _host_mont(w.z))
    device = np.asarray(jax.jit(ops_field.fr.to_mont)(jnp.asarray(canon)))
    assert np.array_equal(device, mont)
    w2 = Witness(inputs=[1, 0], aux=vals[::-1])
    z, is_mont = stack_z_native([w, w2])
    assert is_mont is False and np.array_equal(z, stack_z([w, w2], montgomery=False))
    assert np.array_equal(np.asarray(jax.jit(ops_field.fr.to_mont)(jnp.asarray(z))), stack_z([w, w2]))


@pytest.mark.parametrize("bits", [0.0, 0.9], ids=["dense", "bit_heavy"])
@pytest.mark.parametrize("bad", [-1, R, R + 5, 1 << 256, "3", 0.5, None, [1], 2.0])
def test_out_of_range_witness_values_same_error_on_both_paths(bits, bad):
    """A bad value gives the same clear error whichever path converts the witness, in either form; bools and
    float zeros/ones are still taken as 0/1 by value (as the 0/1 split always did)."""
    rng = random.Random(7)
    vals = [rng.randrange(2) if rng.random() < bits else rng.randrange(1, R) for _ in range(64)]
    for mont in (True, False):
        with pytest.raises(ValueError, match=r"witness values must be ints in \[0, r\)"):
            Witness(inputs=[1], aux=vals[:10] + [bad] + vals[10:]).z_limbs(mont)
        w = Witness(inputs=[1], aux=vals + [True, False, 1.0, 0.0])
        assert np.array_equal(w.z_limbs(mont), Witness(inputs=[1], aux=vals + [1, 0, 1, 0]).z_limbs(mont))


def test_stack_z_native_keeps_packed_montgomery_limbs(monkeypatch):
    """Montgomery PackedWitness batches (porep_like) are copied as they are (no Python-int conversion); a
    canonical packed batch stays canonical; a batch mixing packed Montgomery limbs with Python ints is canonical."""
    from cuzk_jax.circuits.r1cs import PackedWitness, stack_z_native

    rng = random.Random(3)
    ws = [Witness(inputs=[1, 9], aux=[rng.randrange(R) for _ in range(20)] + EDGES) for _ in range(2)]
    packed = [PackedWitness(w.z_limbs(), 2) for w in ws]
    want = stack_z(ws)
    with monkeypatch.context() as m:
        m.setattr(encoding, "ints_to_limbs", None)  # any int conversion would fail
        z, mont = stack_z_native(packed)
    assert mont is True and np.array_equal(z, want)
    canon = [PackedWitness(w.z_limbs(False), 2, montgomery=False) for w in ws]
    z, mont = stack_z_native(canon)
    assert mont is False and np.array_equal(z, stack_z(ws, montgomery=False))
    z, mont = stack_z_native([packed[0], ws[1]])
    assert mont is False and np.array_equal(z, stack_z(ws, montgomery=False))


def test_with_input_constraints():
    circuit = get_circuit("cube")
    r1cs, w = circuit.full(circuit.sample_inputs())
    ext = r1cs.with_input_constraints()
    assert ext.num_constraints == r1cs.num_constraints + r1cs.num_inputs
    assert ext.A.cols.tolist()[-2:] == [0, 1] and ext.B.nnz == r1cs.B.nnz
    ext.check(w)
    assert ext.constraint_name(ext.num_constraints - 1) == "input_constraints/input"
    # with_input_rows(r0): the extended matrices' rows from r0 on, re-based (what tile and the device setup append
    # without copying the rest); extended_constraint_name names ext's rows without building it
    m = r1cs.num_constraints
    for r0 in (0, m // 2, m):
        for tail, full in zip(r1cs.with_input_rows(r0), ext.matrices()):
            s0 = int(full.indptr[r0])
            assert np.array_equal(tail.indptr, full.indptr[r0:] - s0)
            assert np.array_equal(tail.cols, full.cols[s0:]) and np.array_equal(tail.coeff_ids, full.coeff_ids[s0:])
    assert [r1cs.extended_constraint_name(i) for i in range(ext.num_constraints)] == \
        [ext.constraint_name(i) for i in range(ext.num_constraints)]
    with pytest.raises(ValueError, match="out of range"):
        r1cs.extended_constraint_name(ext.num_constraints)


# ---------------------------------------------------------------------------------------------------------------
# Device evaluator
# ---------------------------------------------------------------------------------------------------------------

EDGE = [0, 1, 2, R - 1, R - 2, (1 << 255) % R, (1 << 32) - 1, 1 << 32]


def _random_system(seed=7, n_inputs=4, n_aux=40, m=60):
    """Random sparse rows (duplicates, empty rows, long rows, edge coefficients) and random/edge z."""
    rng = random.Random(seed)
    cs = ConstraintSystem("structure")
    ins = [cs.alloc_input(None) for _ in range(n_inputs)]
    aux = [cs.alloc(None) for _ in range(n_aux)]
    pool = [ONE] + ins + aux
    coeff_pool = EDGE[1:] + [rng.randrange(R) for _ in range(6)]

    def terms(n):
        return [(rng.choice(pool).index, rng.choice(coeff_pool)) for _ in range(n)]

    for i in range(m):
        sizes = [rng.choice([0, 1, 1, 2, 3, 5]) for _ in range(3)]
        if i == 5:
            sizes = [200, 0, 70]  # long rows exercise the wide (unreduced) accumulation
        cs.enforce_raw(terms(sizes[0]), terms(sizes[1]), terms(sizes[2]), f"row{i}")
    # a row of 300 products equal to r - 1 (the largest sum a row can build)
    cs.enforce_raw([(aux[0].index, 1)] * 300, [(ONE.index, R - 1)] * 3, [], "max")
    r1cs = cs.to_r1cs()
    zs = []
    for p in range(3):
        vals = [rng.choice(EDGE + [rng.randrange(R)]) for _ in range(r1cs.num_vars - 1)]
        vals[n_inputs] = R - 1  # aux[0]
        z = [1] + vals
        zs.append(Witness(inputs=z[:r1cs.num_inputs], aux=z[r1cs.num_inputs:]))
    return r1cs, zs


@pytest.fixture(scope="module")
def system():
    r1cs, zs = _random_system()
    return r1cs, zs, ops_r1cs.to_device(r1cs)


def _ints(x):
    return encoding.limbs_to_ints(np.asarray(x), "fr", montgomery=True)


def test_device_layout(system):
    r1cs, _, dr = system
    m = r1cs.num_constraints
    assert dr.num_constraints == m and dr.nnz == sum(r1cs.nnz) == dr.cols.shape[0] == dr.coeff_ids.shape[0]
    # CSR of the stacked matrix, no per-nonzero row ids: each nonzero's row follows from the pointers
    assert "rows" not in dr._fields
    ptr = np.asarray(dr.indptr)
    assert ptr.shape == (3 * m + 1,) and ptr[0] == 0 and ptr[-1] == dr.nnz and (np.diff(ptr) >= 0).all()
    assert (np.diff(ptr) == 0).any()  # empty rows
    mats = r1cs.matrices()
    rows = np.repeat(np.arange(3 * m), np.diff(ptr))
    assert rows.tolist() == np.concatenate([mat.row_ids() + k * m for k, mat in enumerate(mats)]).tolist()
    assert np.asarray(dr.cols).tolist() == np.concatenate([mat.cols for mat in mats]).tolist()
    assert np.asarray(dr.coeff_ids).tolist() == np.concatenate([mat.coeff_ids for mat in mats]).tolist()


def test_evaluate_single_matches_reference(system):
    r1cs, zs, dr = system
    want = ref.evaluate(*r1cs.reference_matrices(), zs[0].z)
    got = ops_r1cs.evaluate(dr, jnp.asarray(zs[0].z_limbs()))
    assert tuple(_ints(x) for x in got) == want
    assert ops_r1cs.evaluate_host(r1cs, zs[0].z_limbs(), dr=dr) == want


def test_evaluate_batched_equals_one_by_one(system):
    r1cs, zs, dr = system
    z = jnp.asarray(stack_z(zs))  # (8, 3, n_vars)
    got = ops_r1cs.evaluate(dr, z)
    assert got[0].shape == (8, 3, r1cs.num_constraints)
    mats = r1cs.reference_matrices()
    for p, w in enumerate(zs):
        want = ref.evaluate(*mats, w.z)
        assert tuple(_ints(x[:, p]) for x in got) == want, p


def test_partition_chunks_equal_all_at_once(system):
    _, zs, dr = system
    z = jnp.asarray(stack_z(zs))
    whole = ops_r1cs.evaluate(dr, z)
    chunked = ops_r1cs.evaluate(dr, z, chunk=1)
    for a, b in zip(whole, chunked):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="multiple"):
        ops_r1cs.evaluate(dr, z, chunk=2)


def test_vmap_equals_broadcast(system):
    r1cs, zs, dr = system
    z = jnp.asarray(stack_z(zs))
    vm = x64(jax.vmap(lambda zz: ops_r1cs.evaluate_program(dr, zz), in_axes=1, out_axes=1))(z)
    direct = ops_r1cs.evaluate(dr, z)
    for a, b in zip(vm, direct):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_bad_z_rejected(system):
    _, zs, dr = system
    with pytest.raises(ValueError, match="shape"):
        ops_r1cs.evaluate(dr, jnp.zeros((12, 5), jnp.uint32))
    with pytest.raises(ValueError, match="uint32"):
        ops_r1cs.evaluate(dr, jnp.zeros((8, 5), jnp.int32))


@pytest.fixture(scope="module")
def porep_batch():
    circuit = get_circuit("porep_like", "mini")
    r1cs = circuit.r1cs()
    ws = [circuit.witness(circuit.sample_inputs(p, 0)) for p in range(2)]
    return r1cs, ws, ops_r1cs.to_device(r1cs)


def test_check_satisfied_partitions(porep_batch):
    r1cs, ws, dr = porep_batch
    ok, first = ops_r1cs.check(dr, jnp.asarray(stack_z(ws)))
    assert np.asarray(ok).tolist() == [True, True] and np.asarray(first).tolist() == [-1, -1]
    ops_r1cs.assert_satisfied(r1cs, stack_z(ws), dr)
    for w in ws:
        r1cs.check(w)  # the Python reference agrees


def test_check_names_first_failing_constraint(porep_batch):
    r1cs, ws, dr = porep_batch
    # tamper with one private value of partition 1: the device and the reference name the same constraint
    col = r1cs.num_inputs + r1cs.num_aux // 2
    bad = ws[1].with_value(col, ws[1].z[col] + 1)
    with pytest.raises(Unsatisfied) as want:
        r1cs.check(bad)
    z = stack_z([ws[0], bad])
    ok, first = ops_r1cs.check(dr, jnp.asarray(z))
    assert np.asarray(ok).tolist() == [True, False]
    assert int(np.asarray(first)[1]) == want.value.index
    with pytest.raises(Unsatisfied, match=r"partition 1: constraint #\d+ '.+'") as got:
        ops_r1cs.assert_satisfied(r1cs, z, dr)
    assert (got.value.index, got.value.name, got.value.partition) == (want.value.index, want.value.name, 1)
    assert got.value.name.startswith("challenge_0/") or got.value.name.startswith("comm_r")
