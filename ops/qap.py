"""The Groth16 H polynomial (QAP quotient) from constraint evaluations, batched across partitions.

Inputs ``a, b, c`` are uint32 ``(8, *batch, n)`` arrays (Fr, Montgomery form, :mod:`cuzk_jax.ops.field`): for each
partition, the evaluations on the size-n domain ``H = {w^i}`` (``w = 7^((r-1)/n)``) of ``A(x) = sum_j z_j u_j(x)``,
``B(x)``, ``C(x)`` -- i.e. row ``i`` of ``A z``, ``B z``, ``C z`` for constraint i, zero-padded to n (arkworks
``R1CStoQAP::witness_map``, bellman/bellperson ``EvaluationDomain`` with the ``a, b, c`` of the prover; supraseal
``groth16_ntt_h``, gnark ``computeH``). The batch axes (typically one leading partition axis) are all transformed
together, so the 7 NTTs of every partition run as 3 batched transforms, all in ONE jitted program per (shape,
config, form) whose tables (roots, coset powers) are arguments (:mod:`cuzk_jax.ops.ntt`, "Tables").

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

:func:`compute_h_lagrange` (this project's keys with a Lagrange H query)
    snarkjs's step on OUR domain (generator 7, the domain the key's QAP was built on): the n evaluations
    ``P(g w^i)`` on the odd coset ``g H`` of the size-2n domain (``g = w_2n = 7^((r-1)/2n)``), not divided by Z,
    for a key whose ``h_query[i]`` is ``L^(2n)_(2i+1)(tau) / delta`` (``ProvingKey.h_form == "lagrange"``,
    :func:`cuzk_jax.groth16.generator.setup`). Six transforms instead of :func:`compute_h`'s seven, and the same
    proof: ``sum_i P(g w^i) L^(2n)_(2i+1)(tau) = P(tau) = h(tau) Z(tau)`` because ``P`` (degree <= 2n - 2) vanishes
    on the even points (the domain) when the witness satisfies the constraints.

Order and fusion: one digit reversal per step, not five. Each coset program's first transform leaves the
coefficients in pass order (digit-reversed, :func:`cuzk_jax.ops.ntt.passes` with ``natural=False``) and its second
runs the passes' transposes, which take pass order to natural order (:func:`cuzk_jax.ops.ntt._transposed_impl`:
the DFT matrix is symmetric), so the coset evaluations come out natural with no reversal in between; the ``1/n``
of the first iNTT and the coset powers are one pointwise scaling by layout position fused into the load of the
second transform's first pass (in the kernel on the Pallas path). The pointwise ``A B - C`` then reads natural
order, and only the last iNTT's output is digit-reversed, with its ``1/n``, ``1/Z_H(g)`` and ``g^-k`` fused in.

Tables (:class:`HTables`, :func:`h_tables`): the H step needs ONE root table, the forward one: an inverse
transform is a forward one of the index-negated input, ``iNTT(x)[i] = NTT(x')[i] / n`` with ``x'[j] = x[-j mod n]``
(``sum_j x[-j] w^(ij) = sum_k x[k] w^(-ik)``), and the negation is a cheap copy folded into the padding of the
input (coset step) or the natural-order read of ``P`` (finishing step). With the two ``~sqrt(n)`` scaling tables
that is ``16 n`` bytes (2 GiB at 2^27), built once and passed to every H program as an argument: the prover holds
them beside the key (``pipeline.ResidentKey.h_tables``). Built inside each program instead (the fallback when a
caller traces :func:`compute_h` without tables) they cost more than the transforms: at 2^27 on an H200 the coset
program took 6.3 NTT-times and the finishing program 8 (``bench --op=h --impl=parts``, RESULTS.md session 18).

Reference: :func:`cuzk_jax.reference.ntt.compute_h` / ``compute_h_snarkjs`` (Python ints).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax.errors import BadInput
from cuzk_jax.ops import field as F
from cuzk_jax.ops import ntt as N
from cuzk_jax.ops.config import NttConfig

COSET_GENERATOR = N.COSET_GENERATOR  # 7
SNARKJS_GENERATOR = 5
#: The H step's forms: ``arkworks`` (:func:`compute_h`), ``snarkjs`` (:func:`compute_h_snarkjs`) and ``lagrange``
#: (:func:`compute_h_lagrange`); the last two end on the odd coset, with no last transform.
FORMS = ("arkworks", "snarkjs", "lagrange")
R = N.R
LIMBS = N.LIMBS


def _check(a, b, c):
    a = N.check_input(a, "a", "ops.qap")
    b = N.check_input(b, "b", "ops.qap")
    c = N.check_input(c, "c", "ops.qap")
    if not (a.shape == b.shape == c.shape):
        raise ValueError(f"a, b, c must have the same shape, got {a.shape}, {b.shape}, {c.shape}")
    n = a.shape[-1]
    if n < 2:
        raise ValueError(f"the QAP domain must have at least 2 points, got n = {n}")
    batch = a.shape[1:-1]
    B = int(np.prod(batch)) if batch else 1
    abc = jnp.concatenate([v.reshape(LIMBS, B, n) for v in (a, b, c)], axis=1)  # (8, 3B, n)
    return abc, a.shape, B, n, N.log2_size(n), N._eager(a) and N._eager(b) and N._eager(c)


class HTables(NamedTuple):
    """The tables of one H step (domain ``n``, form, NTT kernel), device arrays passed to its programs.

    * ``roots``: ``w^e`` for ``e < n/2`` (Montgomery), the FORWARD root table of the form's generator, in the
      kernel's layout (:func:`cuzk_jax.ops.ntt.kernel_table`); every transform of the step is a forward one (module
      doc);
    * ``shift``: the scaling parts of ``(1/n) g^j`` (the first transform's ``n`` and the coset shift), applied on
      the load of the coset transform's first pass: for a transform of several passes ``(lo, hi_a, hi_b)`` by
      layout position (:func:`cuzk_jax.ops.ntt.layout_scale_parts`: the coefficients arrive in pass order), for
      one pass ``(lo, hi)`` (:func:`cuzk_jax.ops.ntt.scale_parts`);
    * ``out``: ``(lo, hi)`` of ``(1/n) / Z_H(g) * g^-j`` (arkworks form: the last transform's scaling); for
      the odd-coset forms (snarkjs, lagrange) a dummy pair of length 1 (their step ends before that transform).
    """

    roots: jax.Array
    shift: tuple
    out: tuple

    @property
    def nbytes(self) -> int:
        return int(sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(self)))


def table_bytes(n: int, form: str = "arkworks", config: NttConfig | None = None) -> int:
    """Device bytes of :func:`h_tables` for a domain of ``n`` and the NTT ``config`` (None: an upper bound for any):
    the ``n/2``-entry root table (32 B an entry) and the scaling parts -- the output's two of ``~sqrt(n)`` entries
    (the odd-coset forms: two constants), the coset shift's the same for a one-pass transform, else three by layout
    position (:func:`cuzk_jax.ops.ntt.layout_scale_parts`: fewer entries)."""
    log_n = N.log2_size(n)
    c = (log_n + 1) // 2
    parts = 32 * ((1 << c) + (1 << (log_n - c)))
    shift = parts
    if config is not None and _layout_shift(n, NttConfig.coerce(config)):
        top, bot, last = N.layout_scale_digits(N.plan(log_n, NttConfig.coerce(config).sub_log()))
        shift = 32 * ((1 << last) + (1 << sum(top)) + (1 << sum(bot)))
    return 32 * max(n // 2, 1) + shift + (parts if form == "arkworks" else 64)


def h_tables(n: int, *, form: str = "arkworks", g: int = COSET_GENERATOR, config: NttConfig | None = None,
             eager: bool = True) -> HTables:
    """Build :class:`HTables` for a domain of ``n`` on the default device (``eager=False``: inside the current
    trace). Not cached: the caller holds them (the prover, beside its key) and frees them with its key."""
    config = NttConfig.coerce(config)
    generator, shift, out = _form_roots(n, form, g)
    roots = N.kernel_table(N.twiddles(n, False, generator, eager=eager, cache=False), config)
    if _layout_shift(n, config):  # the coset transform reads the coefficients in pass order: by layout position
        shift_parts = N.layout_scale_parts(n, N.inv_mod_r(n), shift, N.plan(N.log2_size(n), config.sub_log()))
    else:
        shift_parts = N.scale_parts(n, N.inv_mod_r(n), shift, eager=eager, cache=False)
    out_parts = (N.scale_parts(n, *out, eager=eager, cache=False) if out is not None
                 else (N.constant(1), N.constant(1)))
    return HTables(roots, shift_parts, out_parts)


def _negate_index(x, n: int):
    """``x'[..., j] = x[..., -j mod n]`` of ``x`` ``(8, B, k)`` zero-padded to ``n >= k``: one copy, the padding
    included."""
    zeros = jnp.zeros(x.shape[:-1] + (n - x.shape[-1],), x.dtype)
    return jnp.concatenate([x[..., :1], zeros, jnp.flip(x[..., 1:], axis=-1)], axis=-1)


def _coset_body(x, tables: HTables, *, log_n: int, config: NttConfig):
    """The coset evaluations of ``x`` ``(8, B, m)`` (``m <= n``, zero-padded), in natural order, with no digit
    reversal: the forward transform of the index-negated input left in pass order (``n`` times the coefficients,
    digit-reversed; module doc), ``* (1/n) shift^j`` by layout position (fused into the load of the second
    transform's first pass), the second transform run as the passes' transposes from that order to natural order
    (:func:`cuzk_jax.ops.ntt._transposed_impl`)."""
    n = 1 << log_n
    x = _negate_index(x, n)
    coef = N._passes_impl(x, tables.roots, log_n=log_n, config=config, natural=False, kernel_layout=True)
    return N._transposed_impl(coef, tables.roots, tables.shift, log_n=log_n, config=config)


def _finish_body(ea, eb, ec, tables: HTables, *, log_n: int, config: NttConfig, form: str, scalars: bool = False):
    """``P = A B - C`` pointwise on the coset evaluations (natural order); for ``form == "arkworks"`` then the
    inverse transform (the forward one of the index-negated ``P``) and ``* tables.out``.

    ``scalars``: return what the H MSM takes instead -- canonical limbs (not Montgomery) and, for arkworks' form,
    the first ``n - 1`` coefficients (bellman): the last scaling's small ``lo`` table is taken out of Montgomery
    form here (``sqrt(n)`` entries), so that its Montgomery product leaves Montgomery form at no cost (``a R * b =
    a b R`` but ``a R * (b / R) = a b``); the odd-coset forms convert ``P`` where it is put in natural order. Saves the
    separate conversion program over the whole batch."""
    if config.finish_kind == "kernel":  # one Pallas pass over the three inputs (PTX blocks; NttConfig.finish)
        from cuzk_jax.ops.pallas import field_mul

        P = field_mul.mul_sub(ea, eb, ec, interpret=config.kernel == "pallas_interpret")
    else:
        f = F.fr.with_schedule(config.schedule)
        # in windows (ops.field.map_last_axis): over a whole 2^27 domain this product held 64 GiB of temporaries
        P = F.map_last_axis(lambda a, b, c: f.sub(f.mul(a, b), c), ea, eb, ec)
    if form != "arkworks":  # an odd-coset form: P itself is the H MSM's scalars
        return F.map_last_axis(F.fr.with_schedule(config.schedule).from_mont, P) if scalars else P
    lo, hi = tables.out
    if scalars:
        lo = F.fr.with_schedule(config.schedule).from_mont(lo)
    h = N._passes_impl(_negate_index(P, P.shape[-1]), tables.roots, None, (lo, hi), log_n=log_n, config=config,
                       kernel_layout=True)
    return h[..., : (1 << log_n) - 1] if scalars else h


def _h_impl(abc, tables: HTables, *, log_n: int, nb: int, config: NttConfig, form: str):
    """The whole H step on ``abc`` ``(8, 3 nb, n)`` in one program: :func:`_coset_body` of all three, then
    :func:`_finish_body`."""
    E = _coset_body(abc, tables, log_n=log_n, config=config)
    return _finish_body(E[:, :nb], E[:, nb:2 * nb], E[:, 2 * nb:], tables, log_n=log_n, config=config, form=form)


_h_jit = jax.jit(_h_impl, static_argnames=("log_n", "nb", "config", "form"))


def _layout_shift(n: int, config: NttConfig) -> bool:
    """Whether the coset shift is scaled by layout position (:func:`h_tables`): a transform of several passes."""
    return len(N.plan(N.log2_size(n), config.sub_log())) > 1


def _tables_for(tables, n: int, form: str, g: int, config: NttConfig, eager: bool) -> HTables:
    """The caller's tables, or (None) ones made here: cached device arrays when called eagerly (freed by
    :func:`cuzk_jax.ops.ntt.clear_cache`), a build inside the trace otherwise."""
    if tables is not None:  # shapes are static: a table for another domain or kernel is refused before any work
        half = max(n // 2, 1)
        want = (LIMBS, half) if config.kernel == "xla" else (half, LIMBS)
        got = tuple(getattr(getattr(tables, "roots", None), "shape", ()))
        parts = 3 if _layout_shift(n, config) else 2  # the shift's form for these passes
        if not isinstance(tables, HTables) or got != want or len(tables.shift) != parts:
            raise BadInput(f"ops.qap: tables must be h_tables(n={n}, config={config}) (root table of shape {want}, "
                           f"{parts} shift parts), got {type(tables).__name__} with roots {got}")
        return tables
    return N.cached(("h", n, form, g % R, config.kernel != "xla", N.plan(N.log2_size(n), config.sub_log())),
                    lambda: h_tables(n, form=form, g=g, config=config, eager=eager), eager)


def _run(abc, log_n: int, nb: int, tables: HTables, config: NttConfig, form: str):
    with jax.enable_x64(True):
        return _h_jit(abc, tables, log_n=log_n, nb=nb, config=config, form=form)


def compute_h(a, b, c, *, g: int = COSET_GENERATOR, config: NttConfig | None = None,
              tables: HTables | None = None):
    """Coefficients of ``h = (A B - C) / Z_H``, shape ``(8, *batch, n)`` like the inputs (see the module doc).
    ``config``: the NTT kernel (None: :meth:`NttConfig.default`); ``tables``: :func:`h_tables` of ``(n, g,
    config)`` (None: made here, see :func:`_tables_for`)."""
    config = NttConfig.coerce(config)
    abc, shape, nb, n, log_n, eager = _check(a, b, c)
    tables = _tables_for(tables, n, "arkworks", g, config, eager)
    return _run(abc, log_n, nb, tables, config, "arkworks").reshape(shape)


def compute_h_snarkjs(a, b, c, *, config: NttConfig | None = None, tables: HTables | None = None):
    """The n evaluations ``P(w_2n^(2i+1)) = (A B - C)(w_2n^(2i+1))`` snarkjs's H MSM takes (Montgomery form,
    shape ``(8, *batch, n)``; see the module doc). ``config`` and ``tables`` (``form="snarkjs"``) as in
    :func:`compute_h`."""
    config = NttConfig.coerce(config)
    abc, shape, nb, n, log_n, eager = _check(a, b, c)
    tables = _tables_for(tables, n, "snarkjs", COSET_GENERATOR, config, eager)
    return _run(abc, log_n, nb, tables, config, "snarkjs").reshape(shape)


def compute_h_lagrange(a, b, c, *, config: NttConfig | None = None, tables: HTables | None = None):
    """The n evaluations ``P(g w^i) = (A B - C)(g w^i)`` on the odd coset of our size-2n domain (generator 7;
    Montgomery form, shape ``(8, *batch, n)``), the H MSM's scalars for a key with a Lagrange H query (module doc).
    ``config`` and ``tables`` (``form="lagrange"``) as in :func:`compute_h`."""
    config = NttConfig.coerce(config)
    abc, shape, nb, n, log_n, eager = _check(a, b, c)
    tables = _tables_for(tables, n, "lagrange", COSET_GENERATOR, config, eager)
    return _run(abc, log_n, nb, tables, config, "lagrange").reshape(shape)


# ---------------------------------------------------------------------------------------------------------------
# The same H step as separate programs, one of a, b, c at a time (large domains)
# ---------------------------------------------------------------------------------------------------------------
# One program over all of a, b, c holds the transforms' wide intermediates for the three at once: at a 2^27 domain
# its temporaries alone asked for 64 GiB on the H200. Transforming one vector per program keeps a third of that
# (plus the three coset evaluations, which the pointwise step needs together). The tables are built inside each
# program (never program constants, never cached on the device).


def _form_roots(n: int, form: str, g: int = COSET_GENERATOR):
    """``(generator of the domain, coset shift, output scaling or None)`` of the H step's form: arkworks' coset
    ``g H`` and its ``(1/n / Z_H(g), g^-1)`` output scaling (``g^n != 1`` required), or the odd coset ``w_2n H``
    of snarkjs's domain (generator 5) or ours (``lagrange``: generator 7)."""
    if form in ("snarkjs", "lagrange"):
        generator = SNARKJS_GENERATOR if form == "snarkjs" else N.GENERATOR
        return generator, N.root_of_unity(2 * n, generator), None
    if form != "arkworks":
        raise ValueError(f"unknown QAP form {form!r}; expected one of {FORMS}")
    g %= R
    if g == 0 or pow(g, n, R) == 1:
        raise ValueError(f"coset generator {g} must satisfy g^n != 1")
    zinv = N.inv_mod_r(pow(g, n, R) - 1)
    return N.GENERATOR, g, (N.inv_mod_r(n) * zinv % R, N.inv_mod_r(g))  # / n, / Z_H(g), * g^-k


def _coset_evaluations_impl(x, tables: HTables, *, n: int, config: NttConfig):
    return _coset_body(x.reshape(LIMBS, -1, x.shape[-1]), tables, log_n=N.log2_size(n),
                       config=config).reshape(x.shape[:-1] + (n,))


def _h_from_evaluations_impl(ea, eb, ec, tables: HTables, *, n: int, config: NttConfig, form: str,
                             scalars: bool = False):
    flat = (x.reshape(LIMBS, -1, n) for x in (ea, eb, ec))
    h = _finish_body(*flat, tables, log_n=N.log2_size(n), config=config, form=form, scalars=scalars)
    return h.reshape(ea.shape[:-1] + h.shape[-1:])


_coset_jit = jax.jit(_coset_evaluations_impl, static_argnames=("n", "config"))
_finish_jit = jax.jit(_h_from_evaluations_impl, static_argnames=("n", "config", "form", "scalars"))


def coset_evaluations(x, n: int, *, config: NttConfig | None = None, form: str = "arkworks",
                      tables: HTables | None = None):
    """One of a, b, c (Montgomery ``(8, *batch, m)``, ``m <= n``; zero-padded to ``n`` inside the program) -> its
    evaluations on the form's coset, ``(8, *batch, n)`` in natural order (only
    :func:`h_from_evaluations` reads them). ``tables``: :func:`h_tables` of ``(n, form, config)`` (None: cached
    ones made here)."""
    config = NttConfig.coerce(config)
    if x.shape[-1] > n:
        raise ValueError(f"coset_evaluations: {x.shape[-1]} values do not fit a domain of {n}")
    tables = _tables_for(tables, n, form, COSET_GENERATOR, config, N._eager(x))
    with jax.enable_x64(True):
        return _coset_jit(x, tables, n=n, config=config)


def h_from_evaluations(ea, eb, ec, n: int, *, config: NttConfig | None = None, form: str = "arkworks",
                       tables: HTables | None = None, scalars: bool = False):
    """:func:`coset_evaluations` of a, b, c -> what :func:`compute_h` (``form="arkworks"``),
    :func:`compute_h_snarkjs` (``form="snarkjs"``) or :func:`compute_h_lagrange` (``form="lagrange"``) returns
    for the zero-padded a, b, c: bit for bit the same.
    ``scalars``: the H MSM's scalars instead -- the same values in canonical form, arkworks' form cut to its first
    ``n - 1`` (see :func:`_finish_body`)."""
    config = NttConfig.coerce(config)
    tables = _tables_for(tables, n, form, COSET_GENERATOR, config, N._eager(ea))
    with jax.enable_x64(True):
        return _finish_jit(ea, eb, ec, tables, n=n, config=config, form=form, scalars=scalars)


def lower_split(m: int, n: int, batch: int = 1, *, config: NttConfig | None = None, form: str = "arkworks",
                sharding=None, scalars: bool = False) -> dict:
    """The split H step's programs lowered on abstract shapes (``m`` evaluations per partition, domain ``n``,
    ``batch`` partitions; ``sharding``: the inputs' placement, None for uncommitted arrays): ``{"coset": Lowered,
    "finish": Lowered}`` -- compiled ahead of the data (``pipeline.precompile``) or for reading XLA's buffer
    assignment (``.compile().memory_analysis()``, ``bench --op=memory``)."""
    config = NttConfig.coerce(config)
    spec = lambda k: jax.ShapeDtypeStruct((LIMBS, batch, k), jnp.uint32, sharding=sharding)  # noqa: E731
    tables = table_specs(n, form=form, config=config, sharding=sharding)
    with jax.enable_x64(True):
        return {"coset": _coset_jit.lower(spec(m), tables, n=n, config=config),
                "finish": _finish_jit.lower(spec(n), spec(n), spec(n), tables, n=n, config=config, form=form,
                                            scalars=scalars)}


def table_specs(n: int, *, form: str = "arkworks", config: NttConfig | None = None, sharding=None) -> HTables:
    """:func:`h_tables`' shapes as ``jax.ShapeDtypeStruct`` (``sharding``: their placement), for lowering the H
    programs ahead of the data."""
    config = NttConfig.coerce(config)
    with jax.enable_x64(True):
        shapes = jax.eval_shape(lambda: h_tables(n, form=form, config=config, eager=False))
    return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), shapes)


def compute_h_split(a, b, c, n: int, *, config: NttConfig | None = None, form: str = "arkworks",
                    tables: HTables | None = None, scalars: bool = False):
    """:func:`compute_h` / :func:`compute_h_snarkjs` / :func:`compute_h_lagrange` of a, b, c zero-padded to
    ``n``, as four programs (one per input, then the pointwise step and, for arkworks' form, the last transform):
    the peak memory of one input's transform instead of
    three. Eager only (each step is its own jitted program); ``tables`` as in :func:`coset_evaluations`;
    ``scalars`` as in :func:`h_from_evaluations`."""
    config = NttConfig.coerce(config)
    tables = _tables_for(tables, n, form, COSET_GENERATOR, config, True)
    ea, eb, ec = (coset_evaluations(x, n, config=config, form=form, tables=tables) for x in (a, b, c))
    return h_from_evaluations(ea, eb, ec, n, config=config, form=form, tables=tables, scalars=scalars)
