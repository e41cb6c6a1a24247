"""The Groth16 H polynomial (QAP quotient) from constraint evaluations, batched across partitions.

Inputs ``a, b, c`` are uint32 ``(8, *batch, n)`` arrays (Fr, Montgomery form, :mod:`cuzk_jax.ops.field`): for each
partition, the evaluations on the size-n domain ``H = {w^i}`` (``w = 7^((r-1)/n)``) of ``A(x) = sum_j z_j u_j(x)``,
``B(x)``, ``C(x)`` -- i.e. row ``i`` of ``A z``, ``B z``, ``C z`` for constraint i, zero-padded to n (arkworks
``R1CStoQAP::witness_map``, bellman/bellperson ``EvaluationDomain`` with the ``a, b, c`` of the prover; supraseal
``groth16_ntt_h``, gnark ``computeH``). The batch axes (typically one leading partition axis) are all transformed
together, so the 7 NTTs of every partition run as 3 batched transform passes.

:func:`compute_h` (arkworks / bellperson form)
    ``A, B, C = iNTT(a), iNTT(b), iNTT(c)`` (coefficients), their evaluations on the coset ``g H`` (coset NTT),
    ``h = (A B - C) / Z_H(g)`` pointwise there (``Z_H(x) = x^n - 1`` is the constant ``g^n - 1`` on the coset), and
    the coset iNTT of h. The coset shift is ``g = 7`` (:data:`COSET_GENERATOR`: ``F::GENERATOR`` in arkworks'
    ``get_coset``, ``F::MULTIPLICATIVE_GENERATOR`` in bellman's ``coset_fft``); the result does not depend on g
    when the witness satisfies the constraints. Output: the n coefficients ``h_0 .. h_(n-1)`` of
    ``h = (A B - C) / Z_H``, degree <= n - 2 (so ``h_(n-1) == 0``; for an unsatisfied witness the division is not
    exact and the result is ``quotient + remainder / (g^n - 1)``). **How the prover uses it**: the H term of C is
    ``sum_(i < n-1) h_i * h_query[i]`` with ``h_query[i] = tau^i Z(tau) / delta`` in G1 (bellman truncates the last
    coefficient; arkworks' MSM stops at the shorter vector), with the scalars in canonical form
    (``fr.from_mont(h)``).

:func:`compute_h_snarkjs` (circom zkeys)
    What ``snarkjs groth16 prove`` feeds its H MSM (see shared/notes/snarkjs-formats.md): with snarkjs's roots
    (generator **5**: ``w_n = 5^((r-1)/n)``) it takes iNTT of a, b, c, multiplies coefficient i by ``w_2n^i`` and
    NTTs again -- the evaluations on the odd coset ``w_2n H`` -- and returns ``P = A B - C`` there, **without**
    dividing by Z: the zkey's H section holds the size-2n Lagrange basis at the odd points,
    ``L^(2n)_(2i+1)(tau) G1 / delta``, and ``sum_i P(w_2n^(2i+1)) L^(2n)_(2i+1)(tau) = h(tau) Z(tau)``. Here a, b,
    c are the evaluations in snarkjs's domain order (``a[i]`` at ``w_n^i`` with the generator-5 root), as snarkjs
    builds them from the zkey's coefficient section (``c = a * b`` pointwise for a satisfied witness).

Reference: :func:`cuzk_jax.reference.ntt.compute_h` / ``compute_h_snarkjs`` (Python ints).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax.ops import ntt as N
from cuzk_jax.ops.config import NttConfig

COSET_GENERATOR = N.COSET_GENERATOR  # 7
SNARKJS_GENERATOR = 5
R = N.R
LIMBS = N.LIMBS
U32, U64 = N.U32, N.U64


def _check(a, b, c):
    a = N.check_input(a, "a")
    b = N.check_input(b, "b")
    c = N.check_input(c, "c")
    if not (a.shape == b.shape == c.shape):
        raise ValueError(f"a, b, c must have the same shape, got {a.shape}, {b.shape}, {c.shape}")
    n = a.shape[-1]
    if n < 2:
        raise ValueError(f"the QAP domain must have at least 2 points, got n = {n}")
    batch = a.shape[1:-1]
    B = int(np.prod(batch)) if batch else 1
    abc = jnp.concatenate([v.reshape(LIMBS, B, n) for v in (a, b, c)], axis=1)  # (8, 3B, n)
    return abc, a.shape, B, n, N.log2_size(n)


def _abc_at(E, idx, nb: int):
    """Limb lists of A, B, C gathered at positions ``idx`` from the internal ``(3 nb, 8, n)`` evaluations."""
    g = E if idx is None else N.gather(E, idx)  # (3nb, 8, ...)
    parts = (g[:nb], g[nb:2 * nb], g[2 * nb:])
    return [[p[:, l].astype(U64) for l in range(LIMBS)] for p in parts]


def _combine_pre_impl(E, *, log_n: int, nb: int, schedule: str):
    """``P = A B - C`` read in bit-reversed order + the first inverse stage; output internal ``(nb, 8, n)``."""
    n = 1 << log_n
    A, B, C = _abc_at(E, N.pre_indices(log_n), nb)  # each limb (nb, 2, h)
    P = N.limb_sub(N.limb_mul_many([(A, B)], schedule)[0], C, schedule)
    u, v = N.stage0([x[:, 0] for x in P], [x[:, 1] for x in P], schedule)
    return N.pack_stage0(u, v, nb, n)


def _combine_out_impl(E, *, nb: int, schedule: str):
    """``P = A B - C`` in natural order, public layout ``(8, nb, n)``."""
    A, B, C = _abc_at(E, None, nb)
    P = N.limb_sub(N.limb_mul_many([(A, B)], schedule)[0], C, schedule)
    return jnp.stack([x.astype(U32) for x in P])


_combine_pre = jax.jit(_combine_pre_impl, static_argnames=("log_n", "nb", "schedule"))
_combine_out = jax.jit(_combine_out_impl, static_argnames=("nb", "schedule"))


def _coset_evals(abc, log_n: int, shift: int, generator: int, config: NttConfig):
    """Internal-layout evaluations on ``shift * H`` of the polynomials interpolating ``abc`` on H."""
    n = 1 << log_n
    X = N.pre(abc, log_n, config, "ext")
    X = N.stages(X, N.twiddles(n, True, generator), log_n, config)  # n * coefficients
    X = N.pre(X, log_n, config, "int", N.scale_table(n, N.inv_mod_r(n), shift))  # / n, * shift^k, bit-reverse, stage 0
    return N.stages(X, N.twiddles(n, False, generator), log_n, config)


def compute_h(a, b, c, *, g: int = COSET_GENERATOR, config: NttConfig | None = None):
    """Coefficients of ``h = (A B - C) / Z_H``, shape ``(8, *batch, n)`` like the inputs (see the module doc).
    ``config``: the NTT kernel (None: :meth:`NttConfig.default`)."""
    config = NttConfig.coerce(config)
    abc, shape, nb, n, log_n = _check(a, b, c)
    g %= R
    if g == 0 or pow(g, n, R) == 1:
        raise ValueError(f"coset generator {g} must satisfy g^n != 1")
    with jax.enable_x64(True):
        E = _coset_evals(abc, log_n, g, N.GENERATOR, config)
        P = _combine_pre(E, log_n=log_n, nb=nb, schedule=config.schedule)
        P = N.stages(P, N.twiddles(n, True), log_n, config)
        zinv = N.inv_mod_r(pow(g, n, R) - 1)
        h = N.post(P, config, N.scale_table(n, N.inv_mod_r(n) * zinv % R, N.inv_mod_r(g)))  # / n, / Z_H(g), * g^-k
    return h.reshape(shape)


def compute_h_snarkjs(a, b, c, *, config: NttConfig | None = None):
    """The n evaluations ``P(w_2n^(2i+1)) = (A B - C)(w_2n^(2i+1))`` snarkjs's H MSM takes (Montgomery form,
    shape ``(8, *batch, n)``; see the module doc). ``config`` as in :func:`compute_h`."""
    config = NttConfig.coerce(config)
    abc, shape, nb, n, log_n = _check(a, b, c)
    shift = N.root_of_unity(2 * n, SNARKJS_GENERATOR)
    with jax.enable_x64(True):
        E = _coset_evals(abc, log_n, shift, SNARKJS_GENERATOR, config)
        out = _combine_out(E, nb=nb, schedule=config.schedule)
    return out.reshape(shape)
