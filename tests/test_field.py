"""Field layer vs the Python-int reference: exact equality on random and edge values, jit and vmap, Pallas."""

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cuzk_jax import encoding as E
from cuzk_jax.ops import field as F
from cuzk_jax.reference import field as RF

PRIME_FIELDS = {"fq": (F.fq, RF.fq), "fr": (F.fr, RF.fr)}


def edge_values(ref):
    p, L = ref.modulus, ref.limbs
    top = p >> (32 * (L - 1))
    vals = [0, 1, 2, p - 1, p - 2, ref.mont_r, (ref.mont_r * ref.mont_r) % p, (1 << 32) - 1, 1 << 32,
            (1 << (32 * (L - 1))) - 1,  # every limb but the top at 2^32 - 1
            ((top - 1) << (32 * (L - 1))) | ((1 << (32 * (L - 1))) - 1)]  # top limb just below p's, rest all-ones
    for k in range(L - 1):
        vals.append(((1 << 32) - 1) << (32 * k))  # a single limb at 2^32 - 1
        vals.append((p - 1) & ~(((1 << 32) - 1) << (32 * k)))  # p - 1 with one limb cleared to 0
    return [v % p for v in vals]


def sample(ref, rnd, n_random=40):
    edges = edge_values(ref)
    a = edges + [rnd.randrange(ref.modulus) for _ in range(n_random)]
    b = list(reversed(edges)) + [rnd.randrange(ref.modulus) for _ in range(n_random)]
    # all pairs of edge values are covered by a rotation as well
    b2 = edges[1:] + edges[:1] + [rnd.randrange(ref.modulus) for _ in range(n_random)]
    return a + a, b + b2


def dev(vals, ref):
    return jnp.asarray(E.ints_to_limbs(vals, ref, montgomery=True))


def host(arr, ref):
    return E.limbs_to_ints(np.asarray(arr), ref, montgomery=True)


# One jitted program per field computing every binary/unary op at once keeps the compile count low on CI.
@jax.jit
def _all_ops_fq(a, b):
    f = F.fq
    return (f.add(a, b), f.sub(a, b), f.neg(a), f.double(a), f.mul(a, b), f.square(a), f.eq(a, b), f.is_zero(a))


@jax.jit
def _all_ops_fr(a, b):
    f = F.fr
    return (f.add(a, b), f.sub(a, b), f.neg(a), f.double(a), f.mul(a, b), f.square(a), f.eq(a, b), f.is_zero(a))


ALL_OPS = {"fq": _all_ops_fq, "fr": _all_ops_fr}


@pytest.mark.parametrize("name", ["fq", "fr"])
def test_ring_ops_match_reference(name):
    f, ref = PRIME_FIELDS[name]
    rnd = random.Random(name)
    va, vb = sample(ref, rnd)
    outs = ALL_OPS[name](dev(va, ref), dev(vb, ref))
    add, sub, neg, dbl, mul, sq, eq, isz = outs
    assert host(add, ref) == [ref.add(x, y) for x, y in zip(va, vb)]
    assert host(sub, ref) == [ref.sub(x, y) for x, y in zip(va, vb)]
    assert host(neg, ref) == [ref.neg(x) for x in va]
    assert host(dbl, ref) == [ref.double(x) for x in va]
    assert host(mul, ref) == [ref.mul(x, y) for x, y in zip(va, vb)]
    assert host(sq, ref) == [ref.square(x) for x in va]
    assert np.asarray(eq).tolist() == [x == y for x, y in zip(va, vb)]
    assert np.asarray(isz).tolist() == [x == 0 for x in va]


@pytest.mark.parametrize("name", ["fq", "fr"])
@pytest.mark.parametrize("schedule", ["rolled", "unrolled"])
def test_mul_schedules_agree_with_reference(name, schedule):
    f, ref = PRIME_FIELDS[name]
    rnd = random.Random(schedule + name)
    va, vb = sample(ref, rnd, 20)
    fs = f.with_schedule(schedule)
    assert fs.schedule == schedule and fs is f.with_schedule(schedule)  # one cached object per schedule
    out = jax.jit(lambda a, b: (fs.mul(a, b), fs.add(a, b), fs.sub(a, b)))(dev(va, ref), dev(vb, ref))
    assert host(out[0], ref) == [ref.mul(x, y) for x, y in zip(va, vb)]
    assert host(out[1], ref) == [ref.add(x, y) for x, y in zip(va, vb)]
    assert host(out[2], ref) == [ref.sub(x, y) for x, y in zip(va, vb)]


def test_mul_is_not_trivially_right():
    # negative twin: a wrong product must be detected by the same comparison
    f, ref = F.fr, RF.fr
    va, vb = [3, 5], [7, 11]
    out = host(f.mul(dev(va, ref), dev(vb, ref)), ref)
    assert out == [21, 55] and out != [21, 56]


@pytest.mark.parametrize("name", ["fq", "fr"])
def test_mont_roundtrip_and_constants(name):
    f, ref = PRIME_FIELDS[name]
    rnd = random.Random(1)
    vals = edge_values(ref) + [rnd.randrange(ref.modulus) for _ in range(10)]
    canon = jnp.asarray(E.ints_to_limbs(vals, ref))
    mont = jax.jit(f.to_mont)(canon)
    assert host(mont, ref) == vals
    assert E.limbs_to_ints(np.asarray(jax.jit(f.from_mont)(mont)), ref) == vals
    assert host(f.constant(12345, (3,)), ref) == [12345] * 3
    assert host(f.ones((2,)), ref) == [1, 1]


@pytest.mark.parametrize("name", ["fq", "fr"])
def test_inv_pow_batch_inv(name):
    f, ref = PRIME_FIELDS[name]
    rnd = random.Random(2)
    vals = [0, 1, ref.modulus - 1, 2] + [rnd.randrange(ref.modulus) for _ in range(13)]
    a = dev(vals, ref)
    assert host(jax.jit(f.inv)(a), ref) == [ref.inv(x) for x in vals]
    assert host(jax.jit(lambda x: f.pow(x, 65537))(a), ref) == [ref.pow(x, 65537) for x in vals]
    assert host(f.pow(a, 0), ref) == [1] * len(vals)
    assert host(f.pow(a, 1), ref) == vals
    # batch inversion over a 2-d batch, with zeros mixed in, and a chunk that does not divide the size
    a2 = a.reshape(f.limbs, 1, len(vals))
    got = jax.jit(lambda x: f.batch_inv(x, chunk=4))(a2)
    assert got.shape == a2.shape
    assert host(got.reshape(f.limbs, -1), ref) == [ref.inv(x) for x in vals]


def test_sqrt_fq():
    f, ref = F.fq, RF.fq
    rnd = random.Random(3)
    squares = [ref.square(rnd.randrange(ref.modulus)) for _ in range(6)] + [0, 4]
    nonsq = []
    while len(nonsq) < 3:
        v = rnd.randrange(ref.modulus)
        if not ref.is_square(v):
            nonsq.append(v)
    vals = squares + nonsq
    r, ok = jax.jit(f.sqrt)(dev(vals, ref))
    roots = host(r, ref)
    assert np.asarray(ok).tolist() == [True] * len(squares) + [False] * len(nonsq)
    for v, s, good in zip(vals, roots, np.asarray(ok)):
        if good:
            assert ref.square(s) == v


def test_select_and_broadcast_batch_shapes():
    f, ref = F.fr, RF.fr
    a = dev([1, 2, 3, 4, 5, 6], ref).reshape(f.limbs, 2, 3)
    b = dev([10, 20, 30, 40, 50, 60], ref).reshape(f.limbs, 2, 3)
    mask = jnp.array([[True, False, True], [False, True, False]])
    out = f.select(mask, a, b)
    assert host(out.reshape(f.limbs, -1), ref) == [1, 20, 3, 40, 5, 60]
    # scalar-broadcast second operand
    c = f.constant(7)[:, None, None]
    assert host(f.mul(a, c).reshape(f.limbs, -1), ref) == [7 * v for v in [1, 2, 3, 4, 5, 6]]


def test_vmap_over_batch_axis():
    f, ref = F.fr, RF.fr
    rnd = random.Random(4)
    va = [rnd.randrange(ref.modulus) for _ in range(12)]
    vb = [rnd.randrange(ref.modulus) for _ in range(12)]
    a = dev(va, ref).reshape(f.limbs, 3, 4)
    b = dev(vb, ref).reshape(f.limbs, 3, 4)
    out = jax.vmap(f.mul, in_axes=1, out_axes=1)(a, b)
    assert host(out.reshape(f.limbs, -1), ref) == [x * y % ref.modulus for x, y in zip(va, vb)]


# ---- Fq2 -------------------------------------------------------------------------------------------------------


def dev2(vals):
    c0 = E.ints_to_limbs([v[0] for v in vals], "fq", montgomery=True)
    c1 = E.ints_to_limbs([v[1] for v in vals], "fq", montgomery=True)
    return jnp.asarray(np.stack([c0, c1]))


def host2(arr):
    arr = np.asarray(arr)
    return list(zip(host(arr[0], RF.fq), host(arr[1], RF.fq)))


@jax.jit
def _fq2_ops(a, b):
    g = F.fq2
    return g.add(a, b), g.sub(a, b), g.mul(a, b), g.square(a), g.neg(a), g.conjugate(a), g.inv(a), g.eq(a, b)


def test_fq2_matches_reference():
    ref, p = RF.fq2, RF.fq.modulus
    rnd = random.Random(5)
    edge = [(0, 0), (1, 0), (0, 1), (p - 1, p - 1), (p - 1, 0), (0, p - 1)]
    va = edge + [(rnd.randrange(p), rnd.randrange(p)) for _ in range(10)]
    vb = list(reversed(edge)) + [(rnd.randrange(p), rnd.randrange(p)) for _ in range(10)]
    add, sub, mul, sq, neg, conj, inv, eq = _fq2_ops(dev2(va), dev2(vb))
    assert host2(add) == [ref.add(x, y) for x, y in zip(va, vb)]
    assert host2(sub) == [ref.sub(x, y) for x, y in zip(va, vb)]
    assert host2(mul) == [ref.mul(x, y) for x, y in zip(va, vb)]
    assert host2(sq) == [ref.square(x) for x in va]
    assert host2(neg) == [ref.neg(x) for x in va]
    assert host2(conj) == [ref.conjugate(x) for x in va]
    assert host2(inv) == [ref.inv(x) for x in va]
    assert np.asarray(eq).tolist() == [x == y for x, y in zip(va, vb)]


def test_fq2_batch_inv_and_pow():
    ref, p = RF.fq2, RF.fq.modulus
    rnd = random.Random(6)
    va = [(0, 0), (1, 2)] + [(rnd.randrange(p), rnd.randrange(p)) for _ in range(5)]
    a = dev2(va)
    assert host2(jax.jit(lambda x: F.fq2.batch_inv(x, chunk=2))(a)) == [ref.inv(x) for x in va]
    assert host2(jax.jit(lambda x: F.fq2.pow(x, 1000003))(a)) == [ref.pow(x, 1000003) for x in va]


# ---- Pallas kernel ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fq", "fr"])
def test_pallas_mul_interpret_equals_xla(name):
    from cuzk_jax.ops.pallas import field_mul

    f, ref = PRIME_FIELDS[name]
    rnd = random.Random(7)
    va, vb = sample(ref, rnd, 30)
    va, vb = va[:100], vb[:100]  # 100 is not a multiple of the block: exercises padding
    a, b = dev(va, ref), dev(vb, ref)
    got = field_mul.mul(a, b, name, block=64, interpret=True)
    assert host(got, ref) == [ref.mul(x, y) for x, y in zip(va, vb)]
    assert np.array_equal(np.asarray(got), np.asarray(f.mul(a, b)))


@pytest.mark.parametrize("name", ["fq", "fr"])
def test_ptx_chain_interpret_equals_python(name):
    """The field benchmark's chain kernel (``k`` dependent products per element; compiled it runs the PTX product
    forms, interpreted the jnp twin) against Python: ``a b^k / R^k``, with 0 and p - 1 among the inputs."""
    from cuzk_jax.ops.pallas import field_mul

    f, ref = PRIME_FIELDS[name]
    rnd = random.Random(9)
    va, vb = sample(ref, rnd, 30)
    va, vb = (va * 3)[:64], (vb * 3)[:64]
    va[0], va[1], vb[1] = 0, ref.modulus - 1, ref.modulus - 1
    got = field_mul.ptx_chain(dev(va, ref), dev(vb, ref), name, k=3, block=64, interpret=True)
    assert host(got, ref) == [ref.mul(ref.mul(ref.mul(x, y), y), y) for x, y in zip(va, vb)]
    with pytest.raises(ValueError, match="field"):
        field_mul.ptx_chain(dev(va, ref), dev(vb, ref), "fp", k=3, block=64, interpret=True)


def test_mul_sub_interpret_equals_python():
    """The H step's pointwise kernel (``field_mul.mul_sub``: ``a b / R - c``; compiled it runs the PTX blocks,
    interpreted the jnp twin) against Python on edge and random values, over a batch that is not a multiple of the
    block; operands of different shapes are one clear error."""
    from cuzk_jax.ops.pallas import field_mul

    f, ref = PRIME_FIELDS["fr"]
    rnd = random.Random(11)
    va, vb = sample(ref, rnd, 20)
    vc = list(reversed(va))
    n = len(va) - len(va) % 3
    a, b, c = (dev(v[:n], ref).reshape(8, 3, n // 3) for v in (va, vb, vc))
    got = field_mul.mul_sub(a, b, c, block=64, interpret=True)
    assert host(got.reshape(8, n), ref) == [ref.sub(ref.mul(x, y), z) for x, y, z in zip(va[:n], vb[:n], vc[:n])]
    with pytest.raises(ValueError, match="one shape"):
        field_mul.mul_sub(a, b, c[:, :2], block=64, interpret=True)


def test_pallas_mul_rejects_bad_operands():
    from cuzk_jax.ops.pallas import field_mul

    with pytest.raises(ValueError, match="field"):
        field_mul.mul(jnp.zeros((12, 4), jnp.uint32), jnp.zeros((12, 4), jnp.uint32), "fp")
    with pytest.raises(ValueError, match="shape"):
        field_mul.mul(jnp.zeros((8, 4), jnp.uint32), jnp.zeros((8, 4), jnp.uint32), "fq")
    with pytest.raises(ValueError, match="power of two"):
        field_mul.mul(jnp.zeros((12, 4), jnp.uint32), jnp.zeros((12, 4), jnp.uint32), "fq", block=100)


def test_unknown_schedule_rejected():
    with pytest.raises(ValueError, match="schedule"):
        F.fr.with_schedule("fast")
    with pytest.raises(ValueError, match="schedule"):
        F.fq2.with_schedule("fast")


def test_schedule_objects():
    """The schedule is a property of the field / curve object (no global): the platform default resolves by the
    backend only, and ``with_schedule`` returns the same cached object, also for Fq2 and the curves."""
    from cuzk_jax.ops import config as C
    from cuzk_jax.ops import curve as cv

    assert F.fq.schedule == C.default_schedule() and F.fq_rolled.schedule == "rolled"
    assert F.fq2.with_schedule("rolled") is F.fq2_rolled and F.fq2_rolled.base is F.fq_rolled
    g1r = cv.g1.with_schedule("rolled")
    assert g1r is cv.g1.with_schedule("rolled") and g1r.field is F.fq_rolled and g1r.name == "g1"
    assert cv.g2.with_schedule("unrolled").field.base is F.fq.with_schedule("unrolled")


def test_reference_batch_inv_equals_inv_with_zeros():
    """Montgomery's trick in the reference fields (one inversion) against per-element ``inv``, zeros included."""
    rng = random.Random(41)
    xs = [rng.randrange(RF.fq.modulus) for _ in range(7)] + [0]
    assert RF.fq.batch_inv(xs) == [RF.fq.inv(x) for x in xs]
    ys = [(rng.randrange(RF.fq.modulus), rng.randrange(RF.fq.modulus)) for _ in range(5)] + [(0, 0)]
    assert RF.fq2.batch_inv(ys) == [RF.fq2.inv(y) for y in ys]
    assert RF.fq.batch_inv([0, 0]) == [0, 0] and RF.fr.batch_inv([]) == []


@pytest.mark.parametrize("n, chunk", [(5, 8), (37, 8), (64, 16), (65, 16)])
def test_map_last_axis_equals_the_whole_array_op(n, chunk):
    """map_last_axis (windows of ``chunk`` in a fori_loop, the last one moved back): from_mont and to_mont of a
    ``(8, 2, n)`` batch give the Python-int values, also for lengths that are not a multiple of the window."""
    rng = random.Random(n * 100 + chunk)
    vals = [rng.randrange(RF.fr.modulus) for _ in range(2 * n)]
    vals[:3] = [0, 1, RF.fr.modulus - 1]
    mont = jnp.asarray(E.ints_to_limbs(vals, "fr", montgomery=True).reshape(8, 2, n))
    canon = jnp.asarray(E.ints_to_limbs(vals, "fr").reshape(8, 2, n))
    out = jax.jit(lambda x: F.map_last_axis(F.fr.from_mont, x, chunk=chunk))(mont)
    assert E.limbs_to_ints(np.asarray(out).reshape(8, -1), "fr") == vals
    back = jax.jit(lambda x: F.map_last_axis(F.fr.to_mont, x, chunk=chunk))(canon)
    assert np.array_equal(np.asarray(back), np.asarray(mont))


def test_map_last_axis_windows_the_flattened_batch():
    """Windows run over the partitions and elements together: a ``(8, 3, 5)`` batch in windows of 4."""
    rng = random.Random(5)
    vals = [rng.randrange(RF.fr.modulus) for _ in range(15)]
    mont = jnp.asarray(E.ints_to_limbs(vals, "fr", montgomery=True).reshape(8, 3, 5))
    out = jax.jit(lambda x: F.map_last_axis(F.fr.from_mont, x, chunk=4))(mont)
    assert out.shape == (8, 3, 5) and E.limbs_to_ints(np.asarray(out).reshape(8, -1), "fr") == vals


@pytest.mark.parametrize("n, chunk", [(6, 4), (16, 4)])
def test_map_last_axis_several_inputs_and_positions(n, chunk):
    """Three inputs (``a b - c``), with the element's position along the last axis (``* w^j``) and from positions
    alone (the table ``w^j``): the Python-int values, windows crossing partition rows included."""
    rng = random.Random(n)
    p = RF.fr.modulus
    a, b, c = ([rng.randrange(p) for _ in range(2 * n)] for _ in range(3))
    a[0], b[1], c[2] = 0, p - 1, p - 1
    w = rng.randrange(2, p)
    table = jnp.asarray(E.ints_to_limbs([pow(w, j, p) for j in range(n)], "fr", montgomery=True))
    mont = [jnp.asarray(E.ints_to_limbs(v, "fr", montgomery=True).reshape(8, 2, n)) for v in (a, b, c)]
    f = F.fr
    out = jax.jit(lambda *xs: F.map_last_axis(lambda x, y, z: f.sub(f.mul(x, y), z), *xs, chunk=chunk))(*mont)
    got = E.limbs_to_ints(np.asarray(out).reshape(8, -1), "fr", montgomery=True)
    assert got == [(x * y - z) % p for x, y, z in zip(a, b, c)]
    scaled = jax.jit(lambda x: F.map_last_axis(lambda j, v: f.mul(v, jnp.take(table, j, axis=1)), x,
                                               positions=True, chunk=chunk))(mont[0])
    got = E.limbs_to_ints(np.asarray(scaled).reshape(8, -1), "fr", montgomery=True)
    assert got == [x * pow(w, k % n, p) % p for k, x in enumerate(a)]
    gen = jax.jit(lambda: F.map_last_axis(lambda j: jnp.take(table, j, axis=1), positions=True, shape=(n,),
                                          limbs=8, chunk=chunk))()
    assert np.array_equal(np.asarray(gen), np.asarray(table))
    with pytest.raises(ValueError, match="different shapes"):
        F.map_last_axis(f.mul, mont[0], mont[1][:, :1])
