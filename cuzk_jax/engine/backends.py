"""Where a batch is proved: the device backend (the one prove pipeline, one or several devices) and a host
reference backend.

A backend turns a batch of synthesized partitions (``z`` as stacked Fr limbs ``(8, P, num_vars)`` uint32, see
:func:`cuzk_jax.circuits.r1cs.stack_z`; Montgomery form, or canonical with ``montgomery=False``) into per-partition
MSM results, and those into proofs:

* ``place(pk, r1cs, headroom) -> resident`` -- make a proving key (and the circuit's R1CS tables) resident;
  ``size`` gives all its bytes (window tables included) for the key manager's budget, ``headroom`` what that
  budget leaves for it;
* ``stage(resident, z, montgomery=True) -> staged`` -- host -> device copy of a batch (runs in the collector
  thread, so the copy of batch k+1 overlaps the device work of batch k); ``montgomery`` is the form of the host
  ``z`` (False: canonical limbs, what the engine's synthesis gives for Python-int witnesses). The device backend's
  staged batch is Montgomery whatever the host form (a canonical one is converted there by one ``to_mont``, see
  :func:`cuzk_jax.groth16.pipeline.stage`); the host backend's is the partitions' values as Python ints. A backend
  whose ``stage`` takes no ``montgomery`` gets Montgomery limbs only (the engine converts on the host);
* ``run(resident, staged, phase[, witness_done]) -> BatchOutput`` -- the device phases (``phase(name, fn)`` times
  one phase and records it on the timeline), ending with the results on the host; ``witness_done()`` (optional:
  the engine passes it when ``run`` takes it) is called once the batch's witness is dead on the device (before
  the H MSM), where the engine lets its next batch be staged;
* ``finish(resident, out, i, r, s) -> Proof`` -- host randomisation of partition ``i`` (the finisher thread).

:class:`DeviceBackend` is the pipeline of :mod:`cuzk_jax.groth16.pipeline` itself (its resident key is a
:class:`~cuzk_jax.groth16.pipeline.ResidentKey`; sharded over a mesh of local devices when there are several, or
committed to its one device when given one), so the engine and ``prover.prove`` run the same compiled programs and
give identical proofs. :class:`cuzk_jax.engine.multidevice.MultiDeviceEngine` builds one engine per device from
``DeviceBackend([device])`` (``per_device``) or one over ``DeviceBackend(devices)`` (``sharded``). :class:`HostBackend`
proves with Python ints (the reference R1CS check, the reference H by polynomial division, Jacobian multi-scalar
sums on the host): no device, no compile, for tiny circuits -- an independent oracle for the engine's scheduling
tests and a way to run the engine where no accelerator is worth compiling for.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable

import jax
import numpy as np

from cuzk_jax import encoding
from cuzk_jax.errors import BadInput
from cuzk_jax.groth16 import host_curve, pipeline, sharding
from cuzk_jax.groth16.data_structures import Proof, ProvingKey
from cuzk_jax.groth16.pipeline import BatchOutput
from cuzk_jax.reference import groth16 as RG
from cuzk_jax.reference import r1cs as ref_r1cs
from cuzk_jax.reference.curve import g1 as ref_g1, g2 as ref_g2

MSMS = tuple(pipeline.MSMS)  # msm_a, msm_b1, msm_b2, msm_l, msm_h


# ---------------------------------------------------------------------------------------------------------------
# Device backend
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _HostBatch:
    """A batch the key's memory plan does not let onto the device at once: ``z`` on the host (uint32
    ``(8, P, num_vars)``, Montgomery form if ``montgomery``, else canonical), staged and run ``step`` partitions at
    a time."""

    z: np.ndarray
    step: int
    montgomery: bool = True


class DeviceBackend:
    """Batches proved by the pipeline on ``devices`` (default: every local device; more than one -> sharded over
    the partition axis ``"p"``).

    ``config``: a :class:`~cuzk_jax.groth16.pipeline.ProverConfig` or its text form (precomputed window tables run
    on one device only). ``sync_phases``: block after every phase (per-phase timing and timeline; costs a few
    small gaps per batch); False dispatches all phases and blocks once ("device"). ``staged_ahead``: batches the
    engine keeps staged on the device while one runs (its ``prefetch``): the memory plan of every key placed here
    counts their witnesses (:func:`cuzk_jax.groth16.plan.make_plan_prefetch`).
    """

    name = "device"

    def __init__(self, devices=None, config=None, sync_phases: bool = True, staged_ahead: int = 0):
        self.devices = list(devices) if devices is not None else jax.local_devices()
        if not self.devices:
            raise BadInput("DeviceBackend: no devices")
        self.config = pipeline.as_config(config)
        self.sync_phases = sync_phases
        self.staged_ahead = staged_ahead
        self.mesh = sharding.partition_mesh(self.devices) if len(self.devices) > 1 else None
        if self.mesh is not None and self.config.tables == "on":
            raise BadInput("prover config tables=on: precomputed window tables run on one device only")

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    # -- keys --------------------------------------------------------------------------------------------------------
    def place(self, pk: ProvingKey, r1cs, headroom: int | None = None) -> pipeline.ResidentKey:
        config = self.config
        if self.mesh is not None and config.tables == "auto":
            config = dataclasses.replace(config, tables="off")
        return pipeline.make_resident(pk, r1cs, config, mesh=self.mesh, device=self.devices[0], headroom=headroom,
                                      staged_ahead=self.staged_ahead)

    @staticmethod
    def size(resident: pipeline.ResidentKey) -> int:
        return resident.nbytes

    @staticmethod
    def precompile(resident: pipeline.ResidentKey, sizes) -> list[str]:
        """Compile ahead (:func:`~cuzk_jax.groth16.pipeline.precompile`) the programs of the device steps that
        batches of ``sizes`` partitions run: a batch within the key's memory plan is one step; a larger one runs
        in steps of the plan's batch plus the remainder (:meth:`run`). Returns the names compiled, per step."""
        steps = set()
        for s in sizes:
            steps.update(pipeline.step_sizes(resident, s) if resident.mesh is None else [s])
        return [f"{name}@{P}" for P in sorted(steps) for name in pipeline.precompile(resident, P)]

    # -- batches -----------------------------------------------------------------------------------------------------
    def stage(self, resident: pipeline.ResidentKey, z: np.ndarray, montgomery: bool = True):
        """The staged batch (Montgomery form on the device; the host ``z`` is Montgomery if ``montgomery``, else
        canonical and converted on the device by :func:`~cuzk_jax.groth16.pipeline.stage`); a batch larger than the
        key's memory plan allows stays on the host in its own form (a :class:`_HostBatch`) and :meth:`run` stages
        and runs it in the plan's sub-batches."""
        plan = resident.plan
        if plan is not None and resident.mesh is None and z.shape[1] > plan.batch:
            return _HostBatch(z, plan.batch, montgomery)
        return pipeline.stage(resident, z, montgomery)

    def run(self, resident: pipeline.ResidentKey, z, phase: Callable,
            witness_done: Callable[[], None] | None = None) -> BatchOutput:
        """The device phases of a staged batch (:func:`cuzk_jax.groth16.pipeline.run`), or of a host batch in the
        plan's steps (:func:`~cuzk_jax.groth16.pipeline.run_steps`, each next step staged once the current one's
        witness is dead: ``"late"``, no memory beyond one step's). ``witness_done``: called once the (last step's)
        witness is dead, before the H MSM -- the engine lets its next batch onto the device then. The caller must
        hold no reference to a staged ``z`` for its memory to be freed there."""
        if not isinstance(z, _HostBatch):
            return pipeline.run(resident, z, phase, sync_phases=self.sync_phases, witness_done=witness_done)
        with contextlib.closing(pipeline.run_steps(resident, z.z, z.step, phase, montgomery=z.montgomery,
                                                   sync_phases=self.sync_phases, mode="late",
                                                   witness_done=witness_done)) as steps:
            outs = [out for _, out in steps]
        host = {name: [p for out in outs for p in out.host_points()[name]] for name in MSMS}
        kinds = {}
        for out in outs:
            for name, k in out.scalar_kinds.items():
                kinds.setdefault(name, k)
        return BatchOutput(ok=np.concatenate([o.ok for o in outs]), first=np.concatenate([o.first for o in outs]),
                           points={}, host=host, scalar_kinds=kinds)

    def finish(self, resident: pipeline.ResidentKey, out: BatchOutput, i: int, r: int, s: int) -> Proof:
        return Proof(*pipeline.finish(resident, out, i, r, s))


# ---------------------------------------------------------------------------------------------------------------
# Host reference backend
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class HostResident:
    pk: ProvingKey
    matrices: tuple  # reference CSR triples of the extended R1CS
    queries: dict  # MSM phase name -> list of reference affine points
    finish: pipeline.FinishPoints
    constraint_name: Callable[[int], str]
    nbytes: int


class HostBackend:
    """Proves batches with Python ints on the host (see the module docstring); tiny circuits only."""

    name = "host"
    num_devices = 1

    def place(self, pk: ProvingKey, r1cs, headroom: int | None = None) -> HostResident:
        from cuzk_jax.ops.curve import g1, g2

        ext = r1cs.with_input_constraints()
        queries = {name: host_curve.affine_from_device(g2 if group == "g2" else g1, bases)
                   for name, (bases, group) in zip(MSMS, ((pk.a_query, "g1"), (pk.b_g1_query, "g1"),
                                                          (pk.b_g2_query, "g2"), (pk.l_query, "g1"),
                                                          (pk.h_query, "g1")))}
        return HostResident(pk=pk, matrices=ext.reference_matrices(), queries=queries,
                            finish=pipeline.finish_points(pk), constraint_name=ext.constraint_name,
                            nbytes=pk.nbytes())

    @staticmethod
    def size(resident: HostResident) -> int:
        return resident.nbytes

    def stage(self, resident: HostResident, z: np.ndarray, montgomery: bool = True) -> list[list[int]]:
        """The host backend's staged batch: every partition's values as canonical Python ints, decoded from ``z``
        (uint32 ``(8, P, num_vars)``, Montgomery form if ``montgomery``, else canonical)."""
        z = np.asarray(z)
        return [encoding.limbs_to_ints(z[:, p, :], "fr", montgomery=montgomery) for p in range(z.shape[1])]

    def run(self, resident: HostResident, zs, phase: Callable,
            witness_done: Callable[[], None] | None = None) -> BatchOutput:
        """``zs``: what :meth:`stage` gives (per partition, the values as canonical ints); a Montgomery
        ``(8, P, num_vars)`` uint32 array is also taken (decoded here). ``witness_done`` is never called: nothing
        is on a device (the engine then lets the next batch in when this one ends, as without it)."""
        if isinstance(zs, np.ndarray):
            zs = self.stage(resident, zs, montgomery=True)
        n = resident.pk.domain_size
        ni = resident.pk.num_inputs
        q = resident.queries
        first = np.array(phase("evaluate", lambda: [
            -1 if (i := ref_r1cs.first_unsatisfied(*resident.matrices, zz)) is None else i for zz in zs]))
        ok = first < 0
        h_of = RG.compute_h_lagrange if resident.pk.h_form == "lagrange" else RG.compute_h  # as the key's H query
        hs = phase("h", lambda: [h_of(resident.matrices, zz, n) if good else None for zz, good in zip(zs, ok)])
        scalars = {name: (lambda zz, h: zz) for name in MSMS}
        scalars["msm_l"] = lambda zz, h: zz[ni:]
        scalars["msm_h"] = lambda zz, h: h
        curves = {name: ref_g2 if name == "msm_b2" else ref_g1 for name in MSMS}

        def msms():
            return {name: [host_curve.linear_combination(curves[name], list(zip(q[name], scalars[name](zz, h))))
                           if good else None for zz, h, good in zip(zs, hs, ok)] for name in MSMS}


        return BatchOutput(ok=ok, first=first, points={}, host=phase("msm", msms))

    def finish(self, resident: HostResident, out: BatchOutput, i: int, r: int, s: int) -> Proof:
        return Proof(*pipeline.finish(resident, out, i, r, s))
