"""Where a batch is proved: the device backend (JAX, one or several devices) and a host reference backend.

A backend turns a batch of synthesized partitions (``z`` as stacked Fr limbs ``(8, P, num_vars)``, Montgomery
form, see :func:`cuzk_jax.circuits.r1cs.stack_z`) into per-partition MSM results, and those into proofs:

* ``place(pk, r1cs) -> resident`` -- make a proving key (and the circuit's R1CS tables) resident; ``size`` gives
  its bytes for the key manager's LRU budget;
* ``stage(resident, z) -> staged`` -- host -> device copy of a batch (runs in the collector thread, so the copy
  of batch k+1 overlaps the device work of batch k);
* ``run(resident, staged, phase) -> BatchOutput`` -- the device phases (``phase(name, fn)`` times one phase and
  records it on the timeline), ending with the results on the host;
* ``finish(resident, out, i, r, s) -> Proof`` -- host randomisation of partition ``i`` (the finisher thread).

:class:`DeviceBackend` runs the phases of :mod:`cuzk_jax.groth16.prover` (evaluate + satisfaction check, H, five
MSMs), on one device with exactly the prover's jitted programs (so engine and ``prover.prove`` share compiled
code and give identical proofs), or sharded over a mesh of local devices (:mod:`cuzk_jax.engine.sharding`).
:class:`HostBackend` proves with Python ints (the reference R1CS check, the reference H by polynomial division,
Jacobian multi-scalar sums on the host): no device, no compile, for tiny circuits -- an independent oracle for the
engine's scheduling tests and a way to run the engine where no accelerator is worth compiling for.

The randomisation is the prover's :func:`~cuzk_jax.groth16.prover.finish` (Groth 2016; arkworks ``prover.rs``):
``A = alpha + MSM_a + r delta``, ``B = beta + MSM_b2 + s delta`` (G2; ``B1`` likewise in G1),
``C = MSM_l + MSM_h + s A + r B1 - r s delta``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import numpy as np

from cuzk_jax import encoding
from cuzk_jax.circuits.cs import Unsatisfied
from cuzk_jax.groth16 import host_curve, prover
from cuzk_jax.groth16.data_structures import Proof, ProvingKey
from cuzk_jax.reference.curve import g1 as ref_g1, g2 as ref_g2

from . import sharding

MSMS = tuple(prover.QUERIES)  # msm_a, msm_b1, msm_b2, msm_l, msm_h: finish's argument order


@dataclasses.dataclass
class BatchOutput:
    """Per-partition results of one batch, on the host: ``ok`` (bool, P), ``first`` (int, P: first failing
    constraint or -1) and backend-specific MSM results."""

    ok: np.ndarray
    first: np.ndarray
    points: object


def unsatisfied_error(resident, out: BatchOutput, i: int, partition: int) -> Unsatisfied | None:
    """The :class:`Unsatisfied` error of slot ``i`` (named by its partition index within the job), or None."""
    if out.ok[i]:
        return None
    c = int(out.first[i])
    return Unsatisfied(c, resident.ext.constraint_name(c), partition)


# ---------------------------------------------------------------------------------------------------------------
# Device backend
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class DeviceResident:
    """A key made resident by :class:`DeviceBackend`: queries and R1CS tables on the device(s)."""

    pk: ProvingKey
    r1cs: object
    ext: object  # the R1CS with bellman's input constraints (constraint names for errors)
    dr: object  # ops.r1cs.DeviceR1CS
    nbytes: int


class DeviceBackend:
    """Batches proved with JAX on ``devices`` (default: every local device; more than one -> sharded over ``"p"``).

    ``msm_impl``: MSM implementation (None: backend default; see :func:`cuzk_jax.groth16.prover.parse_msm_impl`,
    ``pre...`` on one device only). ``sync_phases``: block after every phase (per-phase timing and timeline; costs a
    few small gaps per batch); False dispatches all phases and blocks once ("device").
    """

    name = "device"

    def __init__(self, devices=None, msm_impl: str | None = None, sync_phases: bool = True):
        self.devices = list(devices) if devices is not None else jax.local_devices()
        if not self.devices:
            raise ValueError("DeviceBackend: no devices")
        self.msm_impl = msm_impl
        self.sync_phases = sync_phases
        self.mesh = sharding.partition_mesh(self.devices) if len(self.devices) > 1 else None
        if prover.parse_msm_impl(msm_impl)[0] and self.mesh is not None:
            raise ValueError(f"msm_impl {msm_impl!r}: precomputed window tables run on one device only")
        self._phases = sharding.ShardedPhases(self.mesh, msm_impl) if self.mesh is not None else None

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    # -- keys --------------------------------------------------------------------------------------------------------
    def place(self, pk: ProvingKey, r1cs) -> DeviceResident:
        from cuzk_jax.ops import r1cs as ops_r1cs

        ext = r1cs.with_input_constraints()
        dr = ops_r1cs.to_device(ext)
        pk, dr = jax.device_put((pk, dr), self._target(sharding.replicated))
        jax.block_until_ready((pk, dr))
        nbytes = pk.nbytes() + sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(dr))
        return DeviceResident(pk=pk, r1cs=r1cs, ext=ext, dr=dr, nbytes=nbytes)

    @staticmethod
    def size(resident: DeviceResident) -> int:
        return resident.nbytes

    # -- batches -----------------------------------------------------------------------------------------------------
    def stage(self, resident: DeviceResident, z: np.ndarray):
        if z.shape[1] % self.num_devices:
            raise ValueError(f"batch of {z.shape[1]} partitions is not a multiple of {self.num_devices} devices")
        return jax.device_put(z, self._target(sharding.batch_sharding))

    def _target(self, spec):
        """Where arrays go: ``spec(mesh)`` when sharded; else the device -- left *uncommitted* when it is the
        default device, so the jitted programs see exactly what ``prover.prove`` passes them and the compiled
        executables are shared (a committed argument changes the lowering and costs a full recompile)."""
        if self.mesh is not None:
            return spec(self.mesh)
        return None if self.devices[0] == jax.devices()[0] else self.devices[0]

    def run(self, resident: DeviceResident, z, phase: Callable) -> BatchOutput:
        from cuzk_jax.ops import r1cs as ops_r1cs

        pk = resident.pk
        n = pk.domain_size
        record = phase
        if not self.sync_phases:
            phase = lambda name, fn: fn()  # noqa: E731  (no block per phase; one for the whole batch, below)
        if self._phases is None:
            def evaluate():
                az, bz, cz = ops_r1cs.evaluate(resident.dr, z)
                return (az, bz, cz) + prover.satisfied(az, bz, cz)

            h_fn = lambda az, bz, cz: prover.h_scalars(az, bz, cz, n)  # noqa: E731
            msm = prover.query_msms(pk, self.msm_impl)
        else:
            evaluate = lambda: self._phases.evaluate(resident.dr, z)  # noqa: E731
            h_fn = self._phases.h(n)
            fns = {g: self._phases.msm(g) for g in ("g1", "g2")}
            msm = {name: functools.partial(fns[g], getattr(pk, q)) for name, (q, g) in prover.QUERIES.items()}

        def device_work():
            az, bz, cz, ok, first = phase("evaluate", evaluate)
            h = phase("h", lambda: h_fn(az, bz, cz))
            return ok, first, prover.run_msms(pk, msm, phase, z, h)

        if self.sync_phases:
            ok, first, res = device_work()
        else:
            ok, first, res = record("device", device_work)
        ok, first, res = record("fetch", lambda: jax.device_get((ok, first, res)))
        return BatchOutput(ok=np.asarray(ok), first=np.asarray(first), points=res)

    def finish(self, resident: DeviceResident, out: BatchOutput, i: int, r: int, s: int) -> Proof:
        host = out.__dict__.get("_host_points")
        if host is None:  # the whole batch at once: one conversion and one inversion per MSM (from_device)
            host = prover.host_points(out.points)
            out.__dict__["_host_points"] = host
        return prover.finish(resident.pk, *(host[name][i] for name in MSMS), r, s)  # MSMS is finish's order


# ---------------------------------------------------------------------------------------------------------------
# Host reference backend
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class HostResident:
    pk: ProvingKey
    r1cs: object
    ext: object
    matrices: tuple  # reference CSR triples of the extended R1CS
    queries: dict  # name -> list of reference affine points
    nbytes: int


class HostBackend:
    """Proves batches with Python ints on the host (see the module docstring); tiny circuits only."""

    name = "host"
    num_devices = 1

    def place(self, pk: ProvingKey, r1cs) -> HostResident:
        from cuzk_jax.groth16.generator import _to_ref
        from cuzk_jax.ops.curve import g1, g2

        ext = r1cs.with_input_constraints()
        queries = {name: _to_ref(g2 if name == "b_g2_query" else g1, getattr(pk, name))
                   for name in ("a_query", "b_g1_query", "b_g2_query", "l_query", "h_query")}
        return HostResident(pk=pk, r1cs=r1cs, ext=ext, matrices=ext.reference_matrices(), queries=queries,
                            nbytes=pk.nbytes())

    @staticmethod
    def size(resident: HostResident) -> int:
        return resident.nbytes

    def stage(self, resident: HostResident, z: np.ndarray):
        return z

    def run(self, resident: HostResident, z: np.ndarray, phase: Callable) -> BatchOutput:
        from cuzk_jax.reference import groth16 as RG
        from cuzk_jax.reference import r1cs as ref_r1cs

        P = z.shape[1]
        n = resident.pk.domain_size
        ni = resident.pk.num_inputs
        q = resident.queries
        zs = [encoding.limbs_to_ints(z[:, p, :], "fr", montgomery=True) for p in range(P)]
        first = np.array(phase("evaluate", lambda: [
            -1 if (i := ref_r1cs.first_unsatisfied(*resident.matrices, zz)) is None else i for zz in zs]))
        ok = first < 0
        hs = phase("h", lambda: [RG.compute_h(resident.matrices, zz, n) if good else None
                                 for zz, good in zip(zs, ok)])

        def msms():
            out = []
            for zz, h, good in zip(zs, hs, ok):
                if not good:
                    out.append(None)
                    continue
                lc = host_curve.linear_combination
                out.append((lc(ref_g1, list(zip(q["a_query"], zz))), lc(ref_g1, list(zip(q["b_g1_query"], zz))),
                            lc(ref_g2, list(zip(q["b_g2_query"], zz))), lc(ref_g1, list(zip(q["l_query"], zz[ni:]))),
                            lc(ref_g1, list(zip(q["h_query"], h)))))
            return out

        return BatchOutput(ok=ok, first=first, points=phase("msm", msms))

    def finish(self, resident: HostResident, out: BatchOutput, i: int, r: int, s: int) -> Proof:
        return prover.finish(resident.pk, *out.points[i], r, s)
