"""The one Groth16 prove pipeline: plain phase functions over a :class:`ResidentKey` and a batch of witnesses.

Every way of proving in this project runs these functions and no other copy of the sequence:
:func:`cuzk_jax.groth16.prover.prove` (one batch), the engine's device backend (stage in its collector thread,
:func:`run` in its device thread, :func:`finish` in its finisher thread), sharded batches over several devices
(:func:`run` with a mesh) and the snarkjs prover (a :class:`ResidentKey` built from a ``.zkey``).

Phases (cuzk's batch-all-partitions: each runs once for ALL partitions of a batch, a leading partition axis):

1. **stage** (host -> device) -- the witnesses as Fr limbs ``z`` ``(8, P, num_vars)``, Montgomery form on the
   device. The host batch is either form: Montgomery (a packed witness, a ready batch) is copied as it is;
   canonical (Python-int witnesses: a byte copy each, :func:`cuzk_jax.circuits.r1cs.stack_z_native`) is copied
   and then converted by one device ``to_mont`` -- the host's per-value Montgomery multiply is the slow part.
2. **evaluate** -- ``A z, B z, C z`` (:func:`cuzk_jax.ops.r1cs.evaluate`) and, for the bellman form, the
   satisfaction check (per partition: all constraints hold, first failing constraint).
3. **h** -- the H-MSM scalars (canonical limbs), in the form of the key's H query. bellman form (Groth 2016 /
   bellman / arkworks ``r1cs_to_qap``) with a coefficient H query: the coefficients of ``h = (A B - C) / Z_H`` on a
   coset (:func:`cuzk_jax.ops.qap.compute_h`, 7 NTTs), first ``n - 1`` kept. bellman form with a Lagrange H query
   (``ProvingKey.h_form == "lagrange"``, what this project's setup makes by default): the evaluations of
   ``A B - C`` on the odd coset of the 2n domain (:func:`cuzk_jax.ops.qap.compute_h_lagrange`, 6 NTTs), ``n`` of
   them, not divided by ``Z``. snarkjs form (``groth16_prove.js``): ``c = a b`` and the same on snarkjs's domain
   (:func:`cuzk_jax.ops.qap.compute_h_snarkjs`).
4. **msm_a / msm_b1 / msm_b2 / msm_l / msm_h** -- five multi-scalar multiplications batched over partitions with
   shared bases (:mod:`cuzk_jax.ops.msm`), or over the key's precomputed window tables
   (:mod:`cuzk_jax.ops.msm_precomputed`) when the resident key holds them.
5. **fetch / to_host** -- the Jacobian results to host affine points (one batched inversion per MSM).
6. **finish** (host) -- randomisation with ``(r, s)`` (Groth 2016 section 3.2; arkworks ``prover.rs``):

   * Compute A:        ``A  = alpha + MSM_a + r delta``
   * Compute B in G2:  ``B  = beta  + MSM_b2 + s delta``  (and ``B1`` likewise in G1)
   * Finish C:         ``C  = MSM_l + MSM_h + s A + r B1 - r s delta``

   The scalar multiplications run in py_arkworks_bls12381 (:func:`host_curve.to_arkworks`).

Everything that changes a compiled program is in :class:`ProverConfig` (frozen, hashable; the MSM and NTT configs
are static jit arguments); no module global is read while tracing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import secrets
import threading
import time
import concurrent.futures
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax import encoding
from cuzk_jax.compile_cache import compile_in_threads
from cuzk_jax.errors import BadInput, DeviceMemoryError, ProofRejected, Unsatisfied
from cuzk_jax.ops import config as ops_config
from cuzk_jax.ops import field as ops_field
from cuzk_jax.ops import msm as ops_msm
from cuzk_jax.ops import msm_precomputed as ops_pre
from cuzk_jax.ops import msm_split as ops_split
from cuzk_jax.ops import qap as ops_qap
from cuzk_jax.ops import r1cs as ops_r1cs
from cuzk_jax.ops.curve import Affine, Jacobian, g1, g2
from cuzk_jax.reference.constants import R
from cuzk_jax.reference.curve import g1 as ref_g1, g2 as ref_g2

from . import host_curve, sharding, staging, verifier
from . import plan as memplan
from .data_structures import Proof, check_h_form

#: Threads that issue the 8 limb rows of a batch to the device (:func:`_stage`): one per row, so the host-side
#: copies of pageable memory run side by side (the A/B: ``bench --op=stage``, RESULTS.md session 19).
STAGE_THREADS = 8
PHASES = ("stage", "evaluate", "h", "msm_a", "msm_b1", "msm_b2", "msm_l", "msm_h", "fetch", "finish", "verify")
# phase name -> group; also finish's argument order
MSMS = {"msm_a": "g1", "msm_b1": "g1", "msm_b2": "g2", "msm_l": "g1", "msm_h": "g1"}
QAP_FORMS = ("bellman", "snarkjs")
# ``msm=host``: the five MSMs by py_arkworks_bls12381's multiexp (Rust Pippenger) on the host, over bases converted
# once when the key is made resident -- the prover's default on a CPU, where the XLA MSM (compiled limb code) is
# the slow part of a proof; the device MSMs (``MsmConfig``) stay available and are what GPUs and TPUs run.
HOST_MSM = "host"
TABLE_MODES = ("auto", "on", "off")
#: ``ProverConfig.layout`` values (:func:`r1cs_layout`).
LAYOUTS = ("auto", "tiled", "flat")
H_MODES = ("auto", "fused", "split")  # ProverConfig.h
# Share of the device memory a resident key's window tables may take when ``tables="auto"`` and no key-manager
# headroom is given (prover.prove without an engine).
TABLE_FRACTION = 0.25


# ---------------------------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ProverConfig:
    """Everything that changes what the prover compiles or runs; frozen and hashable.

    * ``msm``: :class:`cuzk_jax.ops.config.MsmConfig` of the five MSMs, or :data:`HOST_MSM` (``"host"``: arkworks
      multiexp on the host); ``None``: the platform default -- ``"host"`` on a CPU (unsharded), the
      ``MsmConfig`` default elsewhere;
    * ``ntt``: :class:`cuzk_jax.ops.config.NttConfig` of the H phase (``None``: the platform default);
    * ``tables``: precomputed window tables of the key's queries (:mod:`cuzk_jax.ops.msm_precomputed`, W-fold the
      queries' memory, built once when the key is made resident): ``"on"``, ``"off"``, or ``"auto"`` -- on when
      the MSM config is a GPU kernel config and the tables fit the headroom the key manager gives (or
      :data:`TABLE_FRACTION` of the device memory);
    * ``window``: the tables' window bits (``None``: :func:`cuzk_jax.ops.msm_precomputed.window_bits` per query);
    * ``device_budget`` / ``host_budget``: bytes the prover may use on the device / the host (:mod:`.plan`:
      batch size, resident or streamed bases, tables, chunked evaluation); ``None``: the device budget is
      :data:`plan.DEFAULT_DEVICE_FRACTION <cuzk_jax.groth16.plan.DEFAULT_DEVICE_FRACTION>` of what the device
      reports (unbounded where it reports nothing, e.g. a CPU), the host budget unbounded;
    * ``split``: supraseal's split MSM for the witness queries (A, B1, B2, L): zero scalars skipped, the bases of
      scalar one summed without buckets, Pippenger over the rest (:mod:`cuzk_jax.ops.msm_split`): ``"on"``,
      ``"off"``, or ``"auto"`` (on with the GPU kernels when at most half of a query's scalars are neither 0 nor
      1 -- on PoRep-like scalars it beat both the plain path and the window tables on the H200, see
      ``bench/results``; the XLA path keeps the plain MSM unless ``"on"``). A split query uses no window table,
      so with ``split`` not ``"off"`` the tables are built for H only;
    * ``chunk``: points per streamed chunk when the plan streams a query's bases (``None``: the plan's default);
    * ``batch``: the most partitions one device batch may hold (``None``: as many as the budget allows); the plan
      may choose fewer. Smaller batches bound each step's latency and memory, and make :func:`prove_batch` run
      a batch in several steps (what ``prefetch`` overlaps);
    * ``prefetch``: when :func:`prove_batch` runs the plan's batch in several steps, when the next step's
      witnesses are copied to the device (a worker thread): ``"on"`` -- while the whole current step runs (the plan
      counts two more ``z`` per partition); ``"late"`` -- once the current step's witness is dead, i.e. during its
      H MSM (:func:`run` frees the staged and the canonical witness first: no memory beyond the plan's);
      ``"off"`` -- stage, then run, step by step; ``"auto"`` (default): ``"late"``
      (:func:`cuzk_jax.groth16.plan.make_plan_prefetch` says why; :attr:`MemoryPlan.prefetch
      <cuzk_jax.groth16.plan.MemoryPlan.prefetch>` records the mode);
    * ``h``: the H step as ``"fused"`` (one program for a, b, c: :func:`cuzk_jax.ops.qap.compute_h`) or
      ``"split"`` (one program per input vector: :func:`cuzk_jax.ops.qap.compute_h_split`, a third of the
      transform's temporaries); ``"auto"`` (default): split from a :data:`plan.H_SPLIT_DOMAIN
      <cuzk_jax.groth16.plan.H_SPLIT_DOMAIN>` domain up, which the memory plan models. One device only (a mesh
      runs the fused program per device).

    * ``layout``: how the device holds the R1CS it evaluates. ``"flat"``: every nonzero
      (:class:`cuzk_jax.ops.r1cs.DeviceR1CS`, in row chunks under a tight plan); ``"tiled"``: for a header-and-blocks
      R1CS (one that carries a :class:`~cuzk_jax.circuits.tiling.Tiling`: WindowPoSt, SnapDeals, PoRep with several
      challenges) one group of blocks' rows, run for every group with its columns moved
      (:class:`cuzk_jax.ops.r1cs.TiledR1CS`); ``"auto"`` (default): tiled where the R1CS has a tiling and the tiled
      tables are no larger than the flat ones or the flat ones cannot be indexed (:func:`r1cs_layout`), else flat.
      ``"tiled"`` for an R1CS without a tiling, or ``"flat"`` for one past int32 indexing, is a BadInput.

    Text form (:meth:`parse`, the ``--prover`` flag): comma-separated ``key=value``, e.g.
    ``"msm=pallas,ntt=xla,tables=on,window=16"`` or ``"device_budget=100GiB,host_budget=96GiB,split=on"``;
    ``""`` is the default.
    """

    msm: ops_config.MsmConfig | str | None = None
    ntt: ops_config.NttConfig | None = None
    tables: str = "auto"
    window: int | None = None
    device_budget: int | None = None
    host_budget: int | None = None
    split: str = "auto"
    chunk: int | None = None
    batch: int | None = None
    prefetch: str = "auto"
    h: str = "auto"
    layout: str = "auto"

    def __post_init__(self):
        if self.tables not in TABLE_MODES:
            raise BadInput(f"prover config: tables must be one of {TABLE_MODES}, got {self.tables!r}")
        if isinstance(self.msm, str) and self.msm != HOST_MSM:
            raise BadInput(f"prover config: msm must be an MsmConfig or {HOST_MSM!r}, got {self.msm!r}")
        if self.window is not None and not 2 <= self.window <= ops_msm.MAX_WINDOW:
            raise BadInput(f"prover config: window must be in 2..{ops_msm.MAX_WINDOW}, got {self.window!r}")
        if self.split not in TABLE_MODES:
            raise BadInput(f"prover config: split must be one of {TABLE_MODES}, got {self.split!r}")
        if self.prefetch not in memplan.PREFETCH_MODES:
            raise BadInput(f"prover config: prefetch must be one of {', '.join(memplan.PREFETCH_MODES)}, got "
                           f"{self.prefetch!r}")
        if self.h not in H_MODES:
            raise BadInput(f"prover config: h must be one of {H_MODES}, got {self.h!r}")
        if self.layout not in LAYOUTS:
            raise BadInput(f"prover config: layout must be one of {LAYOUTS}, got {self.layout!r}")
        for key in ("device_budget", "host_budget", "chunk", "batch"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise BadInput(f"prover config: {key} must be a positive integer, got {value!r}")

    @classmethod
    def parse(cls, text: str | None) -> "ProverConfig":
        """The config written as ``"key=value,..."`` (keys msm, ntt, tables, window, device_budget,
        host_budget, split, chunk, batch, prefetch, h, layout); BadInput names a bad token."""
        kw: dict = {}
        for part in filter(None, (p.strip() for p in (text or "").split(","))):
            key, sep, value = part.partition("=")
            if not sep or key in kw:
                raise BadInput(f"prover config {text!r}: expected comma-separated key=value (msm, ntt, tables, "
                               f"window), got {part!r}")
            if key == "msm":
                kw[key] = HOST_MSM if value == HOST_MSM else ops_config.MsmConfig.parse(value)
            elif key == "ntt":
                kw[key] = ops_config.NttConfig.parse(value)
            elif key in ("tables", "split", "prefetch", "h", "layout"):
                kw[key] = value
            elif key in ("window", "chunk", "batch"):
                if not value.isdigit():
                    raise BadInput(f"prover config {text!r}: {key} must be an integer, got {value!r}")
                kw[key] = int(value)
            elif key in ("device_budget", "host_budget"):
                kw[key] = memplan.parse_bytes(value)
            else:
                raise BadInput(f"prover config {text!r}: unknown key {key!r} (expected msm, ntt, tables, window, "
                               f"device_budget, host_budget, split, chunk, batch, prefetch, h, layout)")
        return cls(**kw)

    def resolved(self, sharded: bool = False) -> "ProverConfig":
        """The same config with the platform defaults filled in (what a :class:`ResidentKey` records);
        ``sharded``: for a mesh of devices (the host MSM does not shard: the device default then)."""
        msm = self.msm
        if msm is None:
            msm = HOST_MSM if ops_config.platform_of() == "cpu" and not sharded else ops_config.MsmConfig.default()
        elif msm != HOST_MSM:
            msm = ops_config.MsmConfig.coerce(msm)
        return dataclasses.replace(self, msm=msm, ntt=ops_config.NttConfig.coerce(self.ntt))

    def __str__(self) -> str:
        parts = [f"msm={self.msm}" if self.msm else "", f"ntt={self.ntt}" if self.ntt else "",
                 f"tables={self.tables}", f"window={self.window}" if self.window else "",
                 f"device_budget={self.device_budget}" if self.device_budget else "",
                 f"host_budget={self.host_budget}" if self.host_budget else "",
                 f"split={self.split}" if self.split != "auto" else "", f"chunk={self.chunk}" if self.chunk else "",
                 f"batch={self.batch}" if self.batch else "",
                 f"prefetch={self.prefetch}" if self.prefetch != "auto" else "",
                 f"h={self.h}" if self.h != "auto" else "",
                 f"layout={self.layout}" if self.layout != "auto" else ""]
        return ",".join(p for p in parts if p)


def as_config(config: "ProverConfig | str | None") -> ProverConfig:
    """A :class:`ProverConfig` from a config, its text form, or ``None`` (the default)."""
    if isinstance(config, ProverConfig):
        return config
    if config is None or isinstance(config, str):
        return ProverConfig.parse(config)
    raise BadInput(f"prover config must be a ProverConfig or its text form, got {type(config).__name__}")


# ---------------------------------------------------------------------------------------------------------------
# The resident key
# ---------------------------------------------------------------------------------------------------------------


class WindowTable(NamedTuple):
    """Precomputed window table of one query: ``c`` window bits, ``points`` as built by ``msm_precomputed``."""

    c: int
    points: Affine


@dataclasses.dataclass(frozen=True)
class FinishPoints:
    """The key points the finish step needs, as py_arkworks_bls12381 points (host)."""

    alpha_g1: object
    beta_g1: object
    beta_g2: object
    delta_g1: object
    delta_g2: object


@dataclasses.dataclass(eq=False)
class ResidentKey:
    """A proving key resident on the device with everything derived from it (cuzk's resident SRS entry).

    * ``queries``: MSM phase name (:data:`MSMS`) -> bases on the device, Montgomery limbs: with the Pallas MSM
      kernels on one device (:func:`rows_layout`) :class:`~cuzk_jax.ops.msm.BaseRows` (point-major, made once
      here), else :class:`~cuzk_jax.ops.curve.Affine` (``msm_l``'s bases cover the columns from ``num_inputs`` on;
      ``msm_h``'s as many points as the H scalars; :func:`cuzk_jax.ops.msm.num_bases` counts either);
    * ``tables``: MSM phase name -> :class:`WindowTable` (empty: plain MSMs);
    * ``r1cs``: the evaluator's :class:`~cuzk_jax.ops.r1cs.DeviceR1CS` (bellman form: the R1CS extended with the
      input constraints; snarkjs form: the zkey's A and B rows, no C);
    * ``finish``: :class:`FinishPoints`; ``qap``: ``"bellman"`` or ``"snarkjs"`` (see the module docstring);
      ``h_form``: the H query's form (``"coefficients"`` or ``"lagrange"``,
      :data:`~cuzk_jax.groth16.data_structures.H_FORMS`; a snarkjs key's is always Lagrange on snarkjs's domain);
      ``h_step`` (property): the :mod:`cuzk_jax.ops.qap` form the H step runs;
    * ``config``: the resolved :class:`ProverConfig`; ``mesh``: a partition mesh when sharded over devices;
      ``device``: the one device it lives on when that is not the default device (arrays committed there, so
      every phase runs there; one engine per device is how several devices work without sharding);
    * ``host_bases``: with ``msm=host``, MSM phase name -> the bases as arkworks points (host memory);
    * ``columns``: MSM phase name -> int32 indices of the columns whose bases are kept (None: all). Bases at
      infinity (witness columns a query does not use: most of B's in a SHA-256-heavy circuit) contribute nothing,
      so the resident key leaves them out and the MSM gathers the matching scalars;
    * ``constraint_name``: index -> gadget name of a constraint (unsatisfied-witness errors), or None;
    * ``verifier``: ``(public inputs per partition, (A, B, C) per partition) -> [ok per partition]``, the check
      :func:`prove_batch` runs on every proof before returning it (None: no verifying key, nothing checked);
    * ``pk``: the host-side key object it was made from (a ``ProvingKey`` or a ``Zkey``), ``digest`` its circuit;
    * ``plan``: the :class:`~cuzk_jax.groth16.plan.MemoryPlan` it was built under (batch size, streamed queries,
      tables, chunked evaluation); ``streamed``: MSM phase name -> the bases of a query the plan streams, kept in
      host memory (numpy :class:`~cuzk_jax.ops.curve.Affine`, infinity-free like ``queries``) and copied to the
      device chunk by chunk in each MSM;
    * ``z_width``: the length :func:`stage` pads ``z``'s variable axis to (the size-bucketed R1CS programs' width;
      None: ``num_vars``); ``eval_rows``: the evaluations' row count (the bucketed constraint count), which the
      chunked evaluation (``r1cs`` a :class:`~cuzk_jax.ops.r1cs.ChunkedR1CS` when the plan chunks) returns, and
      the tiled one (``r1cs`` a :class:`~cuzk_jax.ops.r1cs.TiledR1CS`: an R1CS that carries a tiling) evaluates;
    * ``h_tables``: the H step's root and scaling tables (:func:`cuzk_jax.ops.qap.h_tables`, ``16 n`` bytes), made
      once with the key and passed to the H programs (None: each H program makes its own, as a key built
      without them would).

    Invariant: ``nbytes`` counts every device array held here (queries, tables, R1CS tables, column indices) --
    the number the key manager's memory budget adds up.
    """

    queries: dict
    tables: dict
    r1cs: ops_r1cs.DeviceR1CS
    finish: FinishPoints
    num_inputs: int
    num_vars: int
    domain_size: int
    qap: str
    config: ProverConfig
    digest: str
    pk: object = None
    constraint_name: Callable[[int], str] | None = None
    verifier: Callable[[list, list], list] | None = None
    mesh: object = None
    device: object = None
    host_bases: dict | None = None
    columns: dict = dataclasses.field(default_factory=dict)
    plan: memplan.MemoryPlan | None = None
    streamed: dict = dataclasses.field(default_factory=dict)
    z_width: int | None = None
    eval_rows: int | None = None
    h_tables: ops_qap.HTables | None = None
    h_form: str = "coefficients"

    @property
    def h_step(self) -> str:
        """The H step's :mod:`cuzk_jax.ops.qap` form (:func:`h_step_form`)."""
        return h_step_form(self.qap, self.h_form)

    @property
    def vk(self):
        """The verifying key of the host-side key (``None`` for a zkey, whose verifying key is separate JSON)."""
        return getattr(self.pk, "vk", None)

    @property
    def nbytes(self) -> int:
        leaves = jax.tree_util.tree_leaves((self.queries, [t.points for t in self.tables.values()], self.r1cs,
                                            self.columns, self.h_tables))
        return int(sum(leaf.nbytes for leaf in leaves))

    @property
    def table_bytes(self) -> int:
        return int(sum(leaf.nbytes for t in self.tables.values() for leaf in jax.tree_util.tree_leaves(t.points)))


def table_bytes_estimate(queries: dict, window: int | None = None) -> int:
    """Device bytes the window tables of ``queries`` (phase name -> Affine) would take: ``W N`` affine points of 96
    (G1) / 192 (G2) bytes of limbs plus a flag byte each."""
    total = 0
    for name, bases in queries.items():
        n = int(bases.inf.shape[-1])
        c = window or ops_pre.window_bits(n)
        total += ops_msm.num_windows(c) * n * (97 if MSMS[name] == "g1" else 193)
    return total


def device_bytes() -> int:
    """Memory of the first local device as its allocator reports it (0 where it reports none, e.g. the CPU)."""
    return int((jax.local_devices()[0].memory_stats() or {}).get("bytes_limit", 0))


def _want_tables(config: ProverConfig, queries: dict, headroom: int | None) -> bool:
    if config.tables != "auto":
        return config.tables == "on"
    if config.msm == HOST_MSM or config.msm.kernel != "pallas":  # only the GPU kernels earn the tables' build
        return False
    budget = headroom if headroom is not None else int(TABLE_FRACTION * device_bytes())
    return table_bytes_estimate(queries, config.window) <= budget


def _place(tree, mesh, device=None):
    """Device placement of a key's arrays (and of batches): replicated over ``mesh`` when sharded, committed to
    ``device`` when it is given, else left uncommitted on the default device (a committed argument changes the
    lowering and would not share compiled programs with ``prover.prove``)."""
    if mesh is not None:
        tree = jax.device_put(tree, sharding.replicated(mesh))
    elif device is not None:
        tree = jax.device_put(tree, device)
    else:
        tree = jax.tree_util.tree_map(jnp.asarray, tree)
    return jax.block_until_ready(tree)


def _r1cs_bytes(r1cs) -> int:
    """Device bytes of a :class:`~cuzk_jax.ops.r1cs.DeviceR1CS` (or any pytree of arrays): its leaves as held
    (for the flat form 8 B per padded nonzero -- ``cols``, ``coeff_ids`` -- plus the row pointers and the table)."""
    return int(sum(np.dtype(leaf.dtype).itemsize * int(np.prod(leaf.shape))
                   for leaf in jax.tree_util.tree_leaves(r1cs)))


def plan_for(config: ProverConfig, *, queries: dict, r1cs, num_vars: int, domain_size: int,
             partitions: int = memplan.DEFAULT_PARTITIONS, want_tables: bool = False,
             max_batch: int | None = None, table_names: tuple | None = None,
             num_rows: int | None = None, staged_ahead: int = 0, mesh=None) -> memplan.MemoryPlan:
    """The :class:`~cuzk_jax.groth16.plan.MemoryPlan` of a key (``queries``: phase name -> bases as they will be
    held, infinity-free) under ``config``'s budgets. The device budget defaults to a fraction of what the device
    reports (none on a CPU: unbounded). ``staged_ahead``: batches the caller stages on the device while one runs
    (:func:`cuzk_jax.groth16.plan.make_plan_prefetch`); ``mesh``: the key's device mesh (the bases' layout,
    :func:`rows_layout`, depends on it)."""
    budget = config.device_budget
    if budget is None and device_bytes():
        budget = int(memplan.DEFAULT_DEVICE_FRACTION * device_bytes())
    if isinstance(r1cs, ops_r1cs.TiledR1CS):  # one step's nonzeros at a time (its own chunking)
        dr_nnz, rows = int(r1cs.cols.shape[1]), int(num_rows)
    else:
        dr_nnz = int(r1cs.cols.shape[0])
        rows = int(r1cs.indptr.shape[0] - 1) // 3
    shape = memplan.Shape(num_vars=num_vars, num_rows=rows, nnz=dr_nnz, domain=domain_size,
                          bases={k: int(np.shape(v.inf)[-1]) for k, v in queries.items()},
                          r1cs_bytes=_r1cs_bytes(r1cs), eval_bytes=ops_r1cs.evaluate_device_bytes(r1cs, 1),
                          eval_serial=not isinstance(r1cs, (ops_r1cs.TiledR1CS, ops_r1cs.ChunkedR1CS)),
                          rows=rows_layout(config, mesh))
    kw = dict(device_budget=budget, host_budget=config.host_budget,
              want_tables=want_tables, table_bytes=table_bytes_estimate(
                  {q: queries[q] for q in (table_names or tuple(queries))}, config.window)
              if want_tables else 0, chunk=config.chunk,
              max_batch=min(filter(None, (max_batch, config.batch)), default=None),
              max_pairs=getattr(config.msm, "max_pairs", None),
              # a device MSM whose pass bound the config leaves open: the plan may lower it
              pass_bounds=memplan.candidate_pass_bounds() if isinstance(
                  config.msm, ops_config.MsmConfig) and config.msm.max_pairs is None else None)
    plan = memplan.make_plan_prefetch(shape, partitions, config.prefetch, staged_ahead=staged_ahead, **kw)
    memplan.log.info("%s", plan.describe())
    return plan


def _drop_infinity(queries: dict, consume: bool = False) -> tuple[dict, dict]:
    """Bases without their points at infinity, and the int32 indices of the columns kept (only for queries that
    have such points: the others keep every column and need no gather). Host (numpy) queries are compacted on the
    host; device queries (a device setup's) on the device, without a round trip through host memory.
    ``consume``: pop each query from ``queries`` before compacting the next one, so that (when the dict held the
    last reference) a full-size query is freed as soon as its compact copy exists: the peak is then all the
    full-size queries plus one compact copy, not both whole keys."""
    out, columns = {}, {}
    for name in [k for k in MSMS if k in queries]:  # the key's query order, whatever the dict's
        bases = queries.pop(name) if consume else queries[name]
        if isinstance(bases.inf, jax.Array):
            live = ~bases.inf
            count = int(jnp.sum(live))  # one scalar to the host: the static size of the compacted query
            if count == int(bases.inf.shape[-1]):
                out[name] = bases
                continue
            keep = jnp.nonzero(live, size=count)[0].astype(jnp.int32)
            out[name] = Affine(jnp.take(bases.x, keep, axis=-1), jnp.take(bases.y, keep, axis=-1),
                               jnp.zeros((count,), bool))
            columns[name] = keep
            continue
        inf = np.asarray(bases.inf)
        if not inf.any():
            out[name] = bases
            continue
        keep = np.flatnonzero(~inf).astype(np.int32)
        out[name] = Affine(np.asarray(bases.x)[..., keep], np.asarray(bases.y)[..., keep], inf[keep])
        columns[name] = keep
    return out, columns


def build_resident(*, queries: dict, r1cs, finish: FinishPoints, num_inputs: int, num_vars: int, domain_size: int,
                   qap: str, digest: str, config=None, pk=None, constraint_name=None, verifier=None, mesh=None,
                   device=None, headroom: int | None = None, partitions: int | None = None,
                   max_batch: int | None = None, consume: bool = False, num_rows: int | None = None,
                   staged_ahead: int = 0, h_form: str = "coefficients") -> ResidentKey:
    """Upload a key's bases and R1CS tables under a memory plan, and build its window tables when the config asks
    for them and the plan has room.

    ``consume``: empty the ``queries`` dict while compacting (see :func:`_drop_infinity`); the caller passes a
    dict nothing else refers to, so the full-size bases are freed one query at a time.

    ``headroom``: device bytes the caller's memory budget leaves for this key's tables (the key manager's);
    ``None``: :data:`TABLE_FRACTION` of the device memory. Tables run on one device only (``mesh`` must be None).
    ``device``: a device other than the default one to live on (None: the default device, uncommitted).
    ``partitions``: the batch the plan is made for (default :data:`plan.DEFAULT_PARTITIONS`, a sector);
    ``max_batch``: a cap on the plan's batch (e.g. the engine's); ``staged_ahead``: batches the caller stages on the
    device while one runs (the engine's ``prefetch``), which the plan counts. ``num_rows``: the constraints a
    :class:`~cuzk_jax.ops.r1cs.TiledR1CS` evaluates (required with one). ``h_form``: the H query's form
    (:class:`ResidentKey`). Raises
    :class:`~cuzk_jax.errors.MemoryBudgetError` before uploading anything when the budgets cannot hold one
    partition."""
    if qap not in QAP_FORMS:
        raise BadInput(f"unknown QAP form {qap!r}; expected one of {QAP_FORMS}")
    check_h_form(h_form)
    config = as_config(config).resolved(sharded=mesh is not None)
    if config.msm == HOST_MSM and (mesh is not None or config.tables == "on"):
        raise BadInput("prover config msm=host runs on the host: no device mesh, no window tables")
    if set(queries) != set(MSMS):
        raise BadInput(f"resident key needs the bases of {tuple(MSMS)}, got {tuple(queries)}")
    if device is not None and (mesh is not None or device == jax.devices()[0]):
        device = None  # sharded, or the default device: nothing to commit to
    queries, columns = _drop_infinity(queries if consume else {k: queries[k] for k in MSMS}, consume)
    # the split MSM serves the witness queries without tables: tables (when wanted) for the other queries only
    table_names = tuple(q for q in MSMS if not _may_split(config) or q not in SPLIT_QUERIES)
    want_tables = config.msm != HOST_MSM and _want_tables(config, {q: queries[q] for q in table_names}, headroom)
    plan = None
    if config.msm != HOST_MSM:  # the host MSM keeps its bases on the host: nothing to plan on the device
        plan = plan_for(config, queries=queries, r1cs=r1cs, num_vars=num_vars, domain_size=domain_size,
                        partitions=partitions or memplan.DEFAULT_PARTITIONS, want_tables=want_tables,
                        table_names=table_names, max_batch=max_batch, num_rows=num_rows,
                        staged_ahead=staged_ahead, mesh=mesh)
        if plan.streamed and mesh is not None:
            raise BadInput("the memory plan streams key bases, which a device mesh does not support: raise the "
                           "device budget or prove on one device")
        if plan.max_pairs is not None:  # the plan chose shorter MSM passes to keep the batch within the budget
            config = dataclasses.replace(config, msm=dataclasses.replace(config.msm, max_pairs=plan.max_pairs))
    streamed = {}
    if plan is not None and plan.streamed:
        streamed = {name: Affine(*(np.asarray(c) for c in queries.pop(name))) for name in plan.streamed}
    z_width = getattr(r1cs, "z_width", None)
    tiled = isinstance(r1cs, ops_r1cs.TiledR1CS)
    if tiled and num_rows is None:
        raise BadInput("build_resident: a TiledR1CS needs num_rows")
    eval_rows = num_rows if tiled else getattr(r1cs, "padded_constraints", None)
    if plan is not None and plan.eval_chunk and not tiled:  # the evaluation in row chunks (one compiled loop body)
        r1cs = ops_r1cs.chunk_rows(r1cs, plan.eval_chunk)
    # the H step's tables, made once per key (built inside each H program they cost more than its transforms)
    h_tables = ops_qap.h_tables(domain_size, form=h_step_form(qap, h_form), config=config.ntt)
    queries, columns, r1cs, h_tables = _place((queries, columns, r1cs, h_tables), mesh, device)
    tables = {}
    if want_tables and (plan is None or plan.tables):
        if mesh is not None:
            raise BadInput("precomputed window tables run on one device only: use tables=off with several devices")
        for name in table_names:
            bases = queries[name]
            c = config.window or ops_pre.window_bits(int(bases.inf.shape[-1]))
            pts = ops_pre.precompute(bases, MSMS[name], c=c, config=config.msm)
            tables[name] = WindowTable(c, jax.block_until_ready(pts))
    if rows_layout(config, mesh):  # once per key, so no MSM copies its bases into the kernels' layout again
        for name in queries:
            queries[name] = ops_msm.base_rows(MSMS[name], queries[name])  # the Affine is freed if unshared
    host_bases = None
    if config.msm == HOST_MSM:  # arkworks points, converted once per key (host memory, not device)
        host_bases = {name: [host_curve.to_arkworks(ref_g2 if MSMS[name] == "g2" else ref_g1, p) for p in
                             host_curve.affine_from_device(g2 if MSMS[name] == "g2" else g1, bases)]
                      for name, bases in queries.items()}
    return ResidentKey(queries=queries, tables=tables, r1cs=r1cs, finish=finish, num_inputs=num_inputs,
                       num_vars=num_vars, domain_size=domain_size, qap=qap, config=config, digest=digest, pk=pk,
                       constraint_name=constraint_name, verifier=verifier, mesh=mesh, device=device,
                       host_bases=host_bases, columns=columns, plan=plan, streamed=streamed, z_width=z_width,
                       eval_rows=eval_rows, h_tables=h_tables, h_form=h_form)


def rows_layout(config: ProverConfig, mesh=None) -> bool:
    """Whether a resident key holds its device queries as :class:`~cuzk_jax.ops.msm.BaseRows` (the Pallas MSM
    kernels' point-major layout, read in place by every MSM) rather than as :class:`~cuzk_jax.ops.curve.Affine`
    (which each Pallas MSM would copy into that layout, padded, per call): with the Pallas kernels on one device.
    The XLA kernels gather coordinates (the Affine layout); a mesh keeps the Affine form its programs were written
    for. The kernel rule is :func:`cuzk_jax.ops.msm.resolve_bases`' (every kernel but ``xla`` reads rows)."""
    return mesh is None and config.msm != HOST_MSM and getattr(config.msm, "kernel", "xla") != "xla"


def finish_points(pk) -> FinishPoints:
    """The :class:`FinishPoints` of a :class:`~cuzk_jax.groth16.data_structures.ProvingKey` (the verifying key's
    arkworks points, cached by ``VerifyingKey.arkworks`` and shared with the verifier, plus beta_g1 / delta_g1)."""
    vk = pk.vk.arkworks()
    return FinishPoints(alpha_g1=vk["alpha_g1"], beta_g1=host_curve.to_arkworks(ref_g1, pk.beta_g1),
                        beta_g2=vk["beta_g2"], delta_g1=host_curve.to_arkworks(ref_g1, pk.delta_g1),
                        delta_g2=vk["delta_g2"])


def proof_checker(vk) -> Callable[[list, list], list]:
    """The :attr:`ResidentKey.verifier` of a bellman-form verifying key: one batched pairing check (random
    weights) for the whole batch, and per-proof checks only to name the culprits when it fails
    (:mod:`cuzk_jax.groth16.verifier`)."""
    def check(publics: list, points: list) -> list:
        proofs = [Proof(*p) for p in points]
        if verifier.verify_batch(vk, publics, proofs):
            return [True] * len(proofs)
        return verifier.verify_each(vk, publics, proofs)

    return check


def r1cs_layout(r1cs, layout: str = "auto"):
    """The :class:`~cuzk_jax.ops.r1cs.TiledR1CS` a host R1CS is evaluated in under ``ProverConfig.layout``, or
    None for the flat layout. ``"auto"``: tiled when the R1CS carries a :class:`~cuzk_jax.circuits.tiling.Tiling`
    and the flat layout cannot be indexed with int32 (a full WindowPoSt partition, 2.94G nonzeros) or holds more
    bytes. A pattern -- the header, a group of blocks, the input rows -- is padded to the largest one, so with few
    blocks (PoRep's two-challenge presets) the tiled tables hold, and its steps evaluate, more than the flat layout
    (domain20: 0.20 against 0.06 GiB); with many (PoRep's 18 challenges: ~1.9 against ~8.5 GiB) far less. Where
    both work on the H200, tiled also evaluated faster (full SnapDeals; bench/results, session 17). ``tile``
    appends bellman's input rows itself: no copy of the whole R1CS (~12 GB of host memory for a full WindowPoSt
    partition)."""
    if layout not in LAYOUTS:
        raise BadInput(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if layout == "flat":
        ops_r1cs.check_indexable(r1cs)
        return None
    if r1cs.tiling is None:
        if layout == "tiled":
            raise BadInput("layout=tiled needs a header-and-blocks R1CS (one that carries a Tiling); this one has "
                           "none")
        return None
    tiled = ops_r1cs.tile(r1cs, r1cs.tiling, input_rows=True)
    if layout == "tiled":
        return tiled
    try:
        ops_r1cs.check_indexable(r1cs)
    except BadInput:
        return tiled
    return tiled if tiled.nbytes <= ops_r1cs.flat_bytes(r1cs) else None


def make_resident(pk, r1cs, config=None, *, mesh=None, device=None, headroom: int | None = None,
                  partitions: int | None = None, max_batch: int | None = None, consume: bool = False,
                  staged_ahead: int = 0) -> ResidentKey:
    """The :class:`ResidentKey` of a :class:`~cuzk_jax.groth16.data_structures.ProvingKey` for ``r1cs`` (a
    ``circuits.r1cs.R1CS``; the device evaluates it extended with bellman's input constraints).

    ``consume``: move the five queries out of ``pk`` (its ``*_query`` fields become None) and free each full-size
    query once its infinity-free copy is made. For a device setup's key at sector scale, where the full-size
    queries (~71 GiB at a 2^27 domain) and the compact ones (~44 GiB) would otherwise be on the device together.
    ``staged_ahead``: batches the caller stages on the device while one runs (:func:`build_resident`).
    """
    digest = r1cs.digest()
    if pk.circuit_digest != digest:
        raise BadInput("proving key was generated for a different circuit (R1CS digest mismatch)")
    fields = {"msm_a": "a_query", "msm_b1": "b_g1_query", "msm_b2": "b_g2_query", "msm_l": "l_query",
              "msm_h": "h_query"}
    queries = {k: getattr(pk, f) for k, f in fields.items()}
    if any(q is None for q in queries.values()):
        raise BadInput("proving key has no bases (consumed by an earlier make_resident(consume=True)?)")
    finish = finish_points(pk)
    if consume:
        for f in fields.values():
            setattr(pk, f, None)
    dr = r1cs_layout(r1cs, as_config(config).layout)
    if dr is None:
        # size-bucketed R1CS tables: circuits of nearby sizes share the evaluation programs (stage pads z to
        # match); built on the host and uploaded once by build_resident, whole or in the plan's row chunks
        dr = ops_r1cs.to_device(r1cs.with_input_constraints(), bucket_steps=ops_r1cs.BUCKET_STEPS, upload=False)
    # with consume, build_resident empties this very dict as it compacts: nothing else then holds the bases
    return build_resident(queries=queries, r1cs=dr, finish=finish,
                          num_inputs=pk.num_inputs, num_vars=pk.num_vars, domain_size=pk.domain_size, qap="bellman", digest=digest,
                          config=config, pk=pk, constraint_name=r1cs.extended_constraint_name,
                          verifier=proof_checker(pk.vk), mesh=mesh, device=device, headroom=headroom,
                          partitions=partitions, max_batch=max_batch, consume=consume,
                          num_rows=r1cs.num_constraints + r1cs.num_inputs, staged_ahead=staged_ahead,
                          h_form=pk.h_form)


# ---------------------------------------------------------------------------------------------------------------
# Phases
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Timings:
    """Seconds per phase (device phases end with ``block_until_ready``); ``total`` is the wall time of a prove."""

    phases: dict = dataclasses.field(default_factory=dict)
    total: float = 0.0
    partitions: int = 0
    batches: int = 0
    scalar_kinds: dict = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        return {**{k: round(v, 6) for k, v in self.phases.items()}, "total": round(self.total, 6),
                "partitions": self.partitions, "batches": self.batches}

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.phases.items())
        return f"{self.partitions} partitions in {self.total:.3f} s ({parts})"


def random_randomness(count: int) -> list[tuple[int, int]]:
    """``count`` pairs ``(r, s)`` from the OS CSPRNG (:mod:`secrets`)."""
    return [(secrets.randbelow(R), secrets.randbelow(R)) for _ in range(count)]


def stage(rk: ResidentKey, z: np.ndarray, montgomery: bool = True):
    """Host -> device copy of a batch ``z`` (uint32 ``(8, P, num_vars)``): sharded over the key's mesh along the
    partition axis, else uncommitted on the default device. The staged batch is always Montgomery form (what
    :func:`run` takes): ``montgomery=False`` says the host limbs are canonical (values < r, as
    :func:`cuzk_jax.circuits.r1cs.stack_z` checks them) and converts them on the device with one ``to_mont`` --
    the limbs the host's Montgomery conversion gives, bit for bit."""
    z = np.asarray(z)
    if z.dtype != np.uint32 or z.ndim != 3 or z.shape[0] != 8 or z.shape[2] != rk.num_vars:
        raise BadInput(f"witness batch must be uint32 (8, P, {rk.num_vars}), got {z.dtype} {z.shape}")
    with device_memory_errors(rk, lambda: "stage"):
        staged = _stage(rk, z)
        # elementwise, so it keeps the batch's sharding; the bucket padding is zeros and stays zero
        return staged if montgomery else _programs(rk)["to_mont"](staged)


def _stage(rk: ResidentKey, z: np.ndarray):
    """The copy of :func:`stage`, Montgomery form as the host holds it.

    One device: each ``(P, num_vars)`` limb row of the batch (one contiguous block of the host array, also for a
    partition slice) is copied as it lies, then one device program stacks and pads them to the programs' width:
    the host pads nothing (one more ``z`` on the device while staging, which the plan counts with ``prefetch``).
    It won the A/B against padding on the host and copying one array at a 2^27 domain, which then went away
    (``bench/results/RESULTS.md``, session 16). The rows are issued from :data:`STAGE_THREADS` threads
    (:func:`cuzk_jax.groth16.staging.copy_rows`: the host-side copies of pageable memory run side by side; one
    after another they were the bottleneck, session 19's ``--op=stage``). A mesh: padded on the host, copied
    sharded over the partition axis."""
    if rk.mesh is None:
        rows = staging.copy_rows(z, rk.device, threads=STAGE_THREADS)
        return staging.stack_rows(tuple(rows), rk.z_width or rk.num_vars)
    if z.shape[1] % rk.mesh.size:
        raise BadInput(f"batch of {z.shape[1]} partitions is not a multiple of {rk.mesh.size} devices")
    return jax.device_put(_pad_z(rk, z), sharding.batch_sharding(rk.mesh))


def _pad_z(rk: ResidentKey, z: np.ndarray) -> np.ndarray:
    """``z`` zero-padded to the width the key's size-bucketed R1CS programs take (the padding is never read)."""
    width = rk.z_width
    if width is None or width == z.shape[-1]:
        return z
    return np.pad(z, [(0, 0)] * (z.ndim - 1) + [(0, width - z.shape[-1])])


def _evaluate_body(dr, z, qap: str):
    # one partition at a time (a sequential map): the per-nonzero gather and its uint64 products are ~96 B per
    # nonzero and partition, and for a whole 10 x 2^20 batch they were the prove's device peak; the evaluation is a
    # small phase, so a sequence of full-width partitions costs little
    az, bz, cz = ops_r1cs.evaluate(dr, z, chunk=1 if z.ndim == 3 and z.shape[1] > 1 else None)
    if qap == "snarkjs":  # the zkey has no C matrix: c = a b, nothing to check
        cz = ops_field.fr.mul(az, bz)
        ok = jnp.ones(z.shape[1:-1], bool)
        return az, bz, cz, ok, jnp.full(z.shape[1:-1], -1, jnp.int32)
    bad = ~ops_field.fr.eq(ops_field.fr.mul(az, bz), cz)
    ok = ~jnp.any(bad, axis=-1)
    return az, bz, cz, ok, jnp.where(ok, -1, jnp.argmax(bad, axis=-1)).astype(jnp.int32)


def h_step_form(qap: str, h_form: str = "coefficients") -> str:
    """The H step's form (:data:`cuzk_jax.ops.qap.FORMS`) for a QAP form of the prover and an H query form:
    ``snarkjs`` for a zkey, else ``lagrange`` or ``arkworks`` (bellman's coefficients) as the key's H query is."""
    if qap == "snarkjs":
        return "snarkjs"
    return "lagrange" if h_form == "lagrange" else "arkworks"


def _h_out(h, n: int, step: str):
    """The H step's Montgomery output -> the canonical H-MSM scalars (arkworks: the first n - 1 coefficients)."""
    return ops_field.map_last_axis(ops_field.fr.from_mont, h if step != "arkworks" else h[..., : n - 1])


_H_STEPS = {"arkworks": ops_qap.compute_h, "snarkjs": ops_qap.compute_h_snarkjs,
            "lagrange": ops_qap.compute_h_lagrange}


def _h_body(az, bz, cz, tables, n: int, step: str, ntt):
    """Canonical H-MSM scalars in one program (``h=fused``): pad the evaluations to the domain, compute h (step
    ``arkworks``: n - 1 coefficients; ``snarkjs`` / ``lagrange``: n odd-coset evaluations) on the key's ``tables``
    (:func:`cuzk_jax.ops.qap.h_tables`), leave Montgomery form (:func:`_h_out`)."""
    pad = [(0, 0)] * (az.ndim - 1) + [(0, n - az.shape[-1])]
    a, b, c = (jnp.pad(x, pad) for x in (az, bz, cz))
    return _h_out(_H_STEPS[step](a, b, c, config=ntt, tables=tables), n, step)


@functools.lru_cache(maxsize=None)
def device_programs(mesh, qap: str, n: int, ntt, msm, h_form: str = "coefficients") -> dict:
    """The jitted phase programs for one mesh (or None), QAP form, domain, config and H query form; shard_map'ed
    over the partition axis when sharded (each device runs the single-device program on its partitions)."""
    evaluate = functools.partial(_evaluate_body, qap=qap)
    h = functools.partial(_h_body, n=n, step=h_step_form(qap, h_form), ntt=ntt)
    # elementwise over windows of the flattened batch (ops.field.map_last_axis): a whole 2^27-column batch at
    # once needs ~64 GiB of temporaries
    from_mont = functools.partial(ops_field.map_last_axis, ops_field.fr.from_mont)
    # the canonical batch is dead once converted: donated, so stage never holds two copies of z (memory plan)
    to_mont = jax.jit(functools.partial(ops_field.map_last_axis, ops_field.fr.to_mont), donate_argnums=0)
    if mesh is None:
        progs = {"evaluate": jax.jit(evaluate), "h": jax.jit(h), "from_mont": jax.jit(from_mont),
                 "to_mont": to_mont}
        if msm != HOST_MSM:
            progs.update(g1=ops_msm.msm_jit("g1", msm), g2=ops_msm.msm_jit("g2", msm))
        return progs
    P, zs, ps = jax.sharding.PartitionSpec, sharding.along(3, 1), sharding.along(1, 0)
    sm = functools.partial(sharding.shard_map, mesh=mesh)

    def msm_prog(group):
        nd = 1 if group == "g1" else 2  # coordinate axes before the partition axis of the result
        out = sharding.along(nd + 1, nd)
        body = functools.partial(ops_msm.msm, group=group, config=msm)
        return jax.jit(sm(body, in_specs=(P(), zs), out_specs=Jacobian(out, out, out)))

    return {"evaluate": jax.jit(sm(evaluate, in_specs=(P(), zs), out_specs=(zs, zs, zs, ps, ps))),
            "h": jax.jit(sm(h, in_specs=(zs, zs, zs, P()), out_specs=zs)),
            # elementwise: run on the sharded array as it is (windows over the flattened partition axis would
            # cut across devices; each device holds only its partitions anyway)
            "from_mont": jax.jit(ops_field.fr.from_mont),
            "to_mont": jax.jit(ops_field.fr.to_mont, donate_argnums=0),  # likewise (stage of a canonical batch)
            "g1": msm_prog("g1"), "g2": msm_prog("g2")}


def _programs(rk: ResidentKey) -> dict:
    return device_programs(rk.mesh, rk.qap, rk.domain_size, rk.config.ntt, rk.config.msm, rk.h_form)


def precompile(rk: ResidentKey, batch: int | None = None) -> list[str]:
    """Compile ahead, without data, the programs a batch of ``batch`` partitions (default: the plan's batch, else
    1) runs whose shapes do not depend on the witness values: the staging's stacking, the constraint
    evaluation, the H step (split or fused, as :func:`h_scalars` picks), the canonical witness, and per resident
    MSM query the scalar classification (a query the split MSM may take) or the plain MSM. Returns the names
    compiled, in that order.

    A later :func:`run` of such a batch finds them compiled. What still compiles at the first batch: the split
    MSM (its program depends on how many scalars are neither 0 nor 1: :func:`precompile_split` compiles it from a
    witness batch), streamed and table MSMs, small eager ops.
    Why: at a 2^27 domain the first batch took ~30 s longer than the next ones even with every program in the
    persistent cache (tracing, lowering, loading); run this in a thread while the first witnesses are made or when
    a daemon preloads a key. The programs compile side by side in threads named after the caller's
    (:func:`_run_jobs`). One device only (a mesh: nothing is compiled)."""
    if rk.mesh is not None:
        return []
    P = max(1, batch or (rk.plan.batch if rk.plan is not None else 1))
    placed = None if rk.device is None else jax.sharding.SingleDeviceSharding(rk.device)
    spec = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.uint32, sharding=placed)  # noqa: E731
    progs = _programs(rk)
    z = spec(8, P, rk.z_width or rk.num_vars)
    # the evaluation is lowered here: the H step's shapes are its output's
    if isinstance(rk.r1cs, ops_r1cs.ChunkedR1CS):
        with jax.enable_x64(True):  # as evaluate_chunked traces it
            m = rk.eval_rows or rk.r1cs.num_chunks * rk.r1cs.rows_per_chunk
            evaluate = ops_r1cs.chunked_program.lower(rk.r1cs, z, m)
    elif isinstance(rk.r1cs, ops_r1cs.TiledR1CS):
        with jax.enable_x64(True):  # as evaluate_tiled traces it
            evaluate = ops_r1cs.tiled_program.lower(rk.r1cs, z, rk.eval_rows)
    else:
        evaluate = progs["evaluate"].lower(rk.r1cs, z)
    rows = evaluate.out_info[0].shape[-1]
    n = rk.domain_size

    def h():
        if _h_split(rk):
            for lowered in ops_qap.lower_split(rows, n, P, config=rk.config.ntt, form=rk.h_step,
                                               sharding=placed, scalars=True).values():
                lowered.compile()
        else:
            progs["h"].lower(*(spec(8, P, rows),) * 3, rk.h_tables).compile()

    jobs = [("stage", None, lambda: staging.stack_rows.lower(tuple(spec(P, rk.num_vars) for _ in range(8)),
                                                             rk.z_width or rk.num_vars).compile()),
            ("evaluate", None, evaluate.compile), ("h", None, h),
            ("canonical_z", None, lambda: progs["from_mont"].lower(spec(8, P, rk.num_vars)).compile())]
    if rk.host_bases is None:
        for name, group in MSMS.items():
            if name in rk.streamed or rk.tables.get(name) is not None:
                continue
            scalars = spec(8, P, ops_msm.num_bases(rk.queries[name]))
            if _may_split(rk.config) and name in SPLIT_QUERIES:  # B1 and B2 share a shape: one compile
                jobs.append((name, ("classify", scalars.shape),
                             lambda s=scalars: ops_split.classify_jit.lower(s).compile()))
            else:
                jobs.append((name, None, lambda q=rk.queries[name], s=scalars, g=group: progs[g].lower(q, s).compile()))
    return _run_jobs([(name, name if key is None else key, job) for name, key, job in jobs])


def _run_jobs(jobs: list) -> list[str]:
    """Run ``(name, key, thunk)`` jobs side by side, one thunk per distinct key, in threads named after the
    calling thread (:func:`cuzk_jax.compile_cache.compile_in_threads`; a program two names share compiles once).
    Returns the names in order once all are done; raises the first failure in that order."""
    unique = {}
    for _, key, job in jobs:
        unique.setdefault(key, job)
    futures = compile_in_threads(unique, threading.current_thread().name,
                                 workers=min(len(unique), os.cpu_count() or 1))
    concurrent.futures.wait(futures.values())
    for _, key, _ in jobs:
        futures[key].result()
    return [name for name, _, _ in jobs]


def step_sizes(rk: ResidentKey, P: int) -> list[int]:
    """The batch sizes :func:`prove_batch` runs ``P`` partitions in on one device: the plan's batch, and the
    remainder when ``P`` is not a multiple of it (ascending)."""
    step = max(1, min(P, rk.plan.batch)) if rk.plan is not None else max(P, 1)
    return sorted({step, P % step} - {0})


def precompile_split(rk: ResidentKey, z: np.ndarray, montgomery: bool = True) -> list[str]:
    """Compile ahead the split MSMs (:func:`msm`'s sparse-scalar path) that a batch like ``z`` (uint32 ``(8, P,
    num_vars)``, as :func:`prove_batch` takes it) will run: their programs depend on how many scalars are neither 0
    nor 1 (``ops.msm_split.capacity_for``), so :func:`precompile` cannot make them without a witness. Stages ``z``,
    classifies each witness query's scalars as :func:`msm` will, and compiles the split program of every query
    that splits (batches whose counts round to the same power of two then find it compiled). Returns
    ``"name:capacity"`` per program compiled; nothing for a key whose queries cannot split (host MSM,
    ``split=off``, the XLA kernels under ``auto``, a mesh), and no device memory held afterwards."""
    if not _may_split(rk.config) or rk.host_bases is not None or rk.mesh is not None:
        return []
    zd = stage(rk, z, montgomery)
    zc = canonical_z(rk, zd)
    del zd
    done = []
    for name in SPLIT_QUERIES:
        if name in rk.streamed or name not in rk.queries:
            continue
        scalars = query_scalars(rk, name, zc, None)
        split, counts = _split_decision(rk, name, scalars, None)
        if split:
            cap = ops_split.capacity_for(counts)
            ops_split.msm_split_jit(MSMS[name], rk.config.msm, capacity=cap).lower(rk.queries[name],
                                                                                   scalars).compile()
            done.append(f"{name}:{cap}")
        del scalars
    return done


def evaluate(rk: ResidentKey, z):
    """Phase 2: ``(A z, B z, C z, ok, first)`` of a staged batch -- Montgomery ``(8, P, m)`` evaluations, per
    partition whether every constraint holds and the first one that does not (-1 when ok; the snarkjs form has no
    C matrix, takes ``C z = A z * B z`` and reports every partition ok)."""
    if isinstance(rk.r1cs, ops_r1cs.ChunkedR1CS):  # the plan's row chunks
        return ops_r1cs.evaluate_chunked(rk.r1cs, z, num_rows=rk.eval_rows)
    if isinstance(rk.r1cs, ops_r1cs.TiledR1CS):
        return ops_r1cs.evaluate_tiled(rk.r1cs, z, rk.eval_rows)
    return _programs(rk)["evaluate"](rk.r1cs, z)


def _h_split(rk: ResidentKey) -> bool:
    """Whether the H step runs as the split programs (:func:`h_scalars`; :func:`precompile` compiles the same)."""
    mode = rk.config.h
    return rk.mesh is None and (mode == "split" or mode == "auto" and rk.domain_size >= memplan.H_SPLIT_DOMAIN)


def h_scalars(rk: ResidentKey, az, bz, cz):
    """Phase 3: the canonical H-MSM scalars ``(8, P, len(h bases))`` from the evaluations (module docstring).

    With ``ProverConfig.h`` ``"split"``, or ``"auto"`` from a :data:`~cuzk_jax.groth16.plan.H_SPLIT_DOMAIN`
    domain up (one device): :func:`cuzk_jax.ops.qap.compute_h_split`'s four programs (one of a, b, c transformed
    at a time) instead of one -- the single program's temporaries at a 2^27 domain alone asked for 64 GiB on an
    H200 (the memory plan's ``per_partition_h`` models the split form where ``"auto"`` picks it)."""
    if _h_split(rk):  # its last program gives the canonical scalars itself (no conversion over the batch)
        return ops_qap.compute_h_split(az, bz, cz, rk.domain_size, config=rk.config.ntt, form=rk.h_step,
                                       tables=rk.h_tables, scalars=True)
    return _programs(rk)["h"](az, bz, cz, rk.h_tables)


def canonical_z(rk: ResidentKey, z):
    """The staged batch's witness in canonical form, without the bucket padding of :func:`stage`."""
    return _programs(rk)["from_mont"](z[..., :rk.num_vars])


def query_scalars(rk: ResidentKey, name: str, zc, h):
    """One MSM's canonical scalars from :func:`canonical_z` ``zc`` and the H scalars ``h``: the witness for A, B1,
    B2, its private columns for L, ``h`` for H -- restricted to the columns whose bases the key keeps
    (:attr:`ResidentKey.columns`)."""
    sc = h if name == "msm_h" else zc[:, :, rk.num_inputs:] if name == "msm_l" else zc
    return sc if rk.columns.get(name) is None else jnp.take(sc, rk.columns[name], axis=2)


#: Queries whose scalars are witness values (:data:`plan.SPLIT_QUERIES`).
SPLIT_QUERIES = memplan.SPLIT_QUERIES
#: ``split="auto"`` splits when at most this share of a query's scalars is neither 0 nor 1.
SPLIT_AUTO_OTHER = 0.5


def _may_split(config: ProverConfig) -> bool:
    """Whether the witness queries may take the split MSM: ``split=on``, or ``auto`` with the GPU kernels."""
    if config.msm == HOST_MSM or config.split == "off":
        return False
    return config.split == "on" or getattr(config.msm, "kernel", None) == "pallas"


def _split_decision(rk: ResidentKey, name: str, scalars, stats: dict | None):
    """``(split?, counts)`` for one MSM: classify the scalars (zeros / ones / others per partition, one small
    device -> host copy) when the config may split this query, record the shares in ``stats``."""
    if not _may_split(rk.config) or name not in SPLIT_QUERIES or rk.mesh is not None:
        return False, None
    counts = np.asarray(jax.device_get(ops_split.classify_jit(scalars)))  # (3, P)
    total = max(int(scalars.shape[-1]), 1)
    if stats is not None:
        kinds = ops_split.fractions(counts)
        stats[name] = {k: round(kinds[k], 6) for k in ops_split.KINDS}
    use = rk.config.split == "on" or counts[2].max() <= SPLIT_AUTO_OTHER * total
    return bool(use), counts


def msm(rk: ResidentKey, name: str, scalars, stats: dict | None = None):
    """Phase 4, one MSM: over the key's window table of ``name`` when it holds one, over bases streamed from host
    memory when the plan streams this query, split by scalar kind (zeros skipped, ones summed, Pippenger over the
    rest) when the config says so, else the plain MSM of the config -- a Jacobian result with batch shape ``(P,)``
    -- or, with ``msm=host``, arkworks' multiexp per partition: a list of ``P`` host affine points. ``stats``:
    receives the zero / one / other shares of the scalars of a query that was classified."""
    if rk.host_bases is not None:
        import py_arkworks_bls12381 as ark

        bases = rk.host_bases[name]
        point = ark.G2Point if MSMS[name] == "g2" else ark.G1Point
        curve = ref_g2 if MSMS[name] == "g2" else ref_g1
        sc = np.asarray(scalars)
        out = []
        for p in range(sc.shape[1]):
            live = np.flatnonzero(sc[:, p, :].any(axis=0))  # zero scalars contribute nothing: skip them
            raw = np.ascontiguousarray(sc[:, p, live].T).astype("<u4").tobytes()  # 32-byte little-endian
            ks = [ark.Scalar.from_le_bytes(raw[i:i + 32]) for i in range(0, len(raw), 32)]
            pts = [bases[i] for i in live.tolist()]
            out.append(host_curve.from_arkworks(curve, point.multiexp_unchecked(pts, ks)) if pts else None)
        return out
    group = MSMS[name]
    split, counts = _split_decision(rk, name, scalars, stats)
    if name in rk.streamed:  # bases in host memory, copied chunk by chunk (the plan's choice)
        return ops_split.msm_streamed(rk.streamed[name], scalars, group, config=rk.config.msm,
                                      chunk=rk.plan.chunk, split=split, device=rk.device)
    if split:  # sparse scalars: the split MSM (faster than the window tables on such scalars)
        return ops_split.msm_split_jit(group, rk.config.msm, capacity=ops_split.capacity_for(counts))(
            rk.queries[name], scalars)
    table = rk.tables.get(name)
    if table is not None:
        return ops_pre.msm_jit(group, table.c, rk.config.msm)(table.points, scalars)
    return _programs(rk)[group](rk.queries[name], scalars)


@dataclasses.dataclass
class BatchOutput:
    """One batch's results on the host: ``ok`` (bool, P), ``first`` (int, P: first failing constraint or -1),
    ``points`` (MSM phase name -> Jacobian limb arrays) and ``host`` (MSM phase name -> list of host affine points:
    given by a backend that computes them on the host, else converted from ``points`` on first use);
    ``scalar_kinds``: MSM phase name -> shares of zero / one / other scalars (the queries that were classified
    for the split MSM)."""

    ok: np.ndarray
    first: np.ndarray
    points: dict
    host: dict | None = None
    scalar_kinds: dict = dataclasses.field(default_factory=dict)

    def host_points(self) -> dict:
        """MSM phase name -> list of host affine points (one batched conversion per MSM, done once)."""
        if self.host is None:  # lists are host points already (msm=host)
            self.host = {name: pts if isinstance(pts, list) else
                         host_curve.from_device(g2 if MSMS[name] == "g2" else g1, pts)
                         for name, pts in self.points.items()}
        return self.host


@contextlib.contextmanager
def device_memory_errors(rk: ResidentKey, where: Callable[[], str]):
    """Turns the device allocator's out-of-memory error (``RESOURCE_EXHAUSTED``, raised deep inside XLA) into one
    :class:`~cuzk_jax.errors.DeviceMemoryError` naming the phase (``where()``), the failed allocation and the
    key's memory plan; other errors pass unchanged."""
    try:
        yield
    except jax.errors.JaxRuntimeError as e:
        text = str(e)
        if "RESOURCE_EXHAUSTED" not in text and "Out of memory" not in text:
            raise
        size = re.search(r"allocate ([0-9.]+ ?[KMGT]i?B)", text)
        plan = rk.plan.describe() if rk.plan is not None else "no memory plan (unbounded device budget)"
        raise DeviceMemoryError(
            f"device out of memory in phase {where()!r}"
            f"{f' allocating {size.group(1)}' if size else ''}; {plan}. Give the prover a lower device_budget "
            f"(--prover=device_budget=...) so the plan streams more bases or runs smaller batches") from None


def timed(name: str, fn: Callable, record: dict | None):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    if record is not None:  # summed: a prove of several batches adds up each phase
        record[name] = record.get(name, 0.0) + time.perf_counter() - t0
    return out


#: The MSMs whose scalars are the witness, in the order :func:`run` runs them (the H MSM comes last).
WITNESS_MSMS = tuple(name for name in MSMS if name != "msm_h")


def run(rk: ResidentKey, z, phase: Callable | None = None, *, sync_phases: bool = True,
        witness_done: Callable[[], None] | None = None) -> BatchOutput:
    """The device phases of one staged batch ``z`` (from :func:`stage`): evaluate, h, the five MSMs (H last),
    fetch.

    ``phase(name, fn) -> fn()`` times one phase and blocks on its result (the engine records it on its timeline;
    default: :func:`timed` without a record). ``sync_phases=False`` dispatches every phase and blocks once
    (phase ``"device"``): fewer gaps, no per-phase times. ``witness_done()``: called once the witness is dead --
    after the last MSM that reads it, before the H MSM -- when this function has dropped its references to ``z``
    and to its canonical copy (the caller must hold none either for their memory to be freed; with
    ``sync_phases=False`` the witness MSMs are waited for first): where :func:`prove_batch` stages the next step
    with ``prefetch="late"``."""
    phase = phase or (lambda name, fn: timed(name, fn, None))
    record = phase
    if not sync_phases:
        phase = lambda name, fn: fn()  # noqa: E731  (one block for the whole batch, below)

    kinds: dict = {}
    where = ["evaluate"]  # the phase running, for the out-of-memory error
    held = [z]  # the only reference to the staged witness from here on, dropped before the H MSM
    del z

    def step(name, fn):
        where[0] = name
        return phase(name, fn)

    def device_work():
        az, bz, cz, ok, first = step("evaluate", lambda: evaluate(rk, held[0]))
        h = step("h", lambda: h_scalars(rk, az, bz, cz))
        del az, bz, cz  # the evaluations are dead once h exists: free them before the MSMs (memory plan)
        zc = [canonical_z(rk, held[0])]
        points = {}
        for name in WITNESS_MSMS:  # each query's gathered scalars made just before its MSM, dead after it
            points[name] = step(name, lambda name=name: msm(rk, name, query_scalars(rk, name, zc[0], h), kinds))
        zc.clear()  # the witness is dead: the H MSM reads h only
        held.clear()
        if witness_done is not None:
            if not sync_phases:  # dispatched, not done: wait for the witness MSMs, whose inputs are then freed
                jax.block_until_ready(points)
            witness_done()
        points["msm_h"] = step("msm_h", lambda: msm(rk, "msm_h", query_scalars(rk, "msm_h", None, h), kinds))
        return ok, first, {name: points[name] for name in MSMS}

    with device_memory_errors(rk, lambda: where[0] if sync_phases else "device"):
        ok, first, points = device_work() if sync_phases else record("device", device_work)
        ok, first, points = record("fetch", lambda: jax.device_get((ok, first, points)))
    return BatchOutput(ok=np.asarray(ok), first=np.asarray(first), points=points, scalar_kinds=kinds)


def unsatisfied(rk, out: BatchOutput, i: int, partition: int | None = None) -> Unsatisfied | None:
    """The :class:`~cuzk_jax.errors.Unsatisfied` error of slot ``i`` of a batch (named by ``partition``, default
    ``i``), or None when it is satisfied."""
    if out.ok[i]:
        return None
    c = int(out.first[i])
    name = rk.constraint_name(c) if rk.constraint_name else f"constraint {c}"
    return Unsatisfied(c, name, i if partition is None else partition)


def finish(rk, out: BatchOutput, i: int, r: int, s: int) -> tuple:
    """Host affine ``(A, B, C)`` of slot ``i`` from its MSM results and the randomisers ``(r, s)`` (see the
    module docstring, phase 6). ``rk``: anything with a ``finish`` :class:`FinishPoints` (a :class:`ResidentKey`,
    or the engine's host-reference resident)."""
    import py_arkworks_bls12381 as ark

    host = out.host_points()
    ma, mb1, mb2, ml, mh = (host[name][i] for name in MSMS)
    k = rk.finish
    ag1 = functools.partial(host_curve.to_arkworks, ref_g1)
    rr, ss = ark.Scalar(r % R), ark.Scalar(s % R)
    # Compute A
    a = k.alpha_g1 + ag1(ma) + k.delta_g1 * rr
    # Compute B in G2 (and B1 in G1 for C)
    b2 = k.beta_g2 + host_curve.to_arkworks(ref_g2, mb2) + k.delta_g2 * ss
    b1 = k.beta_g1 + ag1(mb1) + k.delta_g1 * ss
    # Finish C
    c = ag1(ml) + ag1(mh) + a * ss + b1 * rr - k.delta_g1 * ark.Scalar(r * s % R)
    return (host_curve.from_arkworks(ref_g1, a), host_curve.from_arkworks(ref_g2, b2),
            host_curve.from_arkworks(ref_g1, c))


def public_inputs(rk: ResidentKey, z: np.ndarray, montgomery: bool = True) -> list[list[int]]:
    """The public inputs of every partition of a host batch ``z`` (``(8, P, num_vars)``, Montgomery form unless
    ``montgomery=False``): columns ``1 .. num_inputs - 1`` (column 0 is the constant one)."""
    return [encoding.limbs_to_ints(np.asarray(z[:, p, 1:rk.num_inputs]), "fr", montgomery=montgomery)
            for p in range(z.shape[1])]


def _finish_step(rk: ResidentKey, out, lo: int, randomness, timings: Timings) -> list:
    """One step of :func:`prove_batch` after its device run (partitions ``lo ..``, one ``(r, s)`` pair each):
    scalar kinds recorded, the first unsatisfied partition raised, then the step's proofs finished."""
    timings.batches += 1
    for name, kinds in out.scalar_kinds.items():
        timings.scalar_kinds.setdefault(name, kinds)
    for i in range(len(randomness)):
        err = unsatisfied(rk, out, i, lo + i)
        if err is not None:
            raise err
    t0 = time.perf_counter()
    proofs = [finish(rk, out, i, r, s) for i, (r, s) in enumerate(randomness)]
    timings.phases["finish"] = timings.phases.get("finish", 0.0) + time.perf_counter() - t0
    return proofs


def run_steps(rk: ResidentKey, z: np.ndarray, step: int, phase: Callable, *, montgomery: bool = True,
              sync_phases: bool = True, mode: str = "late", witness_done: Callable[[], None] | None = None):
    """Stage and :func:`run` a host batch ``z`` (``(8, P, num_vars)``) in steps of ``step`` partitions: yields
    ``(first partition, BatchOutput)`` per step, in order. ``phase`` as in :func:`run`; it also times ``"stage"``
    (the copy, or the wait for a copy made ahead). ``mode`` (:data:`plan.PREFETCH_MODES
    <cuzk_jax.groth16.plan.PREFETCH_MODES>` less ``"auto"``): when the next step's witnesses are copied, in a worker
    thread -- ``"on"`` while the current step runs, ``"late"`` once its witness is dead (:func:`run`'s
    ``witness_done``: no memory beyond one step's), ``"off"`` after it. ``witness_done``: called once the LAST
    step's witness is dead (a caller that stages more work after this batch, as the engine does)."""
    if mode not in ("on", "late", "off"):
        raise ValueError(f"run_steps: mode must be on, late or off, got {mode!r}")
    starts = list(range(0, int(z.shape[1]), step))

    def staged(lo):
        return jax.block_until_ready(stage(rk, z[:, lo:lo + step], montgomery))

    mode = mode if len(starts) > 1 else "off"
    pool = ThreadPoolExecutor(1, thread_name_prefix="stage") if mode != "off" else None
    ahead = [pool.submit(staged, starts[0])] if mode == "on" else []  # at most one future: the next step's
    try:
        for j, lo in enumerate(starts):
            # the future is popped, so nothing but the list below refers to the staged step once it is done
            zd = [phase("stage", lambda lo=lo: ahead.pop().result() if ahead else staged(lo))]
            nxt = starts[j + 1] if j + 1 < len(starts) else None
            if mode == "on" and nxt is not None:
                ahead.append(pool.submit(staged, nxt))
            if nxt is None:
                done = witness_done
            elif mode == "late":
                done = lambda nxt=nxt: ahead.append(pool.submit(staged, nxt))  # noqa: E731
            else:
                done = None
            # run holds the only reference to the staged step (popped here), so it can free it for the next one
            yield lo, run(rk, zd.pop(), phase, sync_phases=sync_phases, witness_done=done)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def prefetch_mode(rk: ResidentKey) -> str:
    """How :func:`prove_batch` stages a batch's later steps: the config's ``prefetch`` when it names a mode (a
    variant over the same plan may), for ``"auto"`` the plan's choice (:attr:`MemoryPlan.prefetch
    <cuzk_jax.groth16.plan.MemoryPlan.prefetch>`; ``"late"`` without a plan)."""
    if rk.config.prefetch != "auto":
        return rk.config.prefetch
    return rk.plan.prefetch if rk.plan is not None else "late"


def prove_batch(rk: ResidentKey, z: np.ndarray, randomness: Sequence[tuple[int, int]] | None = None,
                timings: Timings | None = None, *, verify: bool = True, sync_phases: bool = True,
                montgomery: bool = True) -> list[tuple]:
    """Stage, run and finish one batch ``z`` (``(8, P, num_vars)`` limbs, Montgomery form unless
    ``montgomery=False``: canonical limbs are converted on the device by :func:`stage`): the ``(A, B, C)`` host
    points of every partition, in order.

    Raises :class:`~cuzk_jax.errors.Unsatisfied` naming the first partition whose witness does not satisfy the
    R1CS (bellman form), before any finishing; with ``verify`` (the default) every proof is checked with the key's
    :attr:`~ResidentKey.verifier` before it is returned, and :class:`~cuzk_jax.errors.ProofRejected` names the
    partitions whose proofs do not verify -- no invalid proof leaves the prover (``verify=False`` for benchmarks)."""
    t_start = time.perf_counter()
    timings = timings if timings is not None else Timings()
    z = np.asarray(z)
    P = int(z.shape[1]) if z.ndim == 3 else 0
    randomness = list(randomness) if randomness is not None else random_randomness(P)
    if len(randomness) != P:
        raise BadInput(f"{P} witnesses but {len(randomness)} (r, s) pairs")
    # the memory plan's batch: partitions beyond it run as further batches over the same resident key
    step = step_sizes(rk, P)[-1]
    if rk.mesh is not None and step < P:  # sharded sub-batches split evenly over the mesh's devices
        step = max(rk.mesh.size, step - step % rk.mesh.size)
    proofs = []
    mode = prefetch_mode(rk)
    with contextlib.closing(run_steps(rk, z, step, lambda name, fn: timed(name, fn, timings.phases),
                                      montgomery=montgomery, sync_phases=sync_phases, mode=mode)) as steps:
        for lo, out in steps:
            proofs += _finish_step(rk, out, lo, randomness[lo:lo + step], timings)
    if verify and rk.verifier is not None:
        t0 = time.perf_counter()
        ok = rk.verifier(public_inputs(rk, z, montgomery), proofs)
        timings.phases["verify"] = time.perf_counter() - t0
        bad = [i for i, good in enumerate(ok) if not good]
        if bad:
            why = ("the key or a device result is wrong" if rk.qap == "bellman" else
                   "the witness does not satisfy the circuit, or the zkey does not belong to it")
            raise ProofRejected(f"proof of partition{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))} does "
                                f"not verify ({why}); nothing was returned")
    timings.total = time.perf_counter() - t_start
    timings.partitions = P
    return proofs
