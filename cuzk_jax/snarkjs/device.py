"""Device backend of the snarkjs prover: a ``.zkey`` made a :class:`~cuzk_jax.groth16.pipeline.ResidentKey` of
the snarkjs QAP form and proved by the one prove pipeline (:mod:`cuzk_jax.groth16.pipeline`).

* **QAP evaluations** ``a = A w``, ``b = B w`` on the size-n domain: :func:`cuzk_jax.ops.r1cs.evaluate` on a
  :class:`~cuzk_jax.ops.r1cs.DeviceR1CS` built from the zkey's coefficient section (A rows ``[0, n)``, B rows
  ``[n, 2n)``, no C rows: the pipeline takes ``c = a b``). ops.r1cs stores each coefficient as ``c * R * 2^32``
  and takes ``z`` in Montgomery form (the witness goes to the device as canonical limbs and is converted there);
  the zkey stores ``v = c * R^2`` (``R = 2^256``), so the table entry is ``v * 2^32 / R`` -- one host
  multiplication per *distinct* coefficient (circuits reuse a few values).
* **H scalars**: the pipeline's snarkjs form (:func:`cuzk_jax.ops.qap.compute_h_snarkjs`, generator 5).
* **MSMs**: the zkey's point arrays are already in the ops Montgomery limb layout (:mod:`cuzk_jax.snarkjs.points`);
  the L query is the zkey's C section (private columns from ``nPublic + 1`` on).
* **finish**: the pipeline's (``alpha1``, ``beta1``, ``beta2``, ``delta1``, ``delta2`` of the zkey).

The resident key is built once per :class:`DeviceBackend` and zkey and kept (cuzk's SRS manager idea), so
repeated proofs with one key pay only for the witness.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from cuzk_jax import encoding
from cuzk_jax.groth16 import pipeline
from cuzk_jax.ops.curve import Affine
from cuzk_jax.ops.r1cs import DeviceR1CS
from cuzk_jax.reference import constants as C

from . import binfile
from .jsonio import Proof
from .points import g1_to_ark, g2_to_ark
from .verifier import check, verification_key_from_zkey
from .zkey import Zkey

R = C.R
_V_TO_OPS = pow(2, 32, R) * pow(1 << 256, -1, R) % R  # zkey value c R^2  ->  ops.r1cs table entry c R 2^32


def zkey_device_r1cs(zkey: Zkey) -> DeviceR1CS:
    """The zkey's A/B coefficient rows as a :class:`~cuzk_jax.ops.r1cs.DeviceR1CS` with ``m = domain_size``
    (host arrays; :func:`resident_key` uploads them)."""
    n = zkey.domain_size
    co = zkey.coeffs
    rows = co.constraint.astype(np.int64) + n * co.matrix.astype(np.int64)  # A rows [0, n), B rows [n, 2n)
    order = np.argsort(rows, kind="stable")
    rows, cols = rows[order], co.signal.astype(np.int64)[order]
    vals = np.ascontiguousarray(co.value[:, order].T)  # (count, 8) rows of limbs
    uniq, cids = (np.unique(vals, axis=0, return_inverse=True) if len(vals) else (np.zeros((0, 8), np.uint32),
                                                                                 np.zeros(0, np.int64)))
    scaled = [v * _V_TO_OPS % R for v in binfile.le_ints(np.ascontiguousarray(uniq).astype("<u4").tobytes(), 32)]
    table = binfile.limbs_from_le(b"".join(v.to_bytes(32, "little") for v in scaled), 32) if scaled else \
        np.zeros((8, 1), np.uint32)
    # the CSR row pointers of the sorted rows (the device form holds no per-nonzero row ids); no C rows: [2n, 3n)
    # are empty
    indptr = np.searchsorted(rows, np.arange(3 * n + 1), side="left").astype(np.int32)
    return DeviceR1CS(cols=cols.astype(np.int32), coeff_ids=cids.reshape(-1).astype(np.int32), indptr=indptr,
                      coeffs=table)


def _digest(zkey: Zkey) -> str:
    """A digest of the zkey's circuit (sizes and coefficient section)."""
    h = hashlib.sha256(np.array([zkey.n_vars, zkey.n_public, zkey.domain_size], np.int64).tobytes())
    for arr in (zkey.coeffs.matrix, zkey.coeffs.constraint, zkey.coeffs.signal, zkey.coeffs.value):
        h.update(np.ascontiguousarray(arr).tobytes())
    return "zkey:" + h.hexdigest()


def resident_key(zkey: Zkey, config=None) -> pipeline.ResidentKey:
    """The :class:`~cuzk_jax.groth16.pipeline.ResidentKey` (snarkjs QAP form) of a zkey."""
    fin = pipeline.FinishPoints(alpha_g1=g1_to_ark(zkey.alpha1, checked=False),
                                beta_g1=g1_to_ark(zkey.beta1, checked=False),
                                beta_g2=g2_to_ark(zkey.beta2, checked=False),
                                delta_g1=g1_to_ark(zkey.delta1, checked=False),
                                delta_g2=g2_to_ark(zkey.delta2, checked=False))
    queries = {name: Affine(arr.x, arr.y, arr.inf) for name, arr in
               (("msm_a", zkey.a), ("msm_b1", zkey.b1), ("msm_b2", zkey.b2), ("msm_l", zkey.c), ("msm_h", zkey.h))}
    vk = verification_key_from_zkey(zkey)

    def verifier(publics: list, points: list) -> list:
        return [check(vk, pub, Proof(*pt)) is None for pub, pt in zip(publics, points)]

    return pipeline.build_resident(queries=queries, r1cs=zkey_device_r1cs(zkey), finish=fin,
                                   num_inputs=zkey.n_public + 1, num_vars=zkey.n_vars, domain_size=zkey.domain_size,
                                   qap="snarkjs", digest=_digest(zkey), config=config, pk=zkey, verifier=verifier,
                                   h_form="lagrange")  # the zkey's H section: snarkjs's odd-point Lagrange basis


class DeviceBackend:
    """Proves with the pipeline on the default device; keeps the resident key of the last zkey seen.

    ``config``: a :class:`~cuzk_jax.groth16.pipeline.ProverConfig` or its text form (default: the platform's)."""

    name = "device"

    def __init__(self, config=None):
        self.config = pipeline.as_config(config)
        self._rk: pipeline.ResidentKey | None = None

    def resident(self, zkey: Zkey) -> pipeline.ResidentKey:
        if self._rk is None or self._rk.pk is not zkey:
            self._rk = resident_key(zkey, self.config)
        return self._rk

    def prove(self, zkey: Zkey, w: list[int], r: int, s: int, sync_phases: bool = True,
              verify: bool = True) -> tuple[Proof, dict]:
        """``(proof, wall times)`` for one witness (``w`` as ints, ``w[0] = 1``). The proof is checked against
        the zkey's verifying key before it is returned (``verify=False`` skips it):
        :class:`~cuzk_jax.errors.ProofRejected` when the witness does not satisfy the circuit (the zkey holds no
        C matrix, so this is where an unsatisfied witness shows) or the zkey is corrupt. Times: the pipeline's
        phases plus the host backend's names (``qap_evals``, ``msm``, ``combine``)."""
        rk = self.resident(zkey)
        timings = pipeline.Timings()
        t0 = time.perf_counter()
        # (8, 1, nVars) canonical limbs (a byte copy per value); the pipeline's stage converts them to Montgomery
        # form on the device (one to_mont), not the host
        z = encoding.ints_to_limbs(w, "fr", montgomery=False)[:, None, :]
        (proof,) = pipeline.prove_batch(rk, z, [(r, s)], timings, verify=verify, sync_phases=sync_phases,
                                        montgomery=False)
        t = dict(timings.phases)
        t["qap_evals"] = t.get("evaluate", 0.0)
        t["msm"] = sum(v for k, v in t.items() if k.startswith("msm_")) + t.get("fetch", 0.0)
        t["combine"] = t.get("finish", 0.0)
        t["total"] = time.perf_counter() - t0
        return Proof(*proof), t
