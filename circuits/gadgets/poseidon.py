"""Poseidon hash as constraints (x^5 S-box over BLS12-381 Fr), matching :mod:`cuzk_jax.circuits.poseidon`.

Every S-box ``y = x^5`` costs 3 constraints: ``x * x = x2``, ``x2 * x2 = x4``, ``x4 * x = y``, where ``x`` is a
linear combination (the round constants and the MDS mixing are linear, hence free). An S-box whose input is a
constant (the capacity lane in the first round) is folded. Constraints per hash: ``3 * (t * R_F + R_P - 1)`` --
arity 2 (t = 3): 240, arity 8 (t = 9): 405.

Symbolic program. The linear layers are the same for every hash of a width, so they are simulated once per width
(:func:`program`, cached): each S-box input becomes a fixed linear combination of ONE, the input lanes and the
outputs of earlier S-boxes. Emitting a hash then only maps those local ids to variables -- no big-integer linear
algebra per hash. Lanes that skip the S-box in partial rounds accumulate terms, so late partial-round S-box inputs
have up to ``t + R_P`` terms (more nonzeros, not more constraints; nonzeros are cheap for the evaluator).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from cuzk_jax.reference.constants import R

from .. import poseidon as native
from ..cs import ONE_INDEX, ConstraintSystem, LinearCombination
from .num import Num

CONST = -1  # local id of ONE in a program; input lane i is -2 - i; S-box outputs are 0, 1, 2, ...


@dataclass(frozen=True)
class Program:
    t: int
    sbox_inputs: tuple  # per S-box: tuple of (local id, coeff)
    outputs: tuple  # per lane: tuple of (local id, coeff)


def _lane(i: int) -> int:
    return -2 - i


@functools.lru_cache(maxsize=None)
def program(t: int, capacity: int = 0) -> Program:
    """The symbolic Poseidon permutation of width ``t`` with lane 0 fixed to the constant ``capacity``."""
    prm = native.params(t)
    state = [{CONST: capacity % R} if capacity % R else {}] + [{_lane(i): 1} for i in range(1, t)]
    sboxes = []
    for r in range(prm.num_rounds):
        rc = prm.round_constants[r]
        for i in range(t):
            if rc[i]:
                d = state[i]
                s = (d.get(CONST, 0) + rc[i]) % R
                if s:
                    d[CONST] = s
                else:
                    d.pop(CONST, None)
        lanes = range(t) if prm.is_full_round(r) else (0,)
        for i in lanes:
            x = state[i]
            if all(k == CONST for k in x):  # constant input: fold the S-box
                c = pow(x.get(CONST, 0), native.ALPHA, R)
                state[i] = {CONST: c} if c else {}
            else:
                state[i] = {len(sboxes): 1}
                sboxes.append(tuple(x.items()))
        new = []
        for row in prm.mds:
            acc: dict = {}
            for mij, lane in zip(row, state):
                for k, v in lane.items():
                    acc[k] = (acc.get(k, 0) + mij * v) % R
            new.append({k: v for k, v in acc.items() if v})
        state = new
    return Program(t=t, sbox_inputs=tuple(sboxes), outputs=tuple(tuple(s.items()) for s in state))


def permutation_lanes(cs: ConstraintSystem, inputs: list, capacity: int = 0, label: str = "poseidon") -> list:
    """Run the width ``len(inputs) + 1`` permutation on ``[capacity, *inputs]`` (inputs are :class:`Num`);
    returns all ``t`` output lanes as Nums."""
    t = len(inputs) + 1
    prog = program(t, capacity)
    keep, has_values = cs.keep, cs.has_values
    lane_terms = [None] + [list(x.lc.terms.items()) for x in inputs]
    lane_vals = [None] + [x.value for x in inputs]
    if cs.batched and not keep:
        return _permutation_batched(cs, prog, capacity, lane_terms, lane_vals)
    out_var: list[int] = []
    out_val: list = []
    ONE = ONE_INDEX
    for spec in prog.sbox_inputs:
        terms = [] if keep else None
        value = 0 if has_values else None
        for k, c in spec:
            if k >= 0:
                if keep:
                    terms.append((out_var[k], c))
                if has_values:
                    value += c * out_val[k]
            elif k == CONST:
                if keep:
                    terms.append((ONE, c))
                if has_values:
                    value += c
            else:
                lane = -2 - k
                if keep:
                    terms.extend([(v, w * c % R) for v, w in lane_terms[lane]] if c != 1 else lane_terms[lane])
                if has_values:
                    value += c * lane_vals[lane]
        if has_values:
            value %= R
            x2 = value * value % R
            x4 = x2 * x2 % R
            y = x4 * value % R
            v2, v4, v5 = cs.alloc_raw(x2), cs.alloc_raw(x4), cs.alloc_raw(y)
            out_val.append(y)
        else:
            v2, v4, v5 = cs.alloc_raw(None), cs.alloc_raw(None), cs.alloc_raw(None)
        if keep:
            cs.enforce_raw(terms, terms, [(v2, 1)], label + "/x2")
            cs.enforce_raw([(v2, 1)], [(v2, 1)], [(v4, 1)], label + "/x4")
            cs.enforce_raw([(v4, 1)], terms, [(v5, 1)], label + "/x5")
        else:
            cs.num_constraints += 3
        out_var.append(v5)
    lanes = []
    for spec in prog.outputs:
        d: dict = {}
        value = 0 if has_values else None
        for k, c in spec:
            if k >= 0:
                d[out_var[k]] = c
                if has_values:
                    value += c * out_val[k]
            elif k == CONST:
                d[ONE] = c
                if has_values:
                    value += c
            else:  # an input lane reaching the output untouched (impossible with R_F >= 2); kept for generality
                lane = -2 - k
                for v, w in lane_terms[lane]:
                    d[v] = (d.get(v, 0) + w * c) % R
                if has_values:
                    value += c * lane_vals[lane]
        lanes.append(Num(LinearCombination({k: v for k, v in d.items() if v}), None if value is None else value % R))
    return lanes


def poseidon_hash(cs: ConstraintSystem, inputs: list, label: str = "poseidon") -> Num:
    """``permute([0, *inputs])[0]`` as constraints; equals :func:`cuzk_jax.circuits.poseidon.hash`."""
    if not inputs:
        raise ValueError("poseidon_hash: need at least one input")
    return permutation_lanes(cs, list(inputs), 0, label)[0]


def constraints_per_hash(arity: int) -> int:
    return 3 * len(program(arity + 1).sbox_inputs)


# -- batched witness (vector_witness.BatchCS) ----------------------------------------------------------------------


def _mat_mul(a: list, b: list) -> list:
    return [[sum(x * y for x, y in zip(row, col)) % R for col in zip(*b)] for row in a]


def _mat_vec(a: list, v) -> list:
    return [sum(x * y for x, y in zip(row, v)) % R for row in a]


@functools.lru_cache(maxsize=None)
def _rounds(t: int, capacity: int) -> dict:
    """The permutation of width ``t`` in the form :func:`_permutation_values` evaluates (object arrays of Python
    ints): the MDS ``M = [[m00, w^T], [v, Mh]]`` and round constants, per round the lanes whose S-box is a wire
    (the capacity lane's first one is constant and folded, as in :func:`program`), and for partial round ``k`` the
    vectors ``H_k = (Mh^k)^T w``, ``E_k = Mh^-k c_k[1:]``, ``G_k = Mh^-(k+1) v`` of the basis in which the lanes that
    skip the S-box stand still (``state[1:] = Mh^k u_k``, ``u_k+1 = u_k + E_k + G_k y_k``; the constants ``E_k``
    folded into ``K_k`` and ``C``, see below), and ``Mh^R_P``."""
    prm = native.params(t)
    M = [list(row) for row in prm.mds]
    half, rp = prm.r_f // 2, prm.r_p
    w, v = M[0][1:], [M[i][0] for i in range(1, t)]
    mh = [row[1:] for row in M[1:]]
    mh_inv = native.mat_inv(mh)
    p = pi = [[int(i == j) for j in range(t - 1)] for i in range(t - 1)]  # Mh^k, Mh^-k
    H, E, G = [], [], []
    for k in range(rp):
        H.append([sum(p[i][j] * w[i] for i in range(t - 1)) % R for j in range(t - 1)])
        E.append(_mat_vec(pi, prm.round_constants[half + k][1:]))
        pi = _mat_mul(mh_inv, pi)
        G.append(_mat_vec(pi, v))
        p = _mat_mul(mh, p)
    # u_k = w_k + C_k with C_k = E_0 + ... + E_k-1: the lanes w_k+1 = w_k + G_k y_k carry no constants, and
    # state[0] = m00 y_k + H_k . w_k + K_k with K_k = H_k . (C_k + E_k)
    K, C = [], [0] * (t - 1)
    for k in range(rp):
        C = [(c + e) % R for c, e in zip(C, E[k])]
        K.append(sum(h * c for h, c in zip(H[k], C)) % R)
    const = [True] + [False] * (t - 1)  # lanes with a constant value (the capacity until the first mixing)
    slots = []
    for r in range(prm.num_rounds):
        slots.append([i for i in (range(t) if prm.is_full_round(r) else (0,)) if not const[i]])
        const = [all(const[j] for j in range(t) if M[i][j]) for i in range(t)]
    if sum(map(len, slots)) != len(program(t, capacity).sbox_inputs):
        raise AssertionError(f"poseidon t={t}: the S-box wires differ from the symbolic program's")

    def obj(x, col=False):
        a = np.empty(len(x), object)
        a[:] = list(x)
        return a[:, None] if col else a

    return {"M": np.array([obj(row) for row in M], object), "half": half, "rp": rp, "m00": M[0][0],
            "rc": [obj(c, True) for c in prm.round_constants], "slots": slots, "H": [obj(h) for h in H],
            "K": K, "C": obj(C, True), "G": [obj(g, True) for g in G],
            "mh_rp": np.array([obj(row) for row in p], object), "rounds": prm.num_rounds}


def _permutation_values(t: int, capacity: int, lanes: np.ndarray):
    """The wire values of permutations over the columns of ``lanes`` (``(t, u)`` object, lane 0 unused): ``(W, O)``
    with ``W`` ``(3 * S, u)`` object -- per S-box wire ``x^2, x^4, x^5``, in :func:`program`'s order -- and ``O``
    the ``(t, u)`` output lanes. Full rounds mix all lanes with ``M``; partial rounds run in the basis of
    :func:`_rounds`, about ``2 t`` products each instead of the ``t + k`` terms of the ``k``-th partial S-box's
    input in :func:`program`."""
    sp = _rounds(t, capacity)
    u = lanes.shape[1]
    W = np.empty((3 * sum(map(len, sp["slots"])), u), object)
    at = 0
    s = lanes.copy()
    s[0] = capacity % R

    def full(r, s):
        nonlocal at
        x = (s + sp["rc"][r]) % R
        x2 = x * x % R
        x4 = x2 * x2 % R
        y = x4 * x % R
        for i in sp["slots"][r]:
            W[at], W[at + 1], W[at + 2] = x2[i], x4[i], y[i]
            at += 3
        return sp["M"].dot(y) % R

    half, rp = sp["half"], sp["rp"]
    for r in range(half):
        s = full(r, s)
    s0, v = s[0], s[1:]
    for k in range(rp):
        x = (s0 + sp["rc"][half + k][0, 0]) % R
        x2 = x * x % R
        x4 = x2 * x2 % R
        y = x4 * x % R
        W[at], W[at + 1], W[at + 2] = x2, x4, y
        at += 3
        s0 = (sp["m00"] * y + sp["H"][k].dot(v) + sp["K"][k]) % R
        v = v + sp["G"][k] * y
        if k % 8 == 7:  # reduced now and then: the sums stay a few bits above r^2 between reductions
            v %= R
    s = np.empty((t, u), object)
    s[0] = s0
    s[1:] = sp["mh_rp"].dot((v + sp["C"]) % R) % R
    for r in range(half + rp, sp["rounds"]):
        s = full(r, s)
    return W, s


def _permutation_batched(cs, prog: Program, capacity: int, lane_terms, lane_vals) -> list:
    """:func:`permutation_lanes` with array values over ``cs.n`` instances: the values from
    :func:`_permutation_values` (object-array operations over the instances), the wires in the same order.

    Instances whose inputs were already permuted in this run (``cs.memo``, e.g. the upper levels that a sector's
    Merkle paths share) or that repeat within the batch reuse those values instead of recomputing them."""
    t, n = prog.t, cs.n
    nsbox = len(prog.sbox_inputs)
    memo = getattr(cs, "memo", None)
    cols = [np.broadcast_to(np.asarray(lane_vals[i], dtype=object), (n,)) for i in range(1, t)]
    keys = list(zip(*[c.tolist() for c in cols])) if memo is not None else None
    todo: dict = {}
    if memo is not None:
        for k, key in enumerate(keys):
            if (t, capacity, key) not in memo and key not in todo:
                todo[key] = k
        pick = list(todo.values())
    else:
        pick = list(range(n))
    if pick:
        lanes = np.zeros((t, len(pick)), object)
        for i in range(1, t):
            lanes[i] = cols[i - 1][pick]
        W_new, O_new = _permutation_values(t, capacity, lanes)
    if memo is None:
        W, O = W_new, O_new
    else:
        for c, key in enumerate(todo):
            memo[(t, capacity, key)] = (W_new[:, c], O_new[:, c])
        W = np.empty((3 * nsbox, n), object)
        O = np.empty((t, n), object)
        for k, key in enumerate(keys):
            W[:, k], O[:, k] = memo[(t, capacity, key)]
    alloc_rows = getattr(cs, "alloc_fr_rows", None)
    if alloc_rows is not None:  # one call for the whole permutation's wires
        j0 = alloc_rows(W)
        out_var = [-1 - (j0 + 3 * s_i + 2) for s_i in range(nsbox)]
        cs.num_constraints += 3 * nsbox
    else:
        out_var = []
        for s_i in range(nsbox):
            cs.alloc_raw(W[3 * s_i])
            cs.alloc_raw(W[3 * s_i + 1])
            out_var.append(cs.alloc_raw(W[3 * s_i + 2]))
            cs.num_constraints += 3
    result = []
    for o_i, spec in enumerate(prog.outputs):
        d: dict = {}
        for k, c in spec:
            if k >= 0:
                d[out_var[k]] = c
            elif k == CONST:
                d[ONE_INDEX] = c
            else:
                for v, w in lane_terms[-2 - k]:
                    d[v] = (d.get(v, 0) + w * c) % R
        result.append(Num(LinearCombination({k: v for k, v in d.items() if v}), O[o_i]))
    return result
