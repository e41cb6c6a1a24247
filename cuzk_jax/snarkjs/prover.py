"""Groth16 prover for snarkjs proving keys: ``(zkey, witness) -> (proof, public signals)``, following snarkjs 0.7.6
``src/groth16_prove.js`` step by step, so that ``snarkjs groth16 verify`` accepts the result.

Equations (Groth 2016, eprint 2016/260, in snarkjs's zkey conventions; ``w`` is the witness, ``n`` the domain)::

    a[c] = sum_{(A, c, s, v)} v w[s],   b[c] likewise           (zkey section 4; rows nConstraints + s carry
    c[c] = a[c] * b[c]                                            the public inputs)
    P    = evaluations of A(x) B(x) - C(x) at the odd points w_2n^(2i+1), i < n     (A, B, C interpolate a, b, c)
    pi_a = alpha1 + sum_j w_j A_j + r delta1
    pi_b = beta2  + sum_j w_j B2_j + s delta2          (G2)
    B1   = beta1  + sum_j w_j B1_j + s delta1          (G1 twin of pi_b)
    pi_c = sum_{j > nPublic} w_j C_j + sum_i P_i H_i + s pi_a + r B1 - r s delta1

``c = a * b`` pointwise (not ``C w``): the zkey stores no C matrix; for a satisfying witness the two agree, and
the unused rows ``nConstraints + nPublic < c < n`` are zero in all three. P is **not divided by Z**: the zkey's H
points are ``L^(2n)_(2i+1)(tau) / delta`` (the Lagrange basis of the size-2n domain at the odd indices), and since
A B - C vanishes at the even points, ``sum_i P_i L^(2n)_(2i+1)(tau) = h(tau) Z(tau)``. Domain roots are snarkjs's:
``w_k = 5^((r-1)/2^k)`` (ffjavascript ``Fr.w``), FFTs in natural order.

The heavy steps go through a *backend*:

* ``"host"``: Python ints for ``a, b`` and for P (:func:`cuzk_jax.reference.ntt.compute_h_snarkjs`), the five
  MSMs by py_arkworks_bls12381 ``multiexp_unchecked``. Code we did not write does the group arithmetic; this is
  the oracle the device path is tested against.
* ``"device"``: the one prove pipeline of :mod:`cuzk_jax.groth16.pipeline` over the zkey made a resident key
  (see :mod:`cuzk_jax.snarkjs.device`); only the final combination of a few points runs on the host.

``r`` and ``s`` come from :mod:`secrets` (the OS CSPRNG), uniformly in ``[0, r)`` as snarkjs's ``Fr.random``.
``insecure_test_seed`` derives them deterministically instead -- for tests and benchmarks only; a proof made that
way leaks the witness to anyone who knows the seed.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field

import numpy as np

from cuzk_jax.errors import BadInput, FormatError, ProofRejected
from cuzk_jax.reference import constants as C

from . import binfile
from .jsonio import Proof
from .points import G1Array, G2Array, g1_array_to_ark, g1_from_ark, g1_to_ark, g2_array_to_ark, g2_from_ark, \
    g2_to_ark, ark_module
from .verifier import check, verification_key_from_zkey
from .zkey import Zkey

R = C.R


def witness_ints(witness) -> list[int]:
    """A witness given as Python ints or as limb-major uint32 ``(8, N)`` canonical limbs -> list of ints."""
    if isinstance(witness, np.ndarray):
        if witness.dtype != np.uint32 or witness.ndim != 2 or witness.shape[0] != 8:
            raise ValueError(f"witness limbs must be uint32 (8, N), got {witness.dtype} {witness.shape}")
        return binfile.le_ints(binfile.limbs_to_le(witness), 32)
    vals = list(witness)
    for i, v in enumerate(vals):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) < R:
            raise ValueError(f"witness value {i} is not an Fr element (int in [0, r)): {v!r}")
    return [int(v) for v in vals]


def random_r_s(insecure_test_seed: int | None = None) -> tuple[int, int]:
    """Blinding factors. From the OS CSPRNG unless ``insecure_test_seed`` is given (tests/benchmarks only)."""
    if insecure_test_seed is None:
        return secrets.randbelow(R), secrets.randbelow(R)
    h = hashlib.sha512(b"cuzk_jax insecure test seed " + str(int(insecure_test_seed)).encode()).digest()
    return int.from_bytes(h[:32], "little") % R, int.from_bytes(h[32:], "little") % R


# ------------------------------------------------------------------------------------------------------------
# Host backend (the oracle)
# ------------------------------------------------------------------------------------------------------------


class HostBackend:
    """Python ints + py_arkworks_bls12381. Results are host-form points (canonical affine ints / None)."""

    name = "host"

    def qap_evals(self, zkey: Zkey, w: list[int]) -> tuple[list[int], list[int]]:
        """``a``, ``b`` on the size-n domain from the zkey's coefficient section (as ``buildABC1``)."""
        n = zkey.domain_size
        acc = ([0] * n, [0] * n)
        co = zkey.coeffs
        for m, c, s, v in zip(co.matrix.tolist(), co.constraint.tolist(), co.signal.tolist(), co.coef_ints()):
            acc[m][c] += v * w[s]
        return [x % R for x in acc[0]], [x % R for x in acc[1]]

    def h_scalars(self, a: list[int], b: list[int], power: int) -> list[int]:
        from cuzk_jax.reference.ntt import compute_h_snarkjs

        c = [x * y % R for x, y in zip(a, b)]
        return compute_h_snarkjs(a, b, c)

    def msm_g1(self, bases: G1Array, scalars: list[int]):
        ark = ark_module()
        if len(bases) == 0:
            return None
        return g1_from_ark(ark.G1Point.multiexp_unchecked(g1_array_to_ark(bases), [ark.Scalar(s) for s in scalars]))

    def msm_g2(self, bases: G2Array, scalars: list[int]):
        ark = ark_module()
        if len(bases) == 0:
            return None
        return g2_from_ark(ark.G2Point.multiexp_unchecked(g2_array_to_ark(bases), [ark.Scalar(s) for s in scalars]))


    def prove(self, zkey: Zkey, w: list[int], r: int, s: int, sync_phases: bool = True,
              verify: bool = True) -> tuple[Proof, dict]:
        """``(proof, wall times)``: the steps of ``groth16_prove.js`` one after another (``sync_phases`` has no
        effect on the host). With ``verify`` the proof is checked against the zkey's verifying key first
        (:class:`~cuzk_jax.errors.ProofRejected` if it does not verify)."""
        t = {}
        t0 = time.perf_counter()
        # --- QAP evaluations and the H scalars ---------------------------------------------------------------
        a, b = self.qap_evals(zkey, w)
        t["qap_evals"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        p = self.h_scalars(a, b, zkey.power)
        t["h"] = time.perf_counter() - t1
        # --- MSMs --------------------------------------------------------------------------------------------
        t1 = time.perf_counter()
        msms = (self.msm_g1(zkey.a, w), self.msm_g1(zkey.b1, w), self.msm_g2(zkey.b2, w),
                self.msm_g1(zkey.c, w[zkey.n_public + 1:]), self.msm_g1(zkey.h, p))
        t["msm"] = time.perf_counter() - t1
        # --- Blind and combine (a handful of point operations) -------------------------------------------------
        t1 = time.perf_counter()
        proof = combine(zkey, *msms, r, s)
        t["combine"] = time.perf_counter() - t1
        if verify:
            t1 = time.perf_counter()
            if check(verification_key_from_zkey(zkey), w[1:zkey.n_public + 1], proof) is not None:
                raise ProofRejected("the proof does not verify: the witness does not satisfy the circuit, or the "
                                    "zkey does not belong to it; nothing was returned")
            t["verify"] = time.perf_counter() - t1
        t["total"] = time.perf_counter() - t0
        return proof, t


def get_backend(name: str):
    if name == "host":
        return HostBackend()
    if name == "device":
        from .device import DeviceBackend

        return DeviceBackend()
    raise ValueError(f"unknown backend {name!r}; expected 'host' or 'device'")


# ------------------------------------------------------------------------------------------------------------
# The prover
# ------------------------------------------------------------------------------------------------------------


@dataclass
class ProveResult:
    proof: Proof
    public: list[int]
    timings: dict[str, float] = field(default_factory=dict)


def prove(zkey: Zkey, witness, *, backend="host", insecure_test_seed: int | None = None,
          sync_phases: bool = True, verify: bool = True) -> ProveResult:
    """Prove with a snarkjs Groth16 zkey and a circom witness (ints or ``(8, N)`` canonical limbs).

    ``backend`` is ``"host"`` (the oracle, :class:`HostBackend`), ``"device"`` (the one prove pipeline,
    :class:`cuzk_jax.snarkjs.device.DeviceBackend`) or a backend object. Returns the proof, the public signals
    ``w[1..nPublic]`` and wall times (seconds). With ``sync_phases`` (default) every device phase finishes before
    the next starts (true per-phase times); ``sync_phases=False`` queues all device work and waits once, so only
    ``total`` is meaningful -- the faster mode for throughput. Every proof is verified against the zkey's
    verifying key before it is returned (``verify=False`` skips it, for benchmarks and tests of invalid proofs):
    :class:`~cuzk_jax.errors.ProofRejected` when it does not verify -- the zkey holds no C matrix, so an
    unsatisfied witness is caught here.
    """
    be = get_backend(backend) if isinstance(backend, str) else backend
    w = witness_ints(witness)
    if len(w) != zkey.n_vars:
        raise ValueError(f"witness has {len(w)} values, the zkey's circuit has nVars = {zkey.n_vars} "
                         "(witness and zkey are for different circuits)")
    if w[0] != 1:
        raise ValueError("witness value 0 (the constant wire) must be 1")
    proof, t = be.prove(zkey, w, *random_r_s(insecure_test_seed), sync_phases=sync_phases, verify=verify)
    return ProveResult(proof, w[1:zkey.n_public + 1], t)


def combine(zkey: Zkey, msm_a, msm_b1, msm_b2, msm_c, msm_h, r: int, s: int) -> Proof:
    """The final Groth16 combination of ``groth16_prove.js`` (host points in, host points out)."""
    ark = ark_module()
    rs, ss = ark.Scalar(r % R), ark.Scalar(s % R)
    delta1 = g1_to_ark(zkey.delta1, checked=False)
    # Compute A
    pi_a = g1_to_ark(msm_a, checked=False) + g1_to_ark(zkey.alpha1, checked=False) + delta1 * rs
    # Compute B in G2 and its G1 twin
    pi_b = g2_to_ark(msm_b2, checked=False) + g2_to_ark(zkey.beta2, checked=False) + \
        g2_to_ark(zkey.delta2, checked=False) * ss
    b1 = g1_to_ark(msm_b1, checked=False) + g1_to_ark(zkey.beta1, checked=False) + delta1 * ss
    # Finish C
    pi_c = (g1_to_ark(msm_c, checked=False) + g1_to_ark(msm_h, checked=False) + pi_a * ss + b1 * rs
            - delta1 * ark.Scalar(r * s % R))
    return Proof(g1_from_ark(pi_a), g2_from_ark(pi_b), g1_from_ark(pi_c))


def prove_files(zkey_path, wtns_path, proof_path=None, public_path=None, *, backend="host",
                insecure_test_seed: int | None = None, check_points: bool = True) -> ProveResult:
    """Read ``zkey_path`` and ``wtns_path``, prove, and write ``proof_path`` / ``public_path`` (if given)."""
    from . import jsonio, wtns
    from .zkey import read_zkey

    t0 = time.perf_counter()
    zkey = read_zkey(zkey_path, check_points=check_points)
    witness = wtns.read_wtns(wtns_path)
    t_read = time.perf_counter() - t0
    res = prove(zkey, witness, backend=backend, insecure_test_seed=insecure_test_seed)
    res.timings["read"] = t_read
    if proof_path:
        jsonio.write_proof(proof_path, res.proof)
    if public_path:
        jsonio.write_public(public_path, res.public)
    return res


def fullprove(wasm_path, input_path, zkey_path, proof_path=None, public_path=None, *, backend="device",
              insecure_test_seed: int | None = None, check_points: bool = True) -> ProveResult:
    """``snarkjs groth16 fullprove``: the witness of ``input_path`` (circuit input JSON) computed by the circuit's
    circom WebAssembly (``snarkjs wtns calculate``: needs Node and the pinned snarkjs, see
    :mod:`cuzk_jax.snarkjs.toolchain`), then :func:`prove_files` (verified before anything is written)."""
    import os
    import tempfile

    from . import toolchain

    for what, path in (("wasm", wasm_path), ("input", input_path), ("zkey", zkey_path)):
        if not os.path.isfile(path):
            raise FormatError(f"{path}: cannot read file (the circuit's {what})")
    with tempfile.TemporaryDirectory(prefix="cuzk-fullprove-") as d:
        wtns_path = os.path.join(d, "witness.wtns")
        proc = toolchain.snarkjs("wtns", "calculate", str(wasm_path), str(input_path), wtns_path, check=False)
        if proc.returncode != 0 or not os.path.isfile(wtns_path):
            detail = (proc.stderr or proc.stdout or "").strip().splitlines()
            raise BadInput(f"{input_path}: the circuit's witness could not be computed from this input"
                           + (f" ({detail[-1][:200]})" if detail else ""))
        return prove_files(zkey_path, wtns_path, proof_path, public_path, backend=backend,
                           insecure_test_seed=insecure_test_seed, check_points=check_points)
