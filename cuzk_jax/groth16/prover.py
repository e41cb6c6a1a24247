"""Groth16 prover for a batch of partitions sharing one proving key (arkworks ``prover.rs`` structure).

:func:`prove` is the library entry point: it makes the key resident (:func:`resident`, once per key and config)
and runs the one prove pipeline (:mod:`cuzk_jax.groth16.pipeline`: stage -> evaluate -> H -> five MSMs ->
finish) over all partitions at once (cuzk's batch-all-partitions). The phases, the Groth16 equations and the
configuration (:class:`~cuzk_jax.groth16.pipeline.ProverConfig`) are documented there.

``insecure_randomness_for_tests(seed, P)`` gives fixed ``(r, s)`` pairs for reproducible tests; real proofs use
the default (``secrets``).
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
import weakref
from typing import Sequence

import numpy as np

from cuzk_jax.compile_cache import install_compile_hint
from cuzk_jax.errors import BadInput
from cuzk_jax.reference.constants import R

from . import pipeline
from .data_structures import Proof, ProvingKey
from .pipeline import PHASES, MSMS, ProverConfig, ResidentKey, Timings, random_randomness  # noqa: F401  (public)

log = logging.getLogger(__name__)


def insecure_randomness_for_tests(seed: int, count: int) -> list[tuple[int, int]]:
    """Deterministic ``(r, s)`` pairs: FOR TESTS ONLY (proofs made with them leak the witness to the seed holder)."""
    rnd = random.Random(seed)
    return [(rnd.randrange(R), rnd.randrange(R)) for _ in range(count)]


# The resident keys prove() made, one per (key object, config): a key's device arrays and window tables are built
# once and reused by every later call with the same key object (weakly held: dropping the key frees them).
_RESIDENT: "weakref.WeakKeyDictionary[ProvingKey, dict]" = weakref.WeakKeyDictionary()
_RESIDENT_LOCK = threading.Lock()


@functools.lru_cache(maxsize=8)
def _digest(r1cs) -> str:
    """``r1cs.digest()`` (a hash of the whole structure), computed once per R1CS object."""
    return r1cs.digest()


def resident(pk: ProvingKey, r1cs, config: ProverConfig | str | None = None) -> ResidentKey:
    """The :class:`~cuzk_jax.groth16.pipeline.ResidentKey` :func:`prove` uses for ``pk`` and ``config`` (made on
    first use, then cached while ``pk`` lives). With ``tables="auto"`` the window tables are built when they fit
    :data:`pipeline.TABLE_FRACTION` of the device memory less the tables other cached keys hold."""
    config = pipeline.as_config(config)
    with _RESIDENT_LOCK:
        per_key = _RESIDENT.setdefault(pk, {})
        rk = per_key.get(config)
        if rk is not None and rk.digest == _digest(r1cs):
            return rk
        held = sum(k.table_bytes for d in _RESIDENT.values() for k in d.values())
        headroom = max(0, int(pipeline.TABLE_FRACTION * pipeline.device_bytes()) - held)
        rk = pipeline.make_resident(pk, r1cs, config, headroom=headroom)
        per_key[config] = rk
        return rk


def prove(pk: ProvingKey | ResidentKey, r1cs, witnesses: Sequence, *,
          randomness: Sequence[tuple[int, int]] | None = None,
          config: ProverConfig | str | None = None, verify: bool = True,
          montgomery: bool = True) -> tuple[list[Proof], Timings]:
    """Prove every partition in ``witnesses`` (``circuits.r1cs.Witness``, one R1CS shape) in one batch -- or in
    the batches of the key's memory plan.

    ``witnesses`` may also be a ready batch ``z``: uint32 ``(8, P, num_vars)`` Fr limbs (what
    ``porep_like.witness_batch`` and ``block_witness.witness_batch`` return), used as it is, without another copy
    (at sector scale ``z`` is tens of GB): Montgomery form, or canonical with ``montgomery=False`` (converted on the
    device while staging). ``montgomery`` applies to ready batches only.

    ``pk``: a :class:`ProvingKey` (made resident by :func:`resident` with ``config``) or a
    :class:`~cuzk_jax.groth16.pipeline.ResidentKey` (then ``config`` must be None). Returns the proofs (one per
    witness, in order) and the per-phase :class:`Timings`. Raises :class:`~cuzk_jax.errors.BadInput` if the key
    was made for another circuit or a witness has the wrong shape, and :class:`~cuzk_jax.errors.Unsatisfied`
    naming the partition and constraint if a witness does not satisfy the R1CS. Every proof is verified before it
    is returned (``verify=False`` skips that, for benchmarks): :class:`~cuzk_jax.errors.ProofRejected` if one
    does not verify.
    """
    from cuzk_jax.circuits.r1cs import stack_z_native

    t_start = time.perf_counter()
    install_compile_hint()  # says once when a long compile runs without the persistent cache
    ready = isinstance(witnesses, np.ndarray)
    if (witnesses.size == 0 or witnesses.ndim != 3 or not witnesses.shape[1]) if ready else not witnesses:
        raise BadInput("prove: no witnesses")
    if isinstance(pk, ResidentKey):
        if config is not None:
            raise BadInput("prove: a ResidentKey carries its own config; pass config=None")
        rk = pk
        if rk.digest != _digest(r1cs):
            raise BadInput("proving key was generated for a different circuit (R1CS digest mismatch)")
    else:
        config = pipeline.as_config(config)  # a bad config fails before any device work
        if pk.circuit_digest != _digest(r1cs):
            raise BadInput("proving key was generated for a different circuit (R1CS digest mismatch)")
        rk = resident(pk, r1cs, config)
    if ready:
        if witnesses.dtype != np.uint32 or witnesses.shape[0] != 8 or witnesses.shape[2] != r1cs.num_vars:
            raise BadInput(f"prove: a ready witness batch must be uint32 (8, P, {r1cs.num_vars}) Fr limbs, "
                           f"got {witnesses.dtype} {witnesses.shape}")
    else:
        for w in witnesses:
            r1cs.check_shape(w)
    timings = Timings()
    # (8, P, num_vars), host; Python-int witnesses stay canonical (stage converts on the device: cheaper)
    z, montgomery = (witnesses, bool(montgomery)) if ready else stack_z_native(witnesses)
    timings.phases["stage"] = time.perf_counter() - t_start  # host conversion; pipeline adds the copy
    points = pipeline.prove_batch(rk, z, randomness, timings, verify=verify, montgomery=montgomery)
    timings.total = time.perf_counter() - t_start
    log.info("prove: %s", timings)
    return [Proof(a, b, c) for a, b, c in points], timings
