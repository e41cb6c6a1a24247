"""Boolean, uint32 and field gadgets against plain Python (truth tables, Python ints), with negative twins.

Every satisfied system is checked with the Python-int reference (``ConstraintSystem.check``); every negative twin
changes one witness value and expects :class:`Unsatisfied`.
"""

import itertools
import random

import pytest

from cuzk_jax.circuits import ConstraintSystem, SynthesisError, Unsatisfied
from cuzk_jax.circuits.gadgets import boolean as B
from cuzk_jax.circuits.gadgets import num as N
from cuzk_jax.circuits.gadgets.uint32 import MASK32, UInt32, add_many, ch, maj, xor3
from cuzk_jax.reference.constants import R


def _tamper(cs, aux_index, delta=1):
    """A copy of the system's witness with one private value changed; returns the R1CS check's exception."""
    r1cs, w = cs.to_r1cs(), cs.witness()
    col = r1cs.num_inputs + aux_index
    bad = w.with_value(col, w.z[col] + delta)
    with pytest.raises(Unsatisfied) as e:
        r1cs.check(bad)
    return e.value


# ---------------------------------------------------------------------------------------------------------------
# Boolean
# ---------------------------------------------------------------------------------------------------------------

# a literal is a constant or one of three shared variables, possibly negated
LITERALS = [("c", 0), ("c", 1)] + [("v", i, neg) for i in range(3) for neg in (False, True)]


def _lit(spec, bits, xs):
    if spec[0] == "c":
        return B.constant(spec[1]), spec[1]
    _, i, neg = spec
    return (B.not_(bits[i]) if neg else bits[i]), xs[i] ^ neg


OPS2 = {"and": (B.and_, lambda a, b: a & b), "or": (B.or_, lambda a, b: a | b), "xor": (B.xor, lambda a, b: a ^ b)}
OPS3 = {"ch": (B.ch, lambda e, f, g: f if e else g), "maj": (B.maj, lambda a, b, c: int(a + b + c >= 2)),
        "xor3": (B.xor3, lambda a, b, c: a ^ b ^ c)}


@pytest.mark.parametrize("xs", list(itertools.product((0, 1), repeat=3)))
def test_boolean_truth_tables(xs):
    cs = ConstraintSystem("full")
    bits = [B.alloc_bit(cs, x) for x in xs]
    count = 0
    for name, (gadget, truth) in OPS2.items():
        for la, lb in itertools.product(LITERALS, repeat=2):
            (a, va), (b, vb) = _lit(la, bits, xs), _lit(lb, bits, xs)
            out = gadget(cs, a, b)
            assert out.value == truth(va, vb), (name, la, lb)
            count += 1
    for name, (gadget, truth) in OPS3.items():
        for specs in itertools.product(LITERALS, repeat=3):
            lits = [_lit(s, bits, xs) for s in specs]
            out = gadget(cs, *[lit[0] for lit in lits])
            assert out.value == truth(*[lit[1] for lit in lits]), (name, specs)
            count += 1
    assert B.not_(bits[0]).value == 1 - xs[0]
    cs.check()
    # the same code in structure mode emits the same constraints
    s = ConstraintSystem("structure")
    sbits = [B.alloc_bit(s, None) for _ in xs]
    for _, (gadget, _) in OPS2.items():
        for la, lb in itertools.product(LITERALS, repeat=2):
            gadget(s, _lit(la, sbits, xs)[0], _lit(lb, sbits, xs)[0])
    for _, (gadget, _) in OPS3.items():
        for specs in itertools.product(LITERALS, repeat=3):
            gadget(s, *[_lit(sp, sbits, xs)[0] for sp in specs])
    assert s.to_r1cs().digest() == cs.to_r1cs().digest()


def test_constants_fold_to_no_constraints():
    cs = ConstraintSystem("full")
    for a, b, c in itertools.product((0, 1), repeat=3):
        ka, kb, kc = B.constant(a), B.constant(b), B.constant(c)
        assert B.xor(cs, ka, kb).value == a ^ b and B.and_(cs, ka, kb).value == a & b
        assert B.ch(cs, ka, kb, kc).value == (b if a else c)
        assert B.maj(cs, ka, kb, kc).value == int(a + b + c >= 2)
    assert cs.num_constraints == 0


@pytest.mark.parametrize("gadget", ["xor", "and", "ch", "maj", "bit"])
def test_boolean_negative_twin(gadget):
    cs = ConstraintSystem("full")
    a, b, c = (B.alloc_bit(cs, v) for v in (1, 0, 1))
    if gadget == "bit":
        with cs.namespace("bits"):
            B.alloc_bit(cs, 1, "b")
    else:
        with cs.namespace("bits"):
            {"xor": lambda: B.xor(cs, a, b, "xor"), "and": lambda: B.and_(cs, a, c, "and"),
             "ch": lambda: B.ch(cs, a, b, c, "ch"), "maj": lambda: B.maj(cs, a, b, c, "maj")}[gadget]()
    cs.check()
    err = _tamper(cs, cs.num_aux - 1)  # the gadget's output (or the new bit: 2 is not boolean)
    assert err.name.startswith("bits/")


def test_alloc_bit_rejects_non_bits():
    cs = ConstraintSystem("full")
    with pytest.raises(ValueError, match="0 or 1"):
        B.alloc_bit(cs, 2)
    with pytest.raises(ValueError, match="0 or 1"):
        B.alloc_bits(cs, [0, 3], 2)


# ---------------------------------------------------------------------------------------------------------------
# UInt32
# ---------------------------------------------------------------------------------------------------------------

WORDS = [0, 1, MASK32, 0x80000000, 0x7FFFFFFF, 0xDEADBEEF]


def _rotr(x, n):
    return ((x >> n) | (x << (32 - n))) & MASK32


def test_uint32_ops_match_python():
    rng = random.Random(11)
    vals = WORDS + [rng.getrandbits(32) for _ in range(4)]
    cs = ConstraintSystem("full")
    words = [UInt32.alloc(cs, v) for v in vals]
    for i in range(len(vals)):
        x, y, z = words[i], words[(i + 1) % len(vals)], words[(i + 3) % len(vals)]
        vx, vy, vz = vals[i], vals[(i + 1) % len(vals)], vals[(i + 3) % len(vals)]
        for n in (0, 1, 7, 13, 31):
            assert x.rotr(n).value == _rotr(vx, n) and x.shr(n).value == vx >> n
            assert B.pack_value(x.rotr(n).bits) == _rotr(vx, n)
        assert x.xor(cs, y).value == vx ^ vy
        assert xor3(cs, x.rotr(2), y, z.shr(3)).value == _rotr(vx, 2) ^ vy ^ (vz >> 3)
        assert ch(cs, x, y, z).value == (vx & vy) ^ (~vx & vz & MASK32)
        assert maj(cs, x, y, z).value == (vx & vy) ^ (vx & vz) ^ (vy & vz)
        for k in range(1, 8):
            ops = [words[(i + j) % len(vals)] for j in range(k)]
            want = sum(vals[(i + j) % len(vals)] for j in range(k)) & MASK32
            out = add_many(cs, ops)
            assert out.value == want and B.pack_value(out.bits) == want
        # constant operands fold into the packing constraint
        assert add_many(cs, [x, UInt32.constant(0xFFFFFFF0), y]).value == (vx + 0xFFFFFFF0 + vy) & MASK32
    for w in words:  # bits agree with values throughout
        assert B.pack_value(w.bits) == w.value
    assert UInt32.from_bits_be(words[5].to_bits_be()).value == vals[5]
    cs.check()


def test_uint32_constants_fold():
    cs = ConstraintSystem("full")
    a, b = UInt32.constant(0xFFFFFFFF), UInt32.constant(5)
    assert add_many(cs, [a, b, b]).value == 9
    assert a.xor(cs, b).value == 0xFFFFFFFA
    assert cs.num_constraints == 0


def test_add_many_cost_and_negative_twin():
    cs = ConstraintSystem("full")
    xs = [UInt32.alloc(cs, v) for v in (MASK32, MASK32, MASK32)]
    before = cs.num_constraints
    with cs.namespace("sum"):
        out = add_many(cs, xs)
    assert out.value == (3 * MASK32) & MASK32
    assert cs.num_constraints - before == 34 + 1  # 34-bit sum: booleanity of each bit + 1 packing constraint
    cs.check()
    err = _tamper(cs, cs.num_aux - 34)  # lowest sum bit
    assert err.name.startswith("sum/")


# ---------------------------------------------------------------------------------------------------------------
# Field elements
# ---------------------------------------------------------------------------------------------------------------

FR_EDGE = [0, 1, 2, R - 1, R - 2, (1 << 254) - 1, 1 << 128]


def test_num_arithmetic_and_bits():
    rng = random.Random(5)
    vals = FR_EDGE + [rng.randrange(R) for _ in range(4)]
    cs = ConstraintSystem("full")
    nums = [N.alloc_num(cs, v) for v in vals]
    for i, (a, va) in enumerate(zip(nums, vals)):
        b, vb = nums[(i + 1) % len(nums)], vals[(i + 1) % len(vals)]
        assert N.mul(cs, a, b).value == va * vb % R
        assert N.square(cs, a).value == va * va % R
        assert (a + b - 3 * a).value == (vb - 2 * va) % R
        assert N.mul(cs, a, N.Num.constant(7)).value == 7 * va % R  # constant operand: no constraint
        if va < 1 << 254:
            bits = N.to_bits_le(cs, a, 254)
            assert [x.value for x in bits] == [(va >> k) & 1 for k in range(254)]
            assert N.from_bits_le(bits).value == va
        N.enforce_equal(cs, a + b, b + a)
    cs.check()
    with pytest.raises(SynthesisError, match="fit"):
        N.to_bits_le(cs, N.Num.constant(8), 3)
    with pytest.raises(ValueError, match="nbits"):
        N.to_bits_le(cs, nums[0], 255)


def test_to_bits_negative_twin():
    cs = ConstraintSystem("full")
    x = N.alloc_num(cs, 0b1011)
    with cs.namespace("decompose"):
        N.to_bits_le(cs, x, 4)
    cs.check()
    assert _tamper(cs, 0, 16).name == "decompose/bits/pack"  # x + 16 no longer matches its bits


@pytest.mark.parametrize("arity", [2, 4, 8])
def test_insert_every_position(arity):
    k = arity.bit_length() - 1
    rng = random.Random(arity)
    for index in range(arity):
        cs = ConstraintSystem("full")
        cur_v = rng.randrange(R)
        sib_v = [rng.randrange(R) for _ in range(arity - 1)]
        cur = N.alloc_num(cs, cur_v)
        sibs = [N.alloc_num(cs, v) for v in sib_v]
        bits = [B.alloc_bit(cs, (index >> j) & 1) for j in range(k)]
        with cs.namespace("insert"):
            kids = N.insert(cs, cur, sibs, bits)
        assert [c.value for c in kids] == sib_v[:index] + [cur_v] + sib_v[index:]
        cs.check()
        if arity == 8 and index == 5:
            assert cs.num_constraints - 3 == 19  # 3 booleanity constraints of the index bits
            assert _tamper(cs, cs.num_aux - 1).name.startswith("insert/")
    sel = N.one_hot(ConstraintSystem("full"), [B.constant(1), B.constant(0), B.constant(1)])
    assert [s.value for s in sel] == [int(j == 5) for j in range(8)]
    with pytest.raises(ValueError, match="siblings"):
        N.insert(ConstraintSystem("full"), N.Num.constant(1), [N.Num.constant(2)] * 2, [B.TRUE, B.FALSE])


def test_conditional_swap():
    for bit in (0, 1):
        cs = ConstraintSystem("full")
        a, b = N.alloc_num(cs, 10), N.alloc_num(cs, 20)
        s = B.alloc_bit(cs, bit)
        left, right = N.conditional_swap(cs, a, b, s)
        assert (left.value, right.value) == ((20, 10) if bit else (10, 20))
        cs.check()
        _tamper(cs, 3)  # the swapped output
