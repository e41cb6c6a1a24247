"""Device (XLA) backend of the snarkjs prover: the same steps as :class:`cuzk_jax.snarkjs.prover.HostBackend`,
run as jit-compiled programs on limb arrays.

* **QAP evaluations** ``a = A w``, ``b = B w`` on the size-n domain: :func:`cuzk_jax.ops.r1cs.evaluate` on a
  :class:`~cuzk_jax.ops.r1cs.DeviceR1CS` built from the zkey's coefficient section (A rows ``[0, n)``, B rows
  ``[n, 2n)``, no C rows). ops.r1cs stores each coefficient as ``c * R * 2^32`` and takes ``z`` in Montgomery
  form; the zkey stores ``v = c * R^2`` (``R = 2^256``), so the table entry is ``v * 2^32 / R`` -- one host
  multiplication per *distinct* coefficient (circuits reuse a few values: 1, -1, round constants).
* **H scalars** ``P = (A B - C)`` on the odd coset ``w_2n <w_n>``: :func:`cuzk_jax.ops.qap.compute_h_snarkjs`
  when that op exists, else composed here from :mod:`cuzk_jax.ops.ntt` with snarkjs's roots (generator 5):
  ``c = a * b``; for each of a, b, c one inverse NTT and one coset NTT with shift ``w_2n``; then
  ``a' b' - c'`` and a conversion out of Montgomery form (MSM scalars are canonical).
* **MSMs**: :func:`cuzk_jax.ops.msm.msm` on the zkey's point arrays, which are already in the ops Montgomery
  limb layout (see :mod:`cuzk_jax.snarkjs.points`); scalars are canonical limbs. The Jacobian results (five
  points) come back to the host and are normalised there with Python ints.

The zkey is uploaded once per :class:`DeviceBackend` and kept resident (cuzk's SRS manager idea), so repeated
proofs with one key pay only for the witness.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cuzk_jax.reference import constants as C

from . import binfile, points
from .points import G1Array, G2Array
from .zkey import Zkey

R = C.R
SNARKJS_GENERATOR = 5
_V_TO_OPS = pow(2, 32, R) * pow(1 << 256, -1, R) % R  # zkey value c R^2  ->  ops.r1cs table entry c R 2^32


def zkey_device_r1cs(zkey: Zkey):
    """The zkey's A/B coefficient rows as an :class:`cuzk_jax.ops.r1cs.DeviceR1CS` with ``m = domain_size``."""
    import jax.numpy as jnp

    from cuzk_jax.ops.r1cs import DeviceR1CS

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
    indptr = np.searchsorted(rows, np.arange(3 * n + 1), side="left").astype(np.int32)
    return DeviceR1CS(rows=jnp.asarray(rows.astype(np.int32)), cols=jnp.asarray(cols.astype(np.int32)),
                      coeff_ids=jnp.asarray(cids.reshape(-1).astype(np.int32)), indptr=jnp.asarray(indptr),
                      coeffs=jnp.asarray(table))


def compute_h_scalars(a, b):
    """Canonical ``(8, n)`` MSM scalars for the H section from Montgomery evaluations ``a``, ``b``:
    :func:`cuzk_jax.ops.qap.compute_h_snarkjs` with ``c = a * b`` (as ``buildABC1``), then out of Montgomery form."""
    try:
        from cuzk_jax.ops.qap import compute_h_snarkjs
    except ImportError:  # older checkouts: the same transform composed from ops.ntt
        return _compute_h_snarkjs_ntt(a, b)
    from cuzk_jax.ops.field import fr

    return fr.from_mont(compute_h_snarkjs(a, b, fr.mul(a, b)))


def _compute_h_snarkjs_ntt(a, b):
    """P on the odd coset from Montgomery-form evaluations ``a``, ``b`` ``(8, n)`` (ops.ntt, generator 5);
    returns canonical limbs ``(8, n)``. Not wrapped in one jit on purpose: ops.ntt compiles its stage loop once
    per shape and shares it between the forward and inverse transforms, which a single enclosing program would
    duplicate (compile time is the budget on CPU)."""
    from cuzk_jax.ops import ntt
    from cuzk_jax.ops.field import fr

    n = a.shape[-1]
    shift = ntt.root_of_unity(2 * n, SNARKJS_GENERATOR)
    c = fr.mul(a, b)
    import jax.numpy as jnp

    abc = jnp.stack([a, b, c], axis=1)  # (8, 3, n): one batched transform for the three polynomials
    coeffs = ntt.intt(abc, generator=SNARKJS_GENERATOR)
    odd = ntt.coset_ntt(coeffs, shift, generator=SNARKJS_GENERATOR)
    p = fr.sub(fr.mul(odd[:, 0], odd[:, 1]), odd[:, 2])
    return fr.from_mont(p)


class DeviceBackend:
    """XLA ops for the QAP, H and MSMs. ``msm_g1`` / ``msm_g2`` may be given explicitly (functions
    ``(G1Array | G2Array, canonical scalar limbs (8, N)) -> host point``); by default :mod:`cuzk_jax.ops.msm`.

    Uploaded keys stay resident: the coefficient table and the point arrays of the last zkey seen are kept on the
    device, so repeated proofs with one key pay only for the witness.
    """

    name = "device"

    def __init__(self, msm_g1=None, msm_g2=None, msm_impl: str | None = None):
        self._zkey = None
        self._dr = None
        self._bases: dict[int, tuple] = {}
        self._msm_g1 = msm_g1
        self._msm_g2 = msm_g2
        self._msm_impl = msm_impl

    # -- witness -------------------------------------------------------------------------------------------
    def witness(self, w: list[int]):
        """Canonical limbs (for MSM scalars) and Montgomery limbs (for the QAP), both ``(8, nVars)``."""
        import jax.numpy as jnp

        from cuzk_jax import encoding

        return {"canonical": jnp.asarray(encoding.ints_to_limbs(w, "fr")),
                "mont": jnp.asarray(encoding.ints_to_limbs(w, "fr", montgomery=True))}

    def tail(self, ws, start: int):
        return {k: v[:, start:] for k, v in ws.items()}

    # -- QAP and H -------------------------------------------------------------------------------------------
    def _device_r1cs(self, zkey: Zkey):
        if self._zkey is not zkey:
            self._dr = zkey_device_r1cs(zkey)
            self._bases = {}
            self._zkey = zkey
        return self._dr

    def qap_evals(self, zkey: Zkey, ws):
        from cuzk_jax.ops import r1cs as ops_r1cs

        a, b, _ = ops_r1cs.evaluate(self._device_r1cs(zkey), ws["mont"])
        return a, b

    def h_scalars(self, a, b, power: int):
        return compute_h_scalars(a, b)

    def sync(self, x):
        """Wait for queued device work (the prover's per-phase timing)."""
        import jax

        return jax.block_until_ready(x)

    def to_host(self, x):
        """An MSM result (device Jacobian, or already a host point) -> host affine ints."""
        return jacobian_to_host(x.group, x.jac) if isinstance(x, _Pending) else x

    # -- MSMs ------------------------------------------------------------------------------------------------
    def _upload(self, bases):
        """Device :class:`cuzk_jax.ops.curve.Affine` for a zkey point array (cached while the key is current)."""
        import jax.numpy as jnp

        from cuzk_jax.ops.curve import Affine

        hit = self._bases.get(id(bases))
        if hit is None or hit[0] is not bases:
            hit = (bases, Affine(jnp.asarray(bases.x), jnp.asarray(bases.y), jnp.asarray(bases.inf)))
            self._bases[id(bases)] = hit
        return hit[1]

    def _msm(self, group: str, bases, scalars):
        from cuzk_jax.ops import msm as ops_msm

        if len(bases) == 0:
            return None
        jac = ops_msm.msm_jit(group, self._msm_impl)(self._upload(bases), _canonical(scalars))
        return _Pending(group, jac)  # still on the device (asynchronous): the prover calls to_host

    def msm_g1(self, bases: G1Array, scalars):
        if self._msm_g1 is not None:
            return self._msm_g1(bases, _canonical(scalars))
        return self._msm("g1", bases, scalars)

    def msm_g2(self, bases: G2Array, scalars):
        if self._msm_g2 is not None:
            return self._msm_g2(bases, _canonical(scalars))
        return self._msm("g2", bases, scalars)


class _Pending(NamedTuple):
    """An MSM result still on the device."""

    group: str
    jac: object


def _canonical(scalars):
    return scalars["canonical"] if isinstance(scalars, dict) else scalars


def jacobian_to_host(group: str, jac):
    """One device Jacobian point (Montgomery limbs) -> host affine ints (None at infinity), via Python ints."""
    from cuzk_jax.reference.field import fq, fq2

    q = C.P

    def ints(limbs):
        return binfile.le_ints(binfile.limbs_to_le(np.asarray(limbs).reshape(12, 1)), 48)[0] * points.R_MONT_INV % q

    if group == "g1":
        x, y, z = (ints(c) for c in jac)
        if z == 0:
            return None
        zi = fq.inv(z)
        zi2 = zi * zi % q
        return (x * zi2 % q, y * zi2 * zi % q)
    x, y, z = (tuple(ints(np.asarray(c)[k]) for k in range(2)) for c in jac)
    if z == (0, 0):
        return None
    zi = fq2.inv(z)
    zi2 = fq2.square(zi)
    return (fq2.mul(x, zi2), fq2.mul(y, fq2.mul(zi2, zi)))


def host_msm_fallback():
    """(msm_g1, msm_g2) computed by py_arkworks on the host, taking the device backend's scalar limbs: lets
    the device QAP/H path be tested and timed on its own."""
    from cuzk_jax import encoding

    from .prover import HostBackend

    hb = HostBackend()

    def g1(bases, scalars):
        return hb.msm_g1(bases, encoding.limbs_to_ints(np.asarray(scalars), "fr"))

    def g2(bases, scalars):
        return hb.msm_g2(bases, encoding.limbs_to_ints(np.asarray(scalars), "fr"))

    return g1, g2
