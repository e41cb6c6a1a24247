"""Whole field operations as single PTX inline-assembly blocks with 32-bit carry chains (Triton on NVIDIA GPUs).

Why: the limb fields of :mod:`cuzk_jax.ops.pallas.limb_field` hold 32-bit words in uint64 registers, so every
carry step of a Montgomery product is several emulated 64-bit operations (add, shift, mask), far below the GPU's
integer rate (BUILD.md). GPU provers (sppark's ``mont_t``, ICICLE) instead write the product
as one PTX chain of ``mad.lo.cc`` / ``madc.hi.cc`` instructions on 32-bit registers, where the carry flag does the
carry propagation for free. This module generates that code.

Algorithm: CIOS Montgomery multiplication (Koc, Acar and Kaliski, "Analyzing and comparing Montgomery
multiplication algorithms", IEEE Micro 1996), word size ``W = 2^32``, ``n`` words, ``R = W^n``. Each of the ``n``
outer iterations adds ``a * b_i`` and ``m * p`` with ``m = t_0 * (-p^-1) mod W`` into an ``(n+1)``-word
accumulator, then drops the zero low word by renaming registers (no instruction). The accumulator is held in two
parts, the products of the even-indexed limbs in one and of the odd-indexed limbs in the other, so each half step
is two independent carry chains (:func:`mont_mul_asm`). With ``a < p`` and ``t < 2p`` the accumulator stays below
``2 p W < W^(n+1)`` (both moduli here leave spare top bits: ``p < 2^381``, ``r < 2^255``), so no carry leaves word
``n``; the result ``t < 2p`` gets one conditional subtraction (a borrow chain and ``selp``). ``4 n + 5``
instructions per outer iteration.

Representation: operands and results are ``n`` uint32 words, little-endian, in Montgomery form and fully reduced
(``< p``) -- the values of :mod:`cuzk_jax.ops.field`, as uint32 (not uint64) arrays.

The generated text is plain data: :func:`emulate` runs it with Python integers (the instruction subset used here:
``mov``, ``add``/``addc``, ``sub``/``subc``, ``mad``/``madc`` ``.lo``/``.hi``, ``mul.lo``, ``and``, ``setp.ne``,
``selp``; carry-flag semantics of the PTX ISA), which is how the CPU tests check the exact text sent to the GPU
against Python's modular arithmetic.
"""

from __future__ import annotations

import functools
import re

import jax.numpy as jnp

from cuzk_jax.ops import field as ops_field
from cuzk_jax.ops.pallas.limb_field import LimbFq2, LimbLists, product_loop

U32 = jnp.uint32
MASK = (1 << 32) - 1


# ---------------------------------------------------------------------------------------------------------------
# Code generation
# ---------------------------------------------------------------------------------------------------------------


def _block(decls: list[str], body: list[str]) -> str:
    """A braced PTX scope (its ``.reg`` names cannot clash with the compiler's or another block's)."""
    return "{\n" + "".join(f"  {d};\n" for d in decls) + "".join(f"  {ins};\n" for ins in body) + "}"


def _consts(p_limbs) -> list[str]:
    return [f"mov.u32 q{j}, {int(v)}" for j, v in enumerate(p_limbs)]


def _cond_sub(vals: list[str], outs: list[str], n: int) -> list[str]:
    """``outs = vals - p if vals >= p else vals`` (``vals < 2p``): borrow chain into d, borrow mask, selp."""
    body = [f"sub.cc.u32 d0, {vals[0]}, q0"]
    body += [f"subc.cc.u32 d{j}, {vals[j]}, q{j}" for j in range(1, n)]
    body += ["subc.u32 bw, d0, d0",  # 0 - borrow: all ones when vals < p
             "setp.ne.u32 pr, bw, 0"]
    body += [f"selp.b32 {outs[j]}, {vals[j]}, d{j}, pr" for j in range(n)]
    return body


def _mac_half(acc: list[str], xs: list[str], y: str, *, carry_in: bool = False, end: str = "top") -> list[str]:
    """``acc += sum_k xs[k] y W^(2k)``: the low and high halves of the products ``xs[k] y`` land on words ``2k``
    and ``2k + 1`` without overlapping, so the row is ONE carry chain (low, high, low, high, ...).
    ``carry_in``: the first instruction also adds the carry flag (set by the caller's instruction just before).
    ``end``: ``"top"`` -- ``acc`` has one more word than the products cover and the chain ends by adding its
    carry there; ``"none"`` -- the last high half takes no carry out (callers guarantee none); ``"carry"`` -- the
    last high half leaves its carry in the flag for the caller's next instruction."""
    if end not in ("top", "none", "carry"):
        raise ValueError(f"_mac_half: end must be top, none or carry, got {end!r}")
    first = "madc.lo.cc.u32" if carry_in else "mad.lo.cc.u32"
    last = len(xs) - 1
    body = []
    for k, x in enumerate(xs):
        body.append(f"{first if k == 0 else 'madc.lo.cc.u32'} {acc[2 * k]}, {x}, {y}, {acc[2 * k]}")
        hi = "madc.hi.u32" if (k == last and end == "none") else "madc.hi.cc.u32"
        body.append(f"{hi} {acc[2 * k + 1]}, {x}, {y}, {acc[2 * k + 1]}")
    if end == "top":
        body.append(f"addc.u32 {acc[2 * len(xs)]}, {acc[2 * len(xs)]}, 0")
    return body


@functools.lru_cache(maxsize=None)
def mont_mul_asm(p_limbs: tuple, pinv: int) -> str:
    """PTX for ``$0..$(n-1) = a * b / R mod p`` with ``a = $n..$(2n-1)``, ``b = $(2n)..$(3n-1)`` (module
    docstring): CIOS with two independent carry chains per half step.

    The CIOS accumulator is held as two aligned ``(n + 1)``-word parts, ``T = X + Y``: the products of the
    even-indexed limbs of ``a`` (and of ``p``) accumulate into ``X`` (words ``0..n-1``, carry into ``n``), those
    of the odd-indexed limbs into ``Y`` (words ``1..n``); each is a single chain of alternating low / high halves
    (:func:`_mac_half`). The two chains of a half step read and write disjoint registers, so the compiler can
    interleave them (each chain its own carry predicate); the textbook CIOS step's low-half and high-half chains
    depend on each other word by word (that form lost on the H200: bench/results/REMOVED_VARIANTS.md). Step
    ``i``: fold ``Y_0`` into ``X_0`` (its carry enters ``Y``'s chain at word 1, so ``Y_0`` is then zero by
    definition); ``X += a_even b_i``, ``Y += a_odd b_i``; ``m = X_0 (-1/p) mod W`` (word 0 of
    ``T``); ``X += p_even m`` (``X_0`` becomes 0), ``Y += p_odd m``; divide by ``W`` by renaming ``X = X_1..X_n, 0``
    and ``Y = Y_1..Y_n, 0`` (one ``mov``: ``Y_0``'s register still holds the folded word). Bounds as in CIOS:
    ``T < 2 p W < W^(n+1)`` before the division and each part is at most ``T``, so no chain carries out of word
    ``n``; at the end ``X + Y < 2p``: one add chain, then the conditional subtraction. (Splitting even and odd
    products for instruction-level parallelism is what GPU provers such as sppark's ``mont_t`` do; this schedule
    and its carry folding are this module's.) ``n`` must be even (12 for Fq, 8 for Fr)."""
    n = len(p_limbs)
    if n % 2:
        raise ValueError(f"the split product needs an even limb count, got {n}")
    a = [f"${n + j}" for j in range(n)]
    b = [f"${2 * n + j}" for j in range(n)]
    q = [f"q{j}" for j in range(n)]
    X = [f"x{k}" for k in range(n + 1)]
    Y = [f"y{k}" for k in range(n + 1)]
    body = _consts(p_limbs) + [f"mov.u32 {r}, 0" for r in X + Y]
    for i in range(n):
        if i:  # fold Y_0 into X_0; the carry goes to word 1, the first word of Y's chain
            body.append(f"add.cc.u32 {X[0]}, {X[0]}, {Y[0]}")
        body += _mac_half(Y[1:], a[1::2], b[i], carry_in=bool(i), end="none")
        body += _mac_half(X, a[0::2], b[i])
        body.append(f"mul.lo.u32 m, {X[0]}, {int(pinv)}")
        body += _mac_half(X, q[0::2], "m")
        body += _mac_half(Y[1:], q[1::2], "m", end="none")
        body.append(f"mov.u32 {Y[0]}, 0")  # Y_0 was folded into X_0: zero, and the new top word
        X, Y = X[1:] + X[:1], Y[1:] + Y[:1]
    R = [f"r{j}" for j in range(n)]
    body += _chain("add", R, X[:n], Y[:n])  # X + Y < 2p < W^n
    body += _cond_sub(R, [f"${j}" for j in range(n)], n)
    decls = [f".reg .u32 q<{n}>", f".reg .u32 x<{n + 1}>", f".reg .u32 y<{n + 1}>", f".reg .u32 r<{n}>",
             f".reg .u32 d<{n}>", ".reg .u32 m", ".reg .u32 bw", ".reg .pred pr"]
    return _block(decls, body)


@functools.lru_cache(maxsize=None)
def add_mod_asm(p_limbs: tuple) -> str:
    """PTX for ``$0..$(n-1) = a + b mod p`` (``a, b < p``; ``a + b < 2p < W^n`` for both moduli)."""
    n = len(p_limbs)
    body = _consts(p_limbs) + [f"add.cc.u32 s0, ${n}, ${2 * n}"]
    body += [f"addc.cc.u32 s{j}, ${n + j}, ${2 * n + j}" for j in range(1, n - 1)]
    body.append(f"addc.u32 s{n - 1}, ${2 * n - 1}, ${3 * n - 1}")
    body += _cond_sub([f"s{j}" for j in range(n)], [f"${j}" for j in range(n)], n)
    return _block([f".reg .u32 q<{n}>", f".reg .u32 s<{n}>", f".reg .u32 d<{n}>", ".reg .u32 bw", ".reg .pred pr"],
                  body)


@functools.lru_cache(maxsize=None)
def sub_mod_asm(p_limbs: tuple) -> str:
    """PTX for ``$0..$(n-1) = a - b mod p`` (``a, b < p``): borrow chain, then ``p AND borrow-mask`` added back."""
    n = len(p_limbs)
    body = _consts(p_limbs) + [f"sub.cc.u32 d0, ${n}, ${2 * n}"]
    body += [f"subc.cc.u32 d{j}, ${n + j}, ${2 * n + j}" for j in range(1, n)]
    body.append("subc.u32 bw, d0, d0")  # all ones when a < b
    body += [f"and.b32 e{j}, bw, q{j}" for j in range(n)]
    body.append("add.cc.u32 $0, d0, e0")
    body += [f"addc.cc.u32 ${j}, d{j}, e{j}" for j in range(1, n - 1)]
    body.append(f"addc.u32 ${n - 1}, d{n - 1}, e{n - 1}")
    return _block([f".reg .u32 q<{n}>", f".reg .u32 d<{n}>", f".reg .u32 e<{n}>", ".reg .u32 bw"], body)


def _wide_mul(x: list[str], y: list[str], acc: list[str], aux: list[str]) -> list[str]:
    """``acc (2n words) = x * y``, schoolbook rows with each row's products in two independent carry chains (like
    :func:`mont_mul_asm`'s half steps): the even-indexed limbs of ``x`` into ``acc`` (words ``i..i+n-1``, carry into
    ``i+n``), the odd-indexed ones into ``aux`` (words ``i+1..i+n``); both parts are at most the partial product
    ``< W^(n+i+1)``, so neither chain carries out of word ``i + n``. One ``2n``-word add chain joins them (``aux_0``
    stays zero)."""
    n = len(x)
    body = [f"mov.u32 {r}, 0" for r in acc + aux]
    for i in range(n):
        body += _mac_half(acc[i : i + n + 1], x[0::2], y[i])
        body += _mac_half(aux[i + 1 : i + n + 1], x[1::2], y[i], end="none")
    return body + _chain("add", acc[1:], acc[1:], aux[1:])


def _chain(op: str, d: list[str], a: list[str], b: list[str]) -> list[str]:
    """``d = a op b`` over ``len(d)`` words (``op`` ``add`` or ``sub``) as one carry / borrow chain, the last word
    without a carry out (callers guarantee none)."""
    k = len(d)
    body = [f"{op}.cc.u32 {d[0]}, {a[0]}, {b[0]}"]
    body += [f"{op}c.cc.u32 {d[j]}, {a[j]}, {b[j]}" for j in range(1, k - 1)]
    body.append(f"{op}c.u32 {d[k - 1]}, {a[k - 1]}, {b[k - 1]}")
    return body


def _redc(X: list[str], Y: list[str], outs: list[str], n: int, pinv: int) -> list[str]:
    """``outs = X / R mod p`` for a ``2n``-word ``X < p R`` (Montgomery reduction, word by word; ``Y``: a ``2n``-word
    aux, zeroed here): iteration ``i`` adds ``m p W^i`` with ``m = X_i (-1/p) mod W`` in two independent chains --
    the even-indexed limbs of ``p`` into ``X`` (words ``i..i+n-1``; the carry out of word ``i + n`` goes to a small
    register ``k`` that the next iteration adds into word ``i + n + 1``), the odd-indexed ones into ``Y`` (words
    ``i+1..i+n``; ``Y`` only gathers ``m_j p_odd W^j`` terms and fold carries, so it stays below ``W^(i+n+1)`` and
    its chain carries out of nothing). Iteration ``i`` first folds ``Y_i`` into ``X_i`` (its carry enters ``Y``'s
    chain at word ``i + 1``), so ``m`` sees the whole word ``i``. The result ``(X + Y)_n.. < 2p``: one ``n``-word
    add chain, then one conditional subtraction."""
    body = [f"mov.u32 {r}, 0" for r in Y] + ["mov.u32 k, 0"]
    for i in range(n):
        if i:
            body.append(f"add.cc.u32 {X[i]}, {X[i]}, {Y[i]}")  # the carry waits in CC.CF for Y's chain
        body.append(f"mul.lo.u32 m, {X[i]}, {int(pinv)}")  # (mul.lo leaves the carry flag alone)
        body += _mac_half(Y[i + 1 : i + n + 1], [f"q{j}" for j in range(1, n, 2)], "m", carry_in=bool(i), end="none")
        body += _mac_half(X[i : i + n], [f"q{j}" for j in range(0, n, 2)], "m", end="carry")
        body += [f"addc.cc.u32 {X[i + n]}, {X[i + n]}, k", "addc.u32 k, z, z"]
    R = [f"r{j}" for j in range(n)]
    return body + _chain("add", R, X[n : 2 * n], Y[n : 2 * n]) + _cond_sub(R, outs, n)


@functools.lru_cache(maxsize=None)
def fq2_mul_asm(p_limbs: tuple, pinv: int) -> str:
    """PTX for one Fq2 product ``(c0, c1) = (a0 + a1 u)(b0 + b1 u)``, ``u^2 = -1``, Karatsuba with lazy reduction:
    three ``2n``-word products ``v0 = a0 b0``, ``v1 = a1 b1``, ``v2 = (a0 + a1)(b0 + b1)`` (the sums unreduced,
    ``< 2p``), then ``c0 = REDC(v0 + p^2 - v1)`` and ``c1 = REDC(v2 - v0 - v1)`` -- two Montgomery reductions
    instead of three (both arguments are in ``[0, 2 p^2)``, below ``p R``, so each reduction ends below ``2p``).
    Operands: ``c0 = $0..``, ``c1 = $n..``, then ``a0, a1, b0, b1`` (``n`` words each, all ``< p``).

    Both stages split the even- and odd-indexed limbs into two independent carry chains: each schoolbook row of
    the products (:func:`_wide_mul`) and each iteration of the reductions (:func:`_redc`). Chosen by an H200 A/B
    of the G2 MSM against single-chain rows ("rows") and split products with single-chain reductions ("split"),
    which it beat at 2^20 and 2^24 points (bench/results/REMOVED_VARIANTS.md, session 24)."""
    n = len(p_limbs)
    op = lambda k: [f"${k * n + j}" for j in range(n)]  # noqa: E731
    c0, c1, a0, a1, b0, b1 = (op(k) for k in range(6))
    p = 0
    for j, v in enumerate(p_limbs):
        p |= int(v) << (32 * j)
    p2 = [str(((p * p) >> (32 * j)) & MASK) for j in range(2 * n)]
    sa, sb = [f"sa{j}" for j in range(n)], [f"sb{j}" for j in range(n)]
    v0, v1, v2 = ([f"{nm}{j}" for j in range(2 * n)] for nm in ("v", "w", "x"))
    u, g = [f"u{j}" for j in range(2 * n)], [f"g{j}" for j in range(2 * n)]
    body = _consts(p_limbs) + ["mov.u32 z, 0"]
    body += _chain("add", sa, a0, a1) + _chain("add", sb, b0, b1)  # < 2p < W^n: no carry out
    body += _wide_mul(a0, b0, v0, u) + _wide_mul(a1, b1, v1, u) + _wide_mul(sa, sb, v2, u)
    body += _chain("sub", v2, v2, v0) + _chain("sub", v2, v2, v1)  # a0 b1 + a1 b0 >= 0
    body += _chain("add", v0, v0, p2) + _chain("sub", v0, v0, v1)  # v0 + p^2 - v1 > 0
    body += _redc(v0, g, c0, n, pinv) + _redc(v2, g, c1, n, pinv)
    decls = [f".reg .u32 q<{n}>", f".reg .u32 sa<{n}>", f".reg .u32 sb<{n}>", f".reg .u32 v<{2 * n}>",
             f".reg .u32 w<{2 * n}>", f".reg .u32 x<{2 * n}>", f".reg .u32 u<{2 * n}>", f".reg .u32 g<{2 * n}>",
             f".reg .u32 r<{n}>", f".reg .u32 d<{n}>", ".reg .u32 m", ".reg .u32 k", ".reg .u32 z", ".reg .u32 bw",
             ".reg .pred pr"]
    return _block(decls, body)


# ---------------------------------------------------------------------------------------------------------------
# Reference emulator (tests): run the generated text with Python integers
# ---------------------------------------------------------------------------------------------------------------

_INS = re.compile(r"^([a-z.0-9]+)\s+(.*)$")


def emulate(asm: str, operands: list[int], n_out: int) -> list[int]:
    """Run ``asm`` (text from this module) on 32-bit ``operands`` (the inputs ``$n_out..``); return the outputs.

    Semantics follow the PTX ISA: ``.cc`` writes the carry flag CC.CF (the carry of an add, the borrow of a sub),
    ``addc``/``madc`` add it, ``subc`` subtracts it; ``mad.lo``/``mad.hi`` add the low/high word of the 64-bit
    product. Registers must be written before they are read (an unset register raises ``KeyError``)."""
    reg: dict[str, int] = {f"${n_out + i}": int(v) & MASK for i, v in enumerate(operands)}
    cf = None  # unset until a .cc instruction writes it

    def val(x: str) -> int:
        return int(x) & MASK if re.fullmatch(r"-?[0-9]+", x) else reg[x]  # immediates are decimal

    for line in asm.splitlines():
        line = line.strip().rstrip(";")
        if line in ("{", "}") or line.startswith(".reg"):
            continue
        m = _INS.match(line)
        if not m:
            raise ValueError(f"unparsed line {line!r}")
        op, args = m.group(1), [s.strip() for s in m.group(2).split(",")]
        parts = op.split(".")
        name, mods = parts[0], parts[1:]
        d, src = args[0], args[1:]
        if name == "mov":
            reg[d] = val(src[0])
            continue
        if name == "setp":
            assert mods[0] == "ne"
            reg[d] = int(val(src[0]) != val(src[1]))
            continue
        if name == "selp":
            reg[d] = val(src[0]) if reg[src[2]] else val(src[1])
            continue
        if name == "and":
            reg[d] = val(src[0]) & val(src[1])
            continue
        if name == "mul":
            assert mods[0] == "lo"
            reg[d] = (val(src[0]) * val(src[1])) & MASK
            continue
        carry_in = 0
        if name in ("addc", "subc", "madc"):
            if cf is None:
                raise ValueError(f"{line!r} reads the carry flag before any .cc instruction set it")
            carry_in = cf
        if name in ("add", "addc"):
            s = val(src[0]) + val(src[1]) + carry_in
        elif name in ("sub", "subc"):
            s = val(src[0]) - val(src[1]) - carry_in
        elif name in ("mad", "madc"):
            prod = val(src[0]) * val(src[1])
            half = prod & MASK if mods[0] == "lo" else prod >> 32
            s = half + val(src[2]) + carry_in
        else:
            raise ValueError(f"unknown instruction {op!r}")
        reg[d] = s & MASK
        if "cc" in mods:
            cf = int(s < 0) if name in ("sub", "subc") else int(s >> 32)
    return [reg[f"${j}"] for j in range(n_out)]


# ---------------------------------------------------------------------------------------------------------------
# The field object for kernels
# ---------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _block_primitive():
    """A multiple-result inline-assembly primitive for Pallas-Triton kernels.

    ``jax.experimental.pallas.triton.elementwise_inline_asm`` declares several results but its Triton lowering
    returns the op's result list as ONE value (JAX 0.10: "has multiple results, but 12 outvars do not match 1
    outvals"), so a block with ``n`` outputs needs its own primitive: same Triton op
    (``tt.elementwise_inline_asm``, pure, one element per instance), every result an i32 of the operands' shape.
    Registered on first use (private Pallas lowering registry; only GPU kernels use it)."""
    from jax._src import core as jax_core
    from jax._src.lib.triton import dialect as tt_dialect
    from jax._src.pallas.triton import lowering as tl

    prim = jax_core.Primitive("cuzk_ptx_block")
    prim.multiple_results = True

    @prim.def_impl
    def _impl(*args, asm, n_out):
        raise ValueError("PTX field blocks (ops/pallas/ptx_field.py) run only inside Pallas kernels compiled by "
                         "Triton for an NVIDIA GPU; interpreted or outside a kernel use the jnp limb fields "
                         "(the Pallas kernels do that under interpret=True)")

    @prim.def_abstract_eval
    def _abstract(*avals, asm, n_out):
        del asm
        return [jax_core.ShapedArray(avals[0].shape, U32)] * n_out

    @tl.register_lowering(prim)
    def _lower(ctx, *args, asm, n_out):
        del ctx
        cons = ",".join(["=r"] * n_out + ["r"] * len(args))
        op = tt_dialect.ElementwiseInlineAsmOp([args[0].type] * n_out, asm, constraints=cons, pure=True,
                                               packed_element=1, args=list(args))
        return list(op.results)

    return prim


def _asm(text: str, n: int, *xs):
    """Run a generated block on uint32 limb lists ``xs`` (each ``n`` arrays of one shape); ``n`` uint32 results."""
    args = [jnp.asarray(v, U32) for x in xs for v in x]
    shape = jnp.broadcast_shapes(*[v.shape for v in args])
    args = [jnp.broadcast_to(v, shape) for v in args]
    return list(_block_primitive().bind(*args, asm=text, n_out=n))


class PtxField(LimbLists):
    """A prime field on limb lists of **uint32** arrays whose mul / add / sub are single PTX blocks (GPU kernels).

    Elements: lists of ``L`` uint32 arrays of one batch shape, little-endian 32-bit words, Montgomery form, fully
    reduced -- the values of :class:`~cuzk_jax.ops.pallas.limb_field.LimbField` but 32 bits wide, so the kernel
    loads and stores limb rows without widening. The interface is LimbField's (shared parts in
    :class:`~cuzk_jax.ops.pallas.limb_field.LimbLists`; the curve formulas of
    :mod:`cuzk_jax.ops.curve` run unchanged). ``mul_loop``: ``mul_many`` sends its products through ONE product
    block in a ``fori_loop`` (:func:`~cuzk_jax.ops.pallas.limb_field.product_loop`; smaller machine code), else
    products are computed in turn. Only Triton on NVIDIA GPUs compiles inline PTX; there is no interpreter form.
    """

    dtype = U32

    def __init__(self, base: ops_field.PrimeField, *, mul_loop: bool = False):
        self.base = base
        self.name = base.name
        self.limbs = base.limbs
        self.p_limbs = tuple(int(v) for v in base.p_limbs)
        self.pinv = int(base.pinv)
        self.one_limbs = tuple(ops_field.int_to_limbs(base.r_mod, base.limbs))
        self.mul_loop = mul_loop

    def __repr__(self) -> str:
        return f"PtxField({self.name}, mul_loop={self.mul_loop})"

    def add(self, a, b):
        return _asm(add_mod_asm(self.p_limbs), self.limbs, a, b)

    def sub(self, a, b):
        return _asm(sub_mod_asm(self.p_limbs), self.limbs, a, b)

    def neg(self, a):
        return self.sub(self.zeros_like(a), a)

    def double(self, a):
        return self.add(a, a)

    def mul(self, a, b):
        return _asm(mont_mul_asm(self.p_limbs, self.pinv), self.limbs, a, b)

    def mul_many(self, pairs):
        pairs = list(pairs)
        if self.mul_loop and len(pairs) > 1:
            return product_loop(self, pairs, self.mul)
        return [self.mul(x, y) for x, y in pairs]


class PtxFq2(LimbFq2):
    """Fq2 on :class:`PtxField` pairs whose product is ONE block, :func:`fq2_mul_asm` (Karatsuba with lazy
    reduction, even / odd limbs in two carry chains in its products and reductions: ~2,040 instructions against
    ~2,380 for three product blocks and five sum / difference blocks). Everything else is
    :class:`~cuzk_jax.ops.pallas.limb_field.LimbFq2`'s."""

    def __repr__(self) -> str:
        return f"PtxFq2({self.base!r})"

    def _mul1(self, a, b):
        f = self.base
        out = _asm(fq2_mul_asm(f.p_limbs, f.pinv), 2 * f.limbs, a[0], a[1], b[0], b[1])
        return (out[: f.limbs], out[f.limbs :])

    def mul_many(self, pairs):
        pairs = list(pairs)
        if self.base.mul_loop and len(pairs) > 1:
            return product_loop(self, pairs, self._mul1)
        return [self._mul1(a, b) for a, b in pairs]


# kernel fields: the MSM kernels' (one product block per formula round through a loop; G2: one block per Fq2
# product) and the NTT kernel's (products in turn)
fq_loop = PtxField(ops_field.fq, mul_loop=True)
fq2_lazy_loop = PtxFq2(fq_loop)
fr = PtxField(ops_field.fr)
