"""The memory plan: how a proof batch fits a device budget and a host budget (cuzk's resident SRS + batching).

At sector scale (2^27 domain, ~130M constraints per partition) nothing fits by accident: one partition's
evaluations ``A z, B z, C z`` are 12 GiB, its H vector 4 GiB, a key's bases ~70 GiB. Given the sizes of a key and
its R1CS (:class:`Shape`, taken from the host arrays *before* anything is uploaded), the number of partitions to
prove and two budgets, :func:`make_plan` decides

* **batch** -- how many partitions go through the device phases together (cuzk's batch-all-partitions: as many
  as fit, at most the number asked for; the rest run as further batches over the same resident key);
* **resident / streamed** -- which MSM queries keep their bases on the device and which stream them from host
  memory in chunks of ``chunk`` points per MSM (:func:`cuzk_jax.ops.msm_split.msm_streamed`); streaming starts
  with the biggest query (B in G2, then H, L, A, B1) until the rest fits;
* **tables** -- whether the precomputed window tables fit as well (they are only built when everything else fits
  with the full batch, since they trade memory for speed);
* **eval_chunk** -- rows per chunk of the constraint evaluation when the one-shot gather does not fit.

and says it in one log line (:meth:`MemoryPlan.describe`). A budget too small for even one partition with every
query streamed raises :class:`~cuzk_jax.errors.MemoryBudgetError` before any device work.

Fixed bytes: the resident bases, the device R1CS tables (``Shape.r1cs_bytes``: the bytes of the R1CS arrays the
key is planned with -- flat, 8 B per padded nonzero, its column and coefficient id, and 12 B per constraint of CSR
row pointers, no per-nonzero row ids; tiled, 12 B per pattern nonzero with the column step), the streamed
queries' two chunks in flight and the H step's tables (:func:`cuzk_jax.ops.qap.table_bytes`, ~16 n: the root
table the prover holds beside the key).

The byte counts are estimates of the live device buffers of each phase (documented per function below; checked
against the allocator's peak in the sector benchmark), rounded up; ``SAFETY`` covers the allocator's
fragmentation and XLA's scratch. Representation sizes: an Fr element is 8 uint32 limbs (32 B), a G1 affine base
2 x 12 limbs + an infinity flag (97 B), a G2 base 193 B.

Phase peaks per partition (``m`` constraints incl. input rows, ``v`` variables, ``n`` domain, ``nnz`` nonzeros of
A, B and C together, ``N_q`` bases of query ``q``):

* evaluate: ``z`` (32 v) + the gathered products and their uint64 sums (~96 B per nonzero, or per nonzero of one
  chunk) + the three outputs (96 m); the flat one-shot evaluation runs a batch's partitions one after another,
  so a batch holds every partition's outputs but one partition's gather;
* h: ``z`` + the three evaluations padded to ``n`` (96 n) + NTT work (~96 n) + h (32 n);
* msm: ``z`` + h + the scalar copies (32 B per scalar of the current query and its canonical copy of ``z``) + the
  MSM's temporaries (:func:`msm_work_bytes`: the plain path's bucket arrays and per-point copies, the split
  path's per-base working set; measured with XLA's buffer assignment), per the streamed chunk when the bases
  stream. The plain path's bucket arrays grow with the partitions of one pass, not in proportion to the batch, so
  a batch's peak (``estimate["batch"]``) is computed for the batch itself.
"""

from __future__ import annotations

import dataclasses
import logging
import math

from cuzk_jax.errors import MemoryBudgetError

log = logging.getLogger(__name__)

G1_BYTES = 97  # 2 x 12 uint32 limbs + the infinity flag
G2_BYTES = 193
FR_BYTES = 32
#: Queries in the order they are streamed when the bases do not all fit (largest per point first).
STREAM_ORDER = ("msm_b2", "msm_h", "msm_l", "msm_a", "msm_b1")
GROUPS = {"msm_a": "g1", "msm_b1": "g1", "msm_b2": "g2", "msm_l": "g1", "msm_h": "g1"}
#: Fraction of a device's reported memory used as the default budget (the rest: allocator and XLA scratch).
DEFAULT_DEVICE_FRACTION = 0.85
#: Multiplier on the estimates (allocator fragmentation, XLA temporaries the formulas do not name). The 2^27 sector
#: on the H200 peaked within ~1 % of the unmultiplied estimate of its configuration (sessions 20-21: 108.9 / 102.1
#: GiB measured against 107.8 / 106.3; session 24, with the MSM terms refitted: 99.38 GiB, the split B2 that ran
#: ~12 GiB below the plain path the plan also allows for), so 1.10 leaves a ~9 % margin.
SAFETY = 1.10
#: Partitions a key's plan is made for when the caller names none (a PoRep sector).
DEFAULT_PARTITIONS = 10
#: Default points per streamed chunk (bounded above by the query size).
DEFAULT_CHUNK = 1 << 22
# from this domain size up the prover's H step runs one input vector per program (pipeline.h_scalars, its
# default "auto"), which the per-partition H estimate below models: the program for a, b, c together held 65 GiB
# of temporaries at a 2^27 domain on the H200 before its elementwise steps ran in windows (session 13)
H_SPLIT_DOMAIN = 1 << 20
#: Temporaries of the split H step's largest program (the pointwise ``A B - C``, digit reversal and last transform)
#: per domain point: XLA's buffer assignment on an H200 at 2^27 (12 GiB with the key's H tables as arguments,
#: session 18; 14 GiB when the program built its own, session 13; bench/results/RESULTS.md).
SPLIT_H_TEMP_BYTES = 96
#: Split-path MSM temporaries per padded base (the MSM pads its points to a power of two), by group: XLA's buffer
#: assignment on an H200 (the ones' sum and the classification over every base; G1: 31.6 GiB at 2^27 and 15.7 GiB
#: at 2^26 points, sessions 13 and 15; G2: 2^22-point chunks, session 13, and 28.0 GiB at 2^26, session 15).
SPLIT_BYTES_PER_BASE = {"g1": 261, "g2": 521}
#: ... and when the bases are resident as ``ops.msm.BaseRows`` (read in place: no padded, transposed copy per call;
#: :attr:`Shape.rows`): XLA's buffer assignment on an H100 (the same XLA GPU backend as the H200's; session 27) --
#: G1 2.32 / 4.07 / 8.14 GiB over 2^25 / 2^26 / 2^27 padded bases (74 / 65 / 65 B each), G2 1.48 / 2.29 / 4.57
#: GiB over 2^24 / 2^25 / 2^26 (95 / 73 / 73 B).
SPLIT_ROWS_BYTES_PER_BASE = {"g1": 75, "g2": 96}
#: Plain-path MSM temporaries (XLA's buffer assignment on an H200, refitted in session 24 on the straight-line
#: Pallas pass; :func:`plain_msm_bytes`): copies of the bucket array, each ``4 x Lc`` uint32 words per bucket slot,
#: when a partition's points take one pass ...
PLAIN_BUCKET_COPIES = 7
#: ... and when they take several (chunks whose bucket arrays are merged into a running one, then reduced once)
PLAIN_CHUNKED_BUCKET_COPIES = 10
#: ... and, per padded point, the point-major copy of the bases (shared by the batch; none when they are resident as
#: ``ops.msm.BaseRows``: G1 2^27 21.29 GiB of temporaries against 34.70, session 27) and per partition a scalar copy
PLAIN_BASE_ROW_BYTES = {"g1": 96, "g2": 192}
PLAIN_SCALAR_BYTES = 32
#: ... and the pair arrays (keys, values, the sort's copies) of a pass longer than the passes the fit above was made
#: on (13 windows x 2^24 points): G1 2^27 in 2^25-point passes held 3.70 GiB more than in 2^24-point ones (session 18)
PLAIN_PAIR_BYTES = 18
PLAIN_PAIRS_IN_FIT = 13 << 24
#: The queries whose scalars are witness values (mostly 0 / 1 in a SHA-256-heavy circuit; H's are dense): the split
#: MSM may take them.
SPLIT_QUERIES = ("msm_a", "msm_b1", "msm_b2", "msm_l")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_bytes(text: str | int | None) -> int | None:
    """``"96GiB"``, ``"1.5g"``, ``"500M"``, ``"123456"`` or an int -> bytes (binary units; ``None``/``""``/``"auto"``
    -> None). Raises :class:`~cuzk_jax.errors.BadInput` naming the text otherwise."""
    from cuzk_jax.errors import BadInput

    if text is None or isinstance(text, int):
        return text
    s = str(text).strip().lower().replace("_", "")
    if s in ("", "auto", "none"):
        return None
    num = s.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = s[len(num):]
    try:
        value = float(num)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not math.isfinite(value) or value <= 0:
        raise BadInput(f"cannot read {text!r} as a memory size (e.g. 96GiB, 512M, 1.5g, or a byte count)")
    return int(value * _UNITS[unit])


def fmt_bytes(n: int | float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


@dataclasses.dataclass(frozen=True)
class Shape:
    """The sizes a plan needs: ``num_vars`` (z length), ``num_rows`` (evaluated constraints, input rows included),
    ``nnz`` (nonzeros of A, B and C together as the device holds them), ``domain`` (n), ``bases`` (query name ->
    number of bases the key keeps on the device), ``r1cs_bytes`` (the device R1CS tables, the sum of their arrays'
    bytes: for the flat form 8 per padded nonzero, 12 per constraint and the coefficient table), ``eval_bytes``
    (the evaluation's device bytes for one partition in one shot, from
    :func:`cuzk_jax.ops.r1cs.evaluate_device_bytes`; None: the formula of the module docstring), ``eval_serial``
    (the one-shot evaluation runs a batch's partitions one after another, so only one partition's gather
    intermediates are live: the flat layout), ``rows`` (the resident queries are ``ops.msm.BaseRows``, which the
    MSMs read in place: their per-call copy of the bases is not counted; streamed queries are copied as before)."""

    num_vars: int
    num_rows: int
    nnz: int
    domain: int
    bases: dict
    r1cs_bytes: int
    eval_bytes: int | None = None
    eval_serial: bool = False
    rows: bool = False

    def query_bytes(self, name: str) -> int:
        return self.bases[name] * (G2_BYTES if GROUPS[name] == "g2" else G1_BYTES)


def plain_msm_bytes(group: str, n: int, batch: int = 1, max_pairs: int | None = None, rows: bool = False) -> int:
    """Device temporaries of the plain MSM over ``n`` bases for ``batch`` partitions: the bucket array's copies
    (``nbuf`` slots: the buckets of one pass, the partitions per pass times ``W 2^(c-1)`` as
    :func:`cuzk_jax.ops.msm.pass_shape` picks them, rounded up to a power of two; :data:`PLAIN_BUCKET_COPIES`, or
    :data:`PLAIN_CHUNKED_BUCKET_COPIES` when a partition's points take several passes) plus, per padded point, the
    bases' point-major copy and each partition's scalars, plus the pairs of a pass longer than
    :data:`PLAIN_PAIRS_IN_FIT`. Fitted against XLA's buffer assignment on an H200 (``bench --op=memory``, session
    24; model in parentheses): G1 one partition of 2^24 / 2^26 / 2^27 points 12.16 / 26.70 / 34.70 GiB (12.5 /
    26.66 / 34.66), 10 x 2^20 10.56 (10.91); G2 2^23 / 2^24 / 2^25 padded points 21.06 / 22.66 / 30.25 (22.75 / 24.5
    / 31.66), 10 x 2^19 21.06 (21.25). ``max_pairs``: the MSM config's bound on one pass (None:
    :func:`cuzk_jax.ops.msm.default_max_pairs`, as the MSM takes it)."""
    from cuzk_jax.ops import msm as ops_msm

    n = ops_msm.padded_size(max(int(n), 1))
    c, G, chunk = ops_msm.pass_shape(batch, n, max_pairs or ops_msm.default_max_pairs(n))  # as ops.msm.msm does
    lc = 12 if group == "g1" else 24
    nbuf = ops_msm.pow2_ceil(G * ops_msm.num_windows(c) * (1 << (c - 1)) + 2)
    pairs = G * chunk * ops_msm.num_windows(c)
    copies = PLAIN_CHUNKED_BUCKET_COPIES if chunk < n else PLAIN_BUCKET_COPIES
    return (copies * nbuf * 4 * lc * 4
            + ((0 if rows else PLAIN_BASE_ROW_BYTES[group]) + PLAIN_SCALAR_BYTES * batch) * n
            + PLAIN_PAIR_BYTES * max(0, pairs - PLAIN_PAIRS_IN_FIT))


def msm_work_bytes(query: str, n: int, batch: int = 1, max_pairs: int | None = None, rows: bool = False) -> int:
    """Device temporaries of one batch's MSM over ``n`` bases of ``query``: the larger of the paths it may take
    (a witness query may take the split MSM, decided per batch): :func:`plain_msm_bytes`, and for the witness
    queries :data:`SPLIT_BYTES_PER_BASE` per padded base and partition (:data:`SPLIT_ROWS_BYTES_PER_BASE` with
    ``rows``: bases resident as ``ops.msm.BaseRows``)."""
    from cuzk_jax.ops import msm as ops_msm

    group = GROUPS[query]
    out = plain_msm_bytes(group, n, batch, max_pairs, rows)
    if query in SPLIT_QUERIES:
        per = (SPLIT_ROWS_BYTES_PER_BASE if rows else SPLIT_BYTES_PER_BASE)[group]
        out = max(out, per * ops_msm.padded_size(max(int(n), 1)) * batch)
    return out


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """A decided plan (see the module docstring). ``estimate`` maps each component to its device bytes;
    ``peak`` is the estimated device peak of one batch, ``host`` the estimated host bytes the prover holds;
    ``shape`` the sizes it was made for."""

    device_budget: int | None
    host_budget: int | None
    partitions: int
    batch: int
    resident: tuple
    streamed: tuple
    chunk: int
    tables: bool
    eval_chunk: int | None
    peak: int
    host: int
    estimate: dict
    shape: Shape | None = None
    max_pairs: int | None = None  # the MSM pass bound the plan chose (None: the config's, left as it is)
    #: how the prover stages the next step's witnesses (:data:`PREFETCH_MODES`): ``"on"`` during the whole step
    #: (counted in :attr:`peak`), ``"late"`` once the step's witness is dead (before its H MSM: no extra bytes),
    #: ``"off"`` not at all
    prefetch: str = "off"

    @property
    def batches(self) -> int:
        return -(-self.partitions // self.batch)

    def describe(self) -> str:
        parts = [f"{self.partitions} partition(s) in {self.batches} batch(es) of <= {self.batch}",
                 f"device budget {fmt_bytes(self.device_budget)}, est. peak {fmt_bytes(self.peak)}",
                 f"host budget {fmt_bytes(self.host_budget)}, est. {fmt_bytes(self.host)}",
                 f"resident: {', '.join(self.resident) or 'none'}"]
        if self.streamed:
            parts.append(f"streamed: {', '.join(self.streamed)} ({self.chunk} points per chunk)")
        parts.append("window tables" if self.tables else "no window tables")
        if self.eval_chunk:
            parts.append(f"evaluation in chunks of {self.eval_chunk} rows")
        if self.max_pairs:
            parts.append(f"MSM passes of <= 2^{self.max_pairs.bit_length() - 1} pairs")
        if self.prefetch == "on":
            parts.append("next witnesses staged during each step (prefetch)")
        elif self.prefetch == "late":
            parts.append("next witnesses staged during each step's H MSM (late prefetch)")
        return "memory plan: " + "; ".join(parts)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["resident"], d["streamed"] = list(self.resident), list(self.streamed)
        if self.shape is not None:
            d["shape"] = dataclasses.asdict(self.shape)
        return d


#: ``ProverConfig.prefetch`` values (:func:`make_plan_prefetch`).
PREFETCH_MODES = ("on", "late", "off", "auto")


def make_plan_prefetch(shape: Shape, partitions: int, mode: str, staged_ahead: int = 0, **kw) -> MemoryPlan:
    """:func:`make_plan` for a prover whose ``prefetch`` is ``mode`` (:attr:`MemoryPlan.prefetch` records the
    outcome):

    * ``"on"`` -- the next step's witnesses are staged while the whole step runs: planned with them on the
      device (two more copies of ``z`` per partition: staging stacks the limb rows there);
    * ``"late"`` -- staged once the step's witness is dead: after the last MSM that reads it, during the H MSM
      (``pipeline.run`` frees the staged and the canonical witness first, so the two new copies take the place of
      those two and the plan counts nothing more);
    * ``"off"`` -- step by step;
    * ``"auto"`` -- ``"late"``: it hides the copy behind the H MSM (the longest phase at sector scale) at no memory
      cost, where staging during the whole step cost the 2^27 sector on the H200 a streamed B2 query, or slowed its
      H step (bench/results/RESULTS.md, session 21).

    ``staged_ahead``: batches a caller may keep staged on the device while another runs (the engine's
    ``prefetch``), each counted as ``"on"`` counts its step: with ``"on"`` the plan counts them; with ``"auto"``
    only when that plan keeps the layout of the plan without them (:func:`same_layout`: batch, resident queries,
    tables, evaluation chunks, MSM passes), else the plan is made without them and records ``"late"`` -- the
    caller then stages nothing before the running batch's witness is dead (the engine reads
    :attr:`MemoryPlan.prefetch`); ``"late"`` / ``"off"``: never counted (recorded as given)."""
    if mode not in PREFETCH_MODES:
        raise ValueError(f"prefetch mode must be one of {', '.join(PREFETCH_MODES)}, got {mode!r}")
    if not isinstance(staged_ahead, int) or staged_ahead < 0:
        raise ValueError(f"staged_ahead must be an int >= 0, got {staged_ahead!r}")
    if mode == "auto" and staged_ahead:
        plain = make_plan(shape, partitions, prefetch=0, **kw)
        try:
            ahead = make_plan(shape, partitions, prefetch=2 * staged_ahead, **kw)
        except MemoryBudgetError:
            return dataclasses.replace(plain, prefetch="late")
        if same_layout(ahead, plain):
            return dataclasses.replace(ahead, prefetch="on")
        return dataclasses.replace(plain, prefetch="late")
    mode = "late" if mode == "auto" else mode
    copies = 2 * max(staged_ahead, 1) if mode == "on" else 0
    return dataclasses.replace(make_plan(shape, partitions, prefetch=copies, **kw), prefetch=mode)


def same_layout(a: MemoryPlan, b: MemoryPlan) -> bool:
    """Whether two plans batch, keep resident, build tables, chunk the evaluation and bound the MSM passes alike."""
    return (a.batch, a.streamed, a.tables, a.eval_chunk, a.max_pairs) == (b.batch, b.streamed, b.tables, b.eval_chunk,
                                                                         b.max_pairs)


def _eval_bytes(shape: Shape, eval_chunk: int | None) -> tuple[int, int]:
    """Per partition: ``(outputs, work)``: the evaluations (96 B/row) and the gather's intermediates of all rows
    or of one chunk (the evaluator's own estimate when the shape has it, else ~96 B per nonzero)."""
    outputs = 96 * shape.num_rows
    if shape.eval_bytes is not None:
        work = max(shape.eval_bytes - outputs, 0)
    else:
        work = 96 * shape.nnz
    if eval_chunk is not None and shape.num_rows:
        work = int(work * min(eval_chunk, shape.num_rows) / shape.num_rows)
    return outputs, work


def _per_partition(shape: Shape, streamed: tuple, chunk: int, eval_chunk: int | None,
                   max_pairs: int | None = None) -> dict:
    z = FR_BYTES * shape.num_vars
    n = shape.domain
    eval_out, eval_work = _eval_bytes(shape, eval_chunk)
    evaluate = eval_out + eval_work
    # evaluations in, the padded (fused) or coset (split) copies, out; split: the largest program's temporaries
    # (the finishing step's, SPLIT_H_TEMP_BYTES per point)
    h = 96 * n + 96 * n + FR_BYTES * n + (SPLIT_H_TEMP_BYTES * n if n >= H_SPLIT_DOMAIN else 0)
    biggest = max(shape.bases.values())
    scalars = FR_BYTES * shape.num_vars + FR_BYTES * biggest + FR_BYTES * n  # canonical z, one gathered copy, h
    msm = _msm_batch_bytes(shape, streamed, chunk, 1, max_pairs)
    return {"z": z, "evaluate": evaluate, "evaluate_work": eval_work, "h": h, "msm_scalars": scalars, "msm_work": msm,
            "peak": z + max(evaluate, h, scalars + msm)}


def _msm_batch_bytes(shape: Shape, streamed: tuple, chunk: int, batch: int, max_pairs: int | None = None) -> int:
    """The largest MSM's temporaries for a batch (a streamed query's MSM runs over one chunk at a time)."""
    return max(msm_work_bytes(q, min(chunk, shape.bases[q]) if q in streamed else shape.bases[q], batch,
                              max_pairs, shape.rows and q not in streamed) for q in shape.bases)


def _batch_peak(shape: Shape, per: dict, streamed: tuple, chunk: int, batch: int,
                max_pairs: int | None = None, eval_chunk: int | None = None) -> int:
    """Device bytes of one batch beyond the fixed ones: the per-partition terms times ``batch``, except the MSM's
    temporaries, which are not linear in it (:func:`plain_msm_bytes`); equals ``per["peak"]`` for one partition."""
    if batch == 1:
        return per["peak"]
    msm = _msm_batch_bytes(shape, streamed, chunk, batch, max_pairs)
    # the flat one-shot evaluation runs its partitions one at a time (pipeline._evaluate_body): one partition's
    # gather intermediates beside every partition's outputs; the row-chunked and tiled ones take the batch per step
    serial = shape.eval_serial and not eval_chunk
    evaluate = batch * per["evaluate"] - ((batch - 1) * per["evaluate_work"] if serial else 0)
    return batch * (per["z"] + per.get("prefetch_z", 0)) + max(evaluate, batch * per["h"],
                                                                batch * per["msm_scalars"] + msm)


def _fixed(shape: Shape, resident: tuple, streamed: tuple, chunk: int) -> dict:
    resident_bytes = sum(shape.query_bytes(q) for q in resident)
    # a streamed query holds two chunks of bases on the device (the one in use and the next one in flight)
    stream_bytes = max((2 * min(chunk, shape.bases[q]) * (G2_BYTES if GROUPS[q] == "g2" else G1_BYTES)
                        for q in streamed), default=0)
    from cuzk_jax.ops import qap as ops_qap

    # the H step's root and scaling tables, held beside the key (pipeline.ResidentKey.h_tables)
    return {"r1cs": shape.r1cs_bytes, "resident_bases": resident_bytes, "stream_buffers": stream_bytes,
            "h_tables": ops_qap.table_bytes(shape.domain)}


#: The smallest MSM pass bound the plan chooses by itself (:func:`candidate_pass_bounds`): below it the passes get short
#: enough that their fixed costs show (10 x 2^20 on the H200: the H MSM 0.23 s at 2^28 pairs with tables, 0.34 s
#: at 2^25, 0.43 s at 2^24; RESULTS.md sessions 16-17).
MIN_PLAN_PAIRS = 1 << 24


def candidate_pass_bounds(default: int | None = None) -> tuple:
    """The MSM pass bounds (pairs per accumulation pass) :func:`make_plan` may choose among when the MSM config
    leaves ``max_pairs`` unset: the default, then halvings down to :data:`MIN_PLAN_PAIRS`."""
    from cuzk_jax.ops import msm as ops_msm

    top = int(default or ops_msm.DEFAULT_MAX_PAIRS)
    out = [top]
    while out[-1] // 2 >= MIN_PLAN_PAIRS:
        out.append(out[-1] // 2)
    return tuple(out)


def _whole_partition_bounds(shape: Shape, bounds: tuple) -> tuple:
    """The first of ``bounds``, then those under which every query's MSM takes a partition's points in passes as
    long as under the first: shorter passes that still group whole partitions shrink the bucket arrays at a small
    cost (10 x 2^20), while cutting a partition's points into more passes (a 2^27 partition already takes several)
    multiplies the passes and their fixed costs."""
    from cuzk_jax.ops import msm as ops_msm

    padded = [ops_msm.padded_size(max(int(n), 1)) for n in shape.bases.values()]

    def chunks(bound):  # points per pass of one partition, per query (None: the MSM's own default bound)
        return [ops_msm.pass_shape(1, p, bound or ops_msm.default_max_pairs(p))[2] for p in padded]

    first = chunks(None)
    return (bounds[0],) + tuple(b for b in bounds[1:] if chunks(b) == first)


def make_plan(shape: Shape, partitions: int, *, device_budget: int | None, host_budget: int | None = None,
              want_tables: bool = False, table_bytes: int = 0, chunk: int | None = None,
              allow_streaming: bool = True, max_batch: int | None = None, prefetch: int = 0,
              max_pairs: int | None = None, pass_bounds: tuple | None = None) -> MemoryPlan:
    """Decide a :class:`MemoryPlan` (module docstring); the arguments as in :func:`_make_plan`.

    ``pass_bounds``: MSM pass bounds the plan may choose among (descending, e.g. :func:`candidate_pass_bounds`; given when
    the MSM config leaves ``max_pairs`` unset): a smaller bound shrinks the plain MSM's bucket arrays and costs
    some time per pass, which is cheaper than splitting the partitions into more batches or streaming bases. The
    plan takes the largest bound that streams the fewest queries and keeps the largest batch (of the bounds that
    do not cut one partition's points into more passes: :func:`_whole_partition_bounds`), and records it
    in :attr:`MemoryPlan.max_pairs` when it is not the first (None: the first, or no bounds given). Without
    ``pass_bounds`` the plan is made for ``max_pairs`` only."""
    kw = dict(device_budget=device_budget, host_budget=host_budget, want_tables=want_tables,
              table_bytes=table_bytes, chunk=chunk, allow_streaming=allow_streaming, max_batch=max_batch,
              prefetch=prefetch)
    if not pass_bounds:
        return _make_plan(shape, partitions, max_pairs=max_pairs, **kw)
    best, best_key, error = None, None, None
    for bound in _whole_partition_bounds(shape, pass_bounds):
        try:  # the first bound is the MSM's default: modelled as the MSM takes it (None, per query size)
            plan = _make_plan(shape, partitions, max_pairs=None if bound == pass_bounds[0] else bound, **kw)
        except MemoryBudgetError as e:
            error = e
            continue
        key = (len(plan.streamed), -plan.batch, plan.eval_chunk is not None, not plan.tables)
        if best_key is None or key < best_key:  # ties keep the larger bound (the faster passes)
            best, best_key = dataclasses.replace(plan, max_pairs=None if bound == pass_bounds[0] else bound), key
    if best is None:
        raise error
    return best


def _make_plan(shape: Shape, partitions: int, *, device_budget: int | None, host_budget: int | None = None,
               want_tables: bool = False, table_bytes: int = 0, chunk: int | None = None,
               allow_streaming: bool = True, max_batch: int | None = None, prefetch: int = 0,
               max_pairs: int | None = None) -> MemoryPlan:
    """Decide a :class:`MemoryPlan` (module docstring). ``device_budget=None``: unbounded (every query resident,
    all partitions in one batch); ``table_bytes``: what the window tables of every query would take;
    ``max_batch``: an upper bound on the batch (e.g. the engine's); ``prefetch``: the copies of ``z`` per partition the next batch's staging
    holds on the device while a batch runs (0: no prefetch; 1; 2 when it is stacked there from limb rows),
    ``per_partition_prefetch_z``; ``True`` counts as 1; ``max_pairs``: the MSM config's bound on one pass
    (:func:`plain_msm_bytes`). Raises
    :class:`~cuzk_jax.errors.MemoryBudgetError` when even one partition with every query streamed does not fit
    the device budget, or the host budget cannot hold one batch's witnesses plus the streamed bases."""
    if partitions < 1:
        raise MemoryBudgetError(f"a plan needs at least one partition, got {partitions}")
    chunk = max(1, int(chunk or DEFAULT_CHUNK))
    upper = min(partitions, max_batch or partitions)
    eval_chunk = None
    names = tuple(shape.bases)
    streamed: tuple = ()
    while True:
        resident = tuple(q for q in names if q not in streamed)
        fixed = _fixed(shape, resident, streamed, chunk)
        per = _per_partition(shape, streamed, chunk, eval_chunk, max_pairs)
        if prefetch:
            per["prefetch_z"] = int(prefetch) * per["z"]
            per["peak"] += per["prefetch_z"]
        fixed_total, per_total = sum(fixed.values()), per["peak"]
        if device_budget is None:
            batch = upper
        else:  # the largest batch whose peak fits: every size is tried, since the MSM's passes group the
            # partitions by divisors of the batch, so its bucket arrays do not grow monotonically with it
            batch = max((b for b in range(1, upper + 1) if SAFETY * (
                fixed_total + _batch_peak(shape, per, streamed, chunk, b, max_pairs, eval_chunk)) <= device_budget),
                default=0)
        if batch >= 1:
            break
        # first shrink the evaluation's gather (cheap: only more launches), then stream queries
        if eval_chunk is None and per["evaluate"] >= max(per["h"], per["msm_scalars"] + per["msm_work"]):
            eval_chunk = 1 << max(10, (max(shape.num_rows // 8, 1) - 1).bit_length())  # a power of two
            continue
        remaining = [q for q in STREAM_ORDER if q in resident]
        if not allow_streaming or not remaining:
            need = SAFETY * (fixed_total + per_total)
            raise MemoryBudgetError(
                f"device budget {fmt_bytes(device_budget)} cannot hold one partition of this circuit "
                f"(needs about {fmt_bytes(need)}: {fmt_bytes(fixed_total)} of key and R1CS tables"
                f"{' with every query streamed' if allow_streaming else ''} + {fmt_bytes(per_total)} per partition)"
                f"; raise the budget or use a device with more memory")
        streamed = streamed + (remaining[0],)
    batch_bytes = _batch_peak(shape, per, streamed, chunk, batch, max_pairs, eval_chunk)
    tables = bool(want_tables and not streamed and (
        device_budget is None or SAFETY * (fixed_total + batch_bytes + table_bytes) <= device_budget))
    peak = int(SAFETY * (fixed_total + batch_bytes + (table_bytes if tables else 0)))
    host = FR_BYTES * shape.num_vars * batch + sum(shape.query_bytes(q) for q in streamed)
    if host_budget is not None and host > host_budget:
        raise MemoryBudgetError(
            f"host budget {fmt_bytes(host_budget)} cannot hold a batch of {batch} witness(es) "
            f"({fmt_bytes(FR_BYTES * shape.num_vars * batch)}) plus the streamed bases "
            f"({fmt_bytes(host - FR_BYTES * shape.num_vars * batch)}); raise it or lower the device batch")
    estimate = {**fixed, **{f"per_partition_{k}": v for k, v in per.items()}, "batch": batch_bytes,
                "tables": table_bytes if tables else 0}
    return MemoryPlan(device_budget=device_budget, host_budget=host_budget, partitions=partitions, batch=batch,
                      resident=resident, streamed=streamed, chunk=chunk, tables=tables, eval_chunk=eval_chunk,
                      peak=peak, host=host, estimate=estimate, shape=shape)
