"""Groth16 prover for a batch of partitions sharing one proving key (arkworks ``prover.rs`` structure).

cuzk's batch-all-partitions: every device phase runs once for ALL partitions (a leading partition axis), never
one partition after another. Phases (each timed, see :class:`Timings`):

1. **evaluate** -- ``A z, B z, C z`` for every partition (:mod:`cuzk_jax.ops.r1cs`, the pre-compiled evaluator on
   the R1CS extended with bellman's input constraints) and the satisfaction check; a witness that does not satisfy
   the R1CS is refused with the failing constraint and partition named (:class:`~cuzk_jax.circuits.cs.Unsatisfied`).
2. **h** -- coefficients of ``h = (A B - C) / Z_H`` (:func:`cuzk_jax.ops.qap.compute_h`: 7 NTTs per partition,
   batched), first ``n - 1`` kept (degree <= n - 2), converted to canonical form for the MSM.
3. **msm_a / msm_b1 / msm_b2 / msm_l / msm_h** -- the five multi-scalar multiplications (:mod:`cuzk_jax.ops.msm`,
   or :mod:`cuzk_jax.ops.msm_precomputed` over window tables kept with the key: :func:`query_msms`), each batched
   over partitions with shared bases.
4. **finish** (host) -- randomisation with ``r, s`` from the OS CSPRNG:

   * Compute A:        ``A  = alpha + MSM(a_query, z) + r delta``
   * Compute B in G2:  ``B  = beta  + MSM(b_g2_query, z) + s delta``  (and ``B1`` likewise in G1)
   * Finish C:         ``C  = MSM(l_query, z_priv) + MSM(h_query, h) + s A + r B1 - r s delta``

``insecure_randomness_for_tests(seed, P)`` gives fixed ``(r, s)`` pairs for reproducible tests; real proofs must
use the default (``secrets``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
import secrets
import time
import weakref
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax.circuits.cs import Unsatisfied
from cuzk_jax.ops import field as ops_field
from cuzk_jax.ops import msm as ops_msm
from cuzk_jax.ops import qap as ops_qap
from cuzk_jax.ops import r1cs as ops_r1cs
from cuzk_jax.ops.curve import g1, g2
from cuzk_jax.reference.constants import R
from cuzk_jax.reference.curve import g1 as ref_g1, g2 as ref_g2

from . import host_curve
from .data_structures import Proof, ProvingKey

log = logging.getLogger(__name__)

PHASES = ("stage", "evaluate", "h", "msm_a", "msm_b1", "msm_b2", "msm_l", "msm_h", "finish")


@dataclasses.dataclass
class Timings:
    """Seconds per phase (device phases end with ``block_until_ready``); ``total`` is the wall time of prove."""

    phases: dict = dataclasses.field(default_factory=dict)
    total: float = 0.0
    partitions: int = 0

    def as_dict(self) -> dict:
        return {**{k: round(v, 6) for k, v in self.phases.items()}, "total": round(self.total, 6),
                "partitions": self.partitions}

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.phases.items())
        return f"{self.partitions} partitions in {self.total:.3f} s ({parts})"


def random_randomness(count: int) -> list[tuple[int, int]]:
    """``count`` pairs ``(r, s)`` from the OS CSPRNG."""
    return [(secrets.randbelow(R), secrets.randbelow(R)) for _ in range(count)]


def insecure_randomness_for_tests(seed: int, count: int) -> list[tuple[int, int]]:
    """Deterministic ``(r, s)`` pairs: FOR TESTS ONLY (proofs made with them leak the witness to the seed holder)."""
    rnd = random.Random(seed)
    return [(rnd.randrange(R), rnd.randrange(R)) for _ in range(count)]


class PreparedCircuit:
    """The circuit side the device needs, uploaded once per R1CS shape: the extended R1CS on the device."""

    def __init__(self, r1cs):
        self.r1cs = r1cs
        self.ext = r1cs.with_input_constraints()
        self.digest = r1cs.digest()
        self.device_r1cs = ops_r1cs.to_device(self.ext)

    @property
    def num_rows(self) -> int:
        return self.ext.num_constraints


@functools.lru_cache(maxsize=8)
def _prepared(r1cs) -> PreparedCircuit:
    return PreparedCircuit(r1cs)


def prepare(r1cs) -> PreparedCircuit:
    """Cached :class:`PreparedCircuit` for ``r1cs`` (keyed by object identity)."""
    return _prepared(r1cs)


QUERIES = {"msm_a": ("a_query", "g1"), "msm_b1": ("b_g1_query", "g1"), "msm_b2": ("b_g2_query", "g2"),
           "msm_l": ("l_query", "g1"), "msm_h": ("h_query", "g1")}


def parse_msm_impl(msm_impl: str | None) -> tuple[bool, str | None, int | None]:
    """``msm_impl`` -> (precomputed windows?, ops impl or None for the backend default, window or None).

    ``"xla"`` / ``"pallas"`` / ``"pallas_interpret"``: :mod:`cuzk_jax.ops.msm` over the key's queries; ``None``: the
    default, resolved per key by :func:`resolve_msm_impl` (here: the plain backend default).
    ``"pre"``, ``"pre:<impl>"``, ``"pre:<impl>:c=K"``: :mod:`cuzk_jax.ops.msm_precomputed` over window tables of
    the queries, built on first use and kept with the key (W-fold the queries' device memory)."""
    if msm_impl is None:
        return False, None, None
    name, *rest = str(msm_impl).split(":")
    if name != "pre":
        if rest or name not in ops_msm.IMPLS:
            raise ValueError(f"unknown MSM impl {msm_impl!r}: expected one of {ops_msm.IMPLS} or 'pre[:impl][:c=K]'")
        return False, name, None
    impl, c = None, None
    for part in rest:
        if part.startswith("c=") and part[2:].isdigit() and 2 <= int(part[2:]) <= ops_msm.MAX_WINDOW:
            c = int(part[2:])
        elif part in ops_msm.IMPLS and impl is None:
            impl = part
        else:
            raise ValueError(f"bad MSM impl {msm_impl!r}: 'pre' takes an impl from {ops_msm.IMPLS} and "
                             f"c=K (2..{ops_msm.MAX_WINDOW})")
    return True, impl, c


def run_msms(pk: ProvingKey, msm: dict, phase, z_mont, h) -> dict:
    """The five MSM phases of one batch: ``msm`` from :func:`query_msms` (or any ``{name: scalars -> points}``),
    ``phase(name, fn)`` the caller's timer, ``z_mont`` the Montgomery witness ``(8, P, num_vars)``, ``h`` the H
    scalars. Returns ``{name: Jacobian batch}`` in :data:`QUERIES` order (:func:`finish`'s argument order)."""
    z = from_mont(z_mont)
    scalars = {"msm_a": z, "msm_b1": z, "msm_b2": z, "msm_l": z[:, :, pk.num_inputs:], "msm_h": h}
    return {name: phase(name, lambda name=name: msm[name](scalars[name])) for name in QUERIES}


# Share of the device memory the precomputed window tables may take under the default MSM choice (all keys
# holding tables together).
PRE_TABLE_FRACTION = 0.25
# keys whose window tables are cached (query_msms), so the default choice counts what they already hold
_KEYS_WITH_TABLES: "weakref.WeakSet[ProvingKey]" = weakref.WeakSet()


def _query_window(pk: ProvingKey, q: str, c: int | None = None) -> int:
    """The window of query ``q``'s table: ``c``, else the rule of :func:`cuzk_jax.ops.msm_precomputed.window_bits`."""
    from cuzk_jax.ops import msm_precomputed as MP

    return c or MP.window_bits(int(getattr(pk, q).inf.shape[-1]))


def window_table_bytes(pk: ProvingKey, c: int | None = None) -> int:
    """Device bytes of the key's precomputed window tables (:mod:`cuzk_jax.ops.msm_precomputed`; each query's
    window from its rule unless ``c``): ``W N`` affine points of 96 (G1) / 192 (G2) bytes of limbs plus a flag."""
    return sum(ops_msm.num_windows(_query_window(pk, q, c)) * int(getattr(pk, q).inf.shape[-1])
               * (97 if g == "g1" else 193) for q, g in QUERIES.values())


def resolve_msm_impl(pk: ProvingKey, msm_impl: str | None = None) -> str:
    """The MSM implementation :func:`query_msms` runs for ``msm_impl``: an explicit name as given; ``None`` (the
    default) picks ``"pre:pallas"`` on a GPU when the key's window tables, with those other keys already hold
    (several circuits in one engine), fit :data:`PRE_TABLE_FRACTION` of the device memory (10 x 2^20 on the
    H200: the warm sector 2.80 -> 1.16 s, the G2 MSM 704 -> 140 ms; BUILD.md), else the plain MSM of the backend
    (``ops.msm.default_impl``: Pallas on a GPU, XLA elsewhere). Tables larger than that (a 2^27 Filecoin
    partition's would need ~0.8 TB) leave the plain MSM, which needs no extra memory. A key whose default tables
    are built keeps them."""
    if msm_impl is not None:
        return msm_impl
    impl = ops_msm.default_impl()
    if impl != "pallas":
        return impl
    if _has_default_tables(pk):
        return "pre:pallas"
    held = sum(_cached_table_bytes(k) for k in list(_KEYS_WITH_TABLES) if k is not pk)
    if held + window_table_bytes(pk) <= PRE_TABLE_FRACTION * _device_bytes():
        return "pre:pallas"
    return impl


def _has_default_tables(pk: ProvingKey) -> bool:
    """Whether ``pk`` caches the tables of the default windows for all five queries."""
    cache = pk.__dict__.get("_window_tables", {})
    return all((q, _query_window(pk, q)) in cache for q, _ in QUERIES.values())


def _cached_table_bytes(pk: ProvingKey) -> int:
    """Device bytes of the window tables cached on ``pk`` (any window)."""
    return sum(int(v.nbytes) for table in pk.__dict__.get("_window_tables", {}).values() for v in table)


def _device_bytes() -> int:
    """Memory of the first local device as its allocator reports it (0 where it reports none)."""
    return int((jax.local_devices()[0].memory_stats() or {}).get("bytes_limit", 0))


def query_msms(pk: ProvingKey, msm_impl: str | None = None) -> dict:
    """``{phase name: scalars -> Jacobian batch}`` for the five MSMs of :data:`QUERIES` (scalars canonical
    ``(8, P, N)``; the L MSM takes the private columns). Shared by :func:`prove` and the engine's device backend.
    ``msm_impl`` as :func:`parse_msm_impl`; ``None`` chooses by :func:`resolve_msm_impl`. With ``pre`` impls the
    window tables are built once per key and window, and cached on the key object (as the resident SRS in cuzk
    stays on the device)."""
    pre, impl, c = parse_msm_impl(resolve_msm_impl(pk, msm_impl))
    if not pre:
        fns = {g: ops_msm.msm_jit(g, impl) for g in ("g1", "g2")}
        return {name: functools.partial(fns[g], getattr(pk, q)) for name, (q, g) in QUERIES.items()}
    from cuzk_jax.ops import msm_precomputed as MP

    cache = pk.__dict__.setdefault("_window_tables", {})
    out = {}
    for name, (q, g) in QUERIES.items():
        cq = _query_window(pk, q, c)
        if (q, cq) not in cache:
            cache[(q, cq)] = jax.block_until_ready(MP.precompute(getattr(pk, q), g, c=cq, impl=impl))
            _KEYS_WITH_TABLES.add(pk)
        out[name] = functools.partial(MP.msm_jit(g, cq, impl), cache[(q, cq)])
    return out


def host_points(points: dict) -> dict:
    """``{phase name: Jacobian batch}`` from :func:`run_msms` -> ``{phase name: host affine points}`` (one batched
    conversion per MSM, :func:`host_curve.from_device`), shared by :func:`prove` and the engine's backend."""
    return {name: host_curve.from_device(g2 if QUERIES[name][1] == "g2" else g1, jac) for name, jac in points.items()}


@jax.jit
def satisfied(az, bz, cz):
    """Per partition: (all constraints hold, index of the first failing one or -1) for Montgomery ``(8, P, m)``."""
    fr = ops_field.fr
    bad = ~fr.eq(fr.mul(az, bz), cz)
    ok = ~jnp.any(bad, axis=-1)
    return ok, jnp.where(ok, -1, jnp.argmax(bad, axis=-1)).astype(jnp.int32)


@functools.partial(jax.jit, static_argnums=(3,))
def h_scalars(az, bz, cz, n: int):
    """H-MSM scalars for every partition: pad the evaluations to the domain, compute h, keep its n - 1
    coefficients, leave Montgomery form (canonical limbs, as the MSM takes)."""
    pad = [(0, 0)] * (az.ndim - 1) + [(0, n - az.shape[-1])]
    a, b, c = (jnp.pad(x, pad) for x in (az, bz, cz))
    h = ops_qap.compute_h(a, b, c)
    return ops_field.fr.from_mont(h[..., : n - 1])


from_mont = jax.jit(ops_field.fr.from_mont)  # Montgomery Fr limbs -> canonical (MSM scalars)


def finish(pk: ProvingKey, ma, mb1, mb2, ml, mh, r: int, s: int) -> Proof:
    """The proof of one partition from its five MSM results (host affine points, ``None`` = infinity) and the
    randomisers ``(r, s)`` (Groth 2016, section 3.2; arkworks ``prover.rs``):
    ``A = alpha + MA + r delta``, ``B = beta + MB + s delta`` (G2, and G1 for C),
    ``C = ML + MH + s A + r B1 - r s delta``. Shared by :func:`prove` and the engine.

    The scalar multiplications run in py_arkworks_bls12381 (:func:`host_curve.to_arkworks`): ~3 ms per proof where
    the Python-int arithmetic took ~50 ms, which was half of a warm sha_min sector on the H200 (BUILD.md)."""
    import py_arkworks_bls12381 as ark

    k = _ark_key(pk)
    ag1 = functools.partial(host_curve.to_arkworks, ref_g1)
    rr, ss = ark.Scalar(r % R), ark.Scalar(s % R)
    a = k["alpha_g1"] + ag1(ma) + k["delta_g1"] * rr
    b2 = k["beta_g2"] + host_curve.to_arkworks(ref_g2, mb2) + k["delta_g2"] * ss
    b1 = k["beta_g1"] + ag1(mb1) + k["delta_g1"] * ss
    c = ag1(ml) + ag1(mh) + a * ss + b1 * rr - k["delta_g1"] * ark.Scalar(r * s % R)
    return Proof(host_curve.from_arkworks(ref_g1, a), host_curve.from_arkworks(ref_g2, b2),
                 host_curve.from_arkworks(ref_g1, c))


def _ark_key(pk: ProvingKey) -> dict:
    """The key points :func:`finish` needs, as arkworks objects: the verifying key's (cached by
    ``VerifyingKey.arkworks``, shared with the verifier) plus ``beta_g1`` / ``delta_g1`` (cached on the key)."""
    cached = pk.__dict__.get("_ark_finish")
    if cached is None:
        cached = {**pk.vk.arkworks(), "beta_g1": host_curve.to_arkworks(ref_g1, pk.beta_g1),
                  "delta_g1": host_curve.to_arkworks(ref_g1, pk.delta_g1)}
        pk.__dict__["_ark_finish"] = cached
    return cached


def prove(pk: ProvingKey, r1cs, witnesses: Sequence, *, randomness: Sequence[tuple[int, int]] | None = None,
          msm_impl: str | None = None, prepared: PreparedCircuit | None = None) -> tuple[list[Proof], Timings]:
    """Prove every partition in ``witnesses`` (``circuits.r1cs.Witness``, one R1CS shape) in one batch.

    Returns the proofs (one per witness, in order) and the per-phase :class:`Timings`. ``msm_impl``: see
    :func:`parse_msm_impl`; ``None`` lets :func:`resolve_msm_impl` choose (on a GPU: precomputed window tables of
    the key when they fit, built by the first call -- ~40 s for a 2^20 key on an H200 -- and kept on ``pk``).
    Raises ``ValueError`` if the key was made for another circuit, and ``Unsatisfied`` naming the partition and
    constraint if a witness does not satisfy the R1CS.
    """
    t_start = time.perf_counter()
    timings = Timings(partitions=len(witnesses))
    if not witnesses:
        raise ValueError("prove: no witnesses")
    parse_msm_impl(msm_impl)  # a bad name fails before any device work
    # "stage" (host): the device form of the circuit (cached per R1CS) and the witnesses as Montgomery limbs on
    # the device -- ~0.1 s per 2^20-variable partition of Python-int conversion (the engine does it in workers).
    prepared = prepared or prepare(r1cs)
    if prepared.digest != pk.circuit_digest:
        raise ValueError("proving key was generated for a different circuit (R1CS digest mismatch)")
    for w in witnesses:
        r1cs.check_shape(w)
    P = len(witnesses)
    randomness = list(randomness) if randomness is not None else random_randomness(P)
    if len(randomness) != P:
        raise ValueError(f"{P} witnesses but {len(randomness)} (r, s) pairs")
    n = pk.domain_size

    def phase(name, fn, t0=None):
        t0 = time.perf_counter() if t0 is None else t0
        out = jax.block_until_ready(fn())
        timings.phases[name] = time.perf_counter() - t0
        return out

    from cuzk_jax.circuits.r1cs import stack_z

    z_mont = phase("stage", lambda: jnp.asarray(stack_z(witnesses, montgomery=True)), t_start)  # (8, P, num_vars)

    def evaluate():
        az, bz, cz = ops_r1cs.evaluate(prepared.device_r1cs, z_mont)
        ok, first = satisfied(az, bz, cz)
        return az, bz, cz, ok, first

    az, bz, cz, ok, first = phase("evaluate", evaluate)
    ok, first = np.asarray(ok), np.asarray(first)
    if not ok.all():
        p = int(np.argmin(ok))
        i = int(first[p])
        raise Unsatisfied(i, prepared.ext.constraint_name(i), p)

    h = phase("h", lambda: h_scalars(az, bz, cz, n))
    points = run_msms(pk, query_msms(pk, msm_impl), phase, z_mont, h)

    t0 = time.perf_counter()
    host = host_points(points)  # in QUERIES order, finish's argument order
    proofs = [finish(pk, *(host[name][p] for name in QUERIES), r, s) for p, (r, s) in enumerate(randomness)]
    timings.phases["finish"] = time.perf_counter() - t0
    timings.total = time.perf_counter() - t_start
    log.info("prove: %s", timings)
    return proofs, timings
