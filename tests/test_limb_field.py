"""Kernel field objects (ops/pallas/limb_field.py) against ops.field and the Python-int reference, exact equality."""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cuzk_jax import encoding as enc
from cuzk_jax.ops import curve as cv
from cuzk_jax.ops import field as F
from cuzk_jax.ops.pallas import bucket as pk
from cuzk_jax.ops.pallas import limb_field as lf
from cuzk_jax.reference import field as rf
from cuzk_jax.reference.constants import P

EDGE = [0, 1, 2, P - 1, P - 2, (1 << 384) % P, (1 << 32) - 1, 1 << 32, P >> 1]


def _vals(rng, n=7):
    return EDGE + [rng.randrange(P) for _ in range(n)]


def _mont(vals):
    return jnp.asarray(enc.ints_to_limbs(vals, "fq", montgomery=True))


def _ints(arr):
    return enc.limbs_to_ints(np.asarray(arr), "fq", montgomery=True)


@pytest.mark.parametrize("which", ["array", "limb"])
def test_prime_field_ops(which, rng):
    """The interpret-mode fields of the kernels: ArrayField (MSM) and the rolled LimbField (NTT)."""
    a_int = _vals(rng)
    b_int = list(reversed(a_int))
    a, b = _mont(a_int), _mont(b_int)
    if which == "array":
        Fk = lf.array_fq
        wrap, unwrap = (lambda x: x), (lambda x: x)
    else:
        Fk = lf.fq
        wrap, unwrap = (lambda x: lf.to_limbs(x, Fk)), (lambda x: lf.from_limbs(x, Fk))

    @jax.jit
    def run(a, b):
        with jax.enable_x64(True):
            x, y = wrap(a), wrap(b)
            prods = Fk.mul_many([(x, y), (x, x)])
            return (unwrap(Fk.add(x, y)), unwrap(Fk.sub(x, y)), unwrap(Fk.neg(x)), unwrap(prods[0]),
                    unwrap(prods[1]), unwrap(Fk.mul_small(x, 3)), Fk.is_zero(x), Fk.eq(x, y),
                    unwrap(Fk.select(Fk.is_zero(x), Fk.ones_like(x), Fk.zeros_like(x))))

    add, sub, neg, mul, sq, m3, z, e, sel = run(a, b)
    f = rf.fq
    assert _ints(add) == [f.add(x, y) for x, y in zip(a_int, b_int)]
    assert _ints(sub) == [f.sub(x, y) for x, y in zip(a_int, b_int)]
    assert _ints(neg) == [f.neg(x) for x in a_int]
    assert _ints(mul) == [f.mul(x, y) for x, y in zip(a_int, b_int)]
    assert _ints(sq) == [f.mul(x, x) for x in a_int]
    assert _ints(m3) == [3 * x % P for x in a_int]
    assert list(np.asarray(z)) == [x == 0 for x in a_int]
    assert list(np.asarray(e)) == [x == y for x, y in zip(a_int, b_int)]
    assert _ints(sel) == [1 if x == 0 else 0 for x in a_int]
    # same bits as ops.field (not only the same values)
    with jax.enable_x64(True):
        assert bool(jnp.array_equal(mul, F.fq.mul(a, b)))


@pytest.mark.parametrize("which", ["array", "limb"])
def test_fq2_mul_add(which, rng):
    n = 6
    a_int = [(rng.randrange(P), rng.randrange(P)) for _ in range(n)] + [(0, 0), (P - 1, 1)]
    b_int = [(rng.randrange(P), rng.randrange(P)) for _ in range(n)] + [(1, 0), (P - 1, P - 1)]
    mk = lambda v: jnp.stack([_mont([x[0] for x in v]), _mont([x[1] for x in v])])  # noqa: E731
    a, b = mk(a_int), mk(b_int)
    Fk = lf.array_fq2 if which == "array" else lf.fq2

    @jax.jit
    def run(a, b):
        with jax.enable_x64(True):
            if which == "array":
                return Fk.mul(a, b), Fk.sub(a, b), Fk.mul_small(a, 3)
            x, y = lf.to_limbs(a, Fk), lf.to_limbs(b, Fk)
            return lf.from_limbs(Fk.mul(x, y), Fk), lf.from_limbs(Fk.sub(x, y), Fk), None

    mul, sub, m3 = run(a, b)
    f = rf.fq2
    got = lambda arr: list(zip(_ints(arr[0]), _ints(arr[1])))  # noqa: E731
    assert got(mul) == [f.mul(x, y) for x, y in zip(a_int, b_int)]
    assert got(sub) == [f.sub(x, y) for x, y in zip(a_int, b_int)]
    if m3 is not None:
        assert got(m3) == [(3 * x[0] % P, 3 * x[1] % P) for x in a_int]


def test_product_loop(rng):
    """``product_loop`` (the GPU MSM kernels' one-product-block-per-round form: products in a loop, operands picked
    by selects) gives the reference products for Fq (3 products, edge values) and Fq2 (2 products), here with the
    jnp limb field's product in the loop (the PTX blocks run only in compiled kernels)."""
    a_int = _vals(rng)
    b_int = list(reversed(a_int))
    c_int = [rng.randrange(P) for _ in a_int]
    a, b, c = _mont(a_int), _mont(b_int), _mont(c_int)
    fq2_a = list(zip(a_int, c_int))  # u = a + c i
    fq2_b = list(zip(b_int, a_int))  # w = b + a i

    @jax.jit
    def run(a, b, c):
        with jax.enable_x64(True):
            Fk, F2 = lf.fq, lf.fq2
            x, y, z = (lf.to_limbs(v, Fk) for v in (a, b, c))
            p = [lf.from_limbs(v, Fk) for v in lf.product_loop(Fk, [(x, y), (x, x), (z, y)], Fk.mul)]
            u, w = (x, z), (y, x)
            q = [lf.from_limbs(v, F2) for v in lf.product_loop(F2, [(u, w), (w, w)], F2.mul)]
            return p, q

    (pxy, pxx, pzy), (quw, qww) = run(a, b, c)
    f, f2 = rf.fq, rf.fq2
    assert _ints(pxy) == [f.mul(x, y) for x, y in zip(a_int, b_int)]
    assert _ints(pxx) == [f.mul(x, x) for x in a_int]
    assert _ints(pzy) == [f.mul(z, y) for z, y in zip(c_int, b_int)]
    got = lambda arr: list(zip(_ints(arr[0]), _ints(arr[1])))  # noqa: E731
    assert got(quw) == [f2.mul(u, w) for u, w in zip(fq2_a, fq2_b)]
    assert got(qww) == [f2.mul(w, w) for w in fq2_b]


@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("kind", ["array", "limb"])
def test_kernel_rep_round_trip(group, kind):
    """Kernel rows (4 Lc, B) <-> XYZZ of the kernel field keep every word in its place (G2: c0 limbs, then c1)."""
    curve = cv.CURVES[group]
    rep = pk.Rep(curve, kind)
    rows = [jnp.arange(8, dtype=jnp.uint32) + 1000 * r for r in range(4 * rep.Lc)]
    with jax.enable_x64(True):
        pt = rep.point(rows)
        back = rep.point_rows(pt)
        assert all(bool(jnp.array_equal(x, y)) for x, y in zip(rows, back))
        if kind == "array":
            # the array form is the ops.field layout: coordinate k, component j, limb l = row k Lc + 12 j + l
            x = pt.x if group == "g1" else pt.x[1]
            assert int(x[3, 5]) == (12 * (group == "g2") + 3) * 1000 + 5


# ---------------------------------------------------------------------------------------------------------------
# PTX carry-chain blocks (ops/pallas/ptx_field.py): the exact text sent to the GPU, run by the PTX emulator,
# against Python's modular arithmetic
# ---------------------------------------------------------------------------------------------------------------

from cuzk_jax.ops.pallas import ptx_field as pf  # noqa: E402


def _words(x: int, n: int) -> list[int]:
    return [(x >> (32 * j)) & pf.MASK for j in range(n)]


def _value(ws) -> int:
    return sum(w << (32 * j) for j, w in enumerate(ws))


def _edge_and_random(p: int, n: int, rng, k: int) -> list[int]:
    R = 1 << (32 * n)
    edges = [0, 1, 2, p - 1, p - 2, p // 2, (p + 1) // 2, R % p, (R * R) % p, (1 << (32 * n - 32)) % p]
    return edges + [rng.randrange(p) for _ in range(k)]


@pytest.mark.parametrize("name", ["fq", "fr"])
def test_ptx_blocks_match_python(name, rng):
    """The product (CIOS with even / odd limbs in two carry chains) and the sum and difference blocks against
    Python's modular arithmetic, on edge and random values."""
    fld = {"fq": F.fq, "fr": F.fr}[name]
    p, n = fld.modulus, fld.limbs
    pl = tuple(int(v) for v in fld.p_limbs)
    mul = pf.mont_mul_asm(pl, int(fld.pinv))
    add, sub = pf.add_mod_asm(pl), pf.sub_mod_asm(pl)
    r_inv = pow(1 << (32 * n), -1, p)
    vals = _edge_and_random(p, n, rng, 30)
    pairs = [(a, b) for a in vals[:10] for b in vals[:10]] + list(zip(vals[10:], reversed(vals)))
    for a, b in pairs:
        ops = _words(a, n) + _words(b, n)
        assert _value(pf.emulate(mul, ops, n)) == a * b * r_inv % p, (a, b)
        assert _value(pf.emulate(add, ops, n)) == (a + b) % p, (a, b)
        assert _value(pf.emulate(sub, ops, n)) == (a - b) % p, (a, b)


def test_ptx_fq2_block_matches_python(rng):
    """The one-block Fq2 product (Karatsuba with lazy reduction, its products and reductions with two chains per
    row) against ``(a0 + a1 u)(b0 + b1 u) / R`` with ``u^2 = -1``, on random values and the extremes 0 / p - 1 in every
    position."""
    fld = F.fq
    p, n = fld.modulus, fld.limbs
    text = pf.fq2_mul_asm(tuple(int(v) for v in fld.p_limbs), int(fld.pinv))
    r_inv = pow(1 << (32 * n), -1, p)
    vals = _edge_and_random(p, n, rng, 24)
    cases = [tuple(rng.choice(vals) for _ in range(4)) for _ in range(40)]
    cases += [(a0, a1, b0, b1) for a0 in (0, p - 1) for a1 in (0, p - 1) for b0 in (0, p - 1) for b1 in (0, p - 1)]
    for a0, a1, b0, b1 in cases:
        out = pf.emulate(text, _words(a0, n) + _words(a1, n) + _words(b0, n) + _words(b1, n), 2 * n)
        assert _value(out[:n]) == (a0 * b0 - a1 * b1) * r_inv % p, (a0, a1, b0, b1)
        assert _value(out[n:]) == (a0 * b1 + a1 * b0) * r_inv % p, (a0, a1, b0, b1)


def test_ptx_emulator_catches_a_broken_block(rng):
    """Negative twin: the check above can fail -- a product block with one carry dropped (a ``madc`` in the middle
    turned into a ``mad``) gives wrong results on random inputs, and reading the carry flag before any ``.cc`` write raises."""
    fld = F.fq
    p, n = fld.modulus, fld.limbs
    good = pf.mont_mul_asm(tuple(int(v) for v in fld.p_limbs), int(fld.pinv))
    lines = good.splitlines()
    at = [i for i, ln in enumerate(lines) if "madc.lo.cc.u32" in ln]
    i = at[len(at) // 2]  # a carry in the middle of the product (early ones add into zero words and never carry)
    lines[i] = lines[i].replace("madc.lo.cc.u32", "mad.lo.cc.u32")
    broken = "\n".join(lines)
    r_inv = pow(1 << (32 * n), -1, p)
    vals = _edge_and_random(p, n, rng, 8)[10:]
    wrong = [a for a, b in zip(vals, vals[1:])
             if _value(pf.emulate(broken, _words(a, n) + _words(b, n), n)) != a * b * r_inv % p]
    assert wrong
    with pytest.raises(ValueError, match="carry flag"):
        pf.emulate("{\n  addc.u32 $0, $1, $2;\n}", [1, 2], 1)
    # the carry of the fold of Y_0 into X_0 must reach Y's chain: drop it and some product goes wrong
    lines = good.splitlines()
    folded = [i for i, ln in enumerate(lines) if ln.strip().startswith("add.cc.u32 x")]
    j = folded[len(folded) // 2] + 1
    assert lines[j].strip().startswith("madc.lo.cc.u32 y")
    lines[j] = lines[j].replace("madc.lo.cc.u32", "mad.lo.cc.u32")
    broken = "\n".join(lines)
    assert any(_value(pf.emulate(broken, _words(a, n) + _words(b, n), n)) != a * b * r_inv % p
               for a, b in zip(vals, vals[1:]))


def test_ptx_fq2_emulator_catches_broken_blocks(rng):
    """Negative twin of the Fq2 block: dropping one carry -- inside a product row's odd-limb chain, or the
    fold of a reduction step into its odd-limb chain -- makes some product wrong on random operands."""
    fld = F.fq
    p, n = fld.modulus, fld.limbs
    good = pf.fq2_mul_asm(tuple(int(v) for v in fld.p_limbs), int(fld.pinv))
    r_inv = pow(1 << (32 * n), -1, p)
    cases = [tuple(rng.randrange(p) for _ in range(4)) for _ in range(12)]
    for fold in ("add.cc.u32 v5, v5, g5", "madc.lo.cc.u32 u6"):  # a reduction's fold; inside a product's odd chain
        lines = good.splitlines()
        j = next(i for i, ln in enumerate(lines) if ln.strip().startswith(fold))
        j += 2 if fold.startswith("add") else 0  # the reduction's fold feeds the chain after its mul.lo
        assert lines[j].strip().startswith("madc.lo.cc.u32")
        lines[j] = lines[j].replace("madc.lo.cc.u32", "mad.lo.cc.u32")
        broken = "\n".join(lines)
        assert any(_value(pf.emulate(broken, sum((_words(x, n) for x in c), []), 2 * n)[:n]) !=
                   (c[0] * c[2] - c[1] * c[3]) * r_inv % p
                   or _value(pf.emulate(broken, sum((_words(x, n) for x in c), []), 2 * n)[n:]) !=
                   (c[0] * c[3] + c[1] * c[2]) * r_inv % p for c in cases), fold


def test_ptx_field_interface():
    """The PTX field keeps LimbField's interface on uint32 limbs (what the kernels' curve formulas call); compiled
    kernels use it, interpreted ones the jnp array fields."""
    f = pf.fq_loop
    a = [jnp.zeros((4,), jnp.uint32)] * f.limbs
    assert f.dtype == jnp.uint32 and pf.fq2_lazy_loop.dtype == jnp.uint32
    assert [int(v[0]) for v in f.ones_like(a)] == list(F.int_to_limbs(F.fq.r_mod, f.limbs))
    assert bool(jnp.all(f.is_zero(a))) and bool(jnp.all(f.eq(a, f.zeros_like(a))))
    with pytest.raises(ValueError, match="only inside Pallas kernels"):
        f.mul(a, a)  # outside a kernel: one clear error, not an XLA crash
    for group, field in (("g1", pf.fq_loop), ("g2", pf.fq2_lazy_loop)):
        assert pk.Rep(cv.CURVES[group], "limb").F is field
        assert pk.Rep(cv.CURVES[group], "array").F in (lf.array_fq, lf.array_fq2)
