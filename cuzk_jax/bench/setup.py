"""``--op=setup``: the device (development) setup and raw key files, at sizes 2^log_n (issue 19, item 4).

  python scripts/bench.py --op=setup --log_n=16,20,22,24 --group=g1,g2 --out=bench/results/setup-h200.json

Phases (``--modes``; default all three):

* ``fixed_base`` -- :func:`cuzk_jax.ops.fixed_base.mul_affine` (``--impl=affine``, the batch-affine path),
  :func:`~cuzk_jax.ops.fixed_base.mul_bucket` (``--impl=bucket``: the MSM's Pallas accumulation kernel, with
  ``block=`` / ``warps=`` besides the affine keys except ``sched=``) and/or the older Jacobian method
  (``--impl=jacobian``) over ``2^log_n`` random scalars per ``--group``: the first call (table build + compile)
  and the median of ``--reps`` warm calls, as points/s; 4 random outputs are compared with the Python-int
  reference curve (``ok``). The affine path takes tuning keys, one row per spec:
  ``affine:w=WINDOW_BITS:chunk=LOG2_SCALARS_PER_CALL:inv=INVERSION_RUN:fw=FERMAT_WINDOW`` (e.g.
  ``--impl=affine:w=16,affine:w=20:chunk=23:inv=256:fw=1``); omitted keys take the module's defaults;
  ``affine:sched=platform|rolled|unrolled`` picks the field multiplication schedule of its XLA loops (the bucket
  method has none: its additions and its conversion to affine are Pallas kernels on the GPU's field). The bucket
  method's window defaults per group (:func:`cuzk_jax.ops.fixed_base.default_bucket_window`: 20 for G1 on a GPU).
  The ``setup`` phase uses the first spec (``jacobian`` / ``bucket``: the device setup with that fixed-base
  method).
* ``setup`` -- :func:`cuzk_jax.groth16.generator.development_setup` on a synthetic R1CS with a ``2^log_n`` domain
  (``2^log_n - 2`` constraints, 2 / 1 / 1 nonzeros per row of A / B / C, random columns): the whole key (4 G1
  queries and the G2 query) and its points/s, twice (the second call is warm), with its phases' seconds
  (``phases``: the scalar programs -- Lagrange basis, column sums, query scalars, H powers -- and each group's
  points); one H-query point is compared with the reference (``ok``).
* ``keyfile`` -- that key written with :func:`cuzk_jax.groth16.keyfile.save` into ``--key_dir`` (default: a
  temporary folder; the file is removed afterwards) and loaded back with every check, then with the checksums
  only: bytes on disk and GB/s. Needs the ``setup`` phase.

The rows are printed as a table at the end and written as JSON (``--out``).
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import time

from cuzk_jax import bench

MODES = ("fixed_base", "setup", "keyfile")
IMPLS = ("affine", "bucket", "jacobian")
_KEYS = {"w": "window", "chunk": "chunk", "inv": "inv_chunk", "fw": "fermat_window", "block": "block",
         "warps": "num_warps"}
_BUCKET_ONLY = ("block", "warps")
_SCHEDULES = ("platform", "rolled", "unrolled")


def parse_impl(spec: str) -> tuple[str, dict]:
    """``"affine:w=16:chunk=22:inv=128"`` -> ``("affine", {"window": 16, "chunk": 2**22, "inv_chunk": 128})``;
    ``bucket`` (:func:`cuzk_jax.ops.fixed_base.mul_bucket`) takes the same keys plus ``block=`` and ``warps=``;
    ``affine`` also takes ``sched=platform|rolled|unrolled`` (``{"schedule": ...}``)."""
    kind, *opts = spec.split(":")
    if kind not in IMPLS or (opts and kind == "jacobian"):
        raise ValueError(f"unknown --impl {spec!r} for --op=setup; expected jacobian or affine|bucket[:w=..]"
                         "[:chunk=..][:inv=..][:fw=..] (affine also [:sched=..], bucket also [:block=..][:warps=..])")
    kw = {}
    for opt in opts:
        key, _, val = opt.partition("=")
        if key == "sched":
            if kind != "affine" or val not in _SCHEDULES:
                raise ValueError(f"bad option {opt!r} in --impl {spec!r}: sched= is an affine option taking "
                                 f"{', '.join(_SCHEDULES)}")
            kw["schedule"] = val
            continue
        if key not in _KEYS or not val.isdigit() or int(val) < 1 or (key in _BUCKET_ONLY and kind != "bucket"):
            raise ValueError(f"bad option {opt!r} in --impl {spec!r}: expected w=, chunk= (log2), inv=, fw= (or, for "
                             "bucket, block= / warps=) with a positive integer")
        kw[_KEYS[key]] = 1 << int(val) if key == "chunk" else int(val)
    return kind, kw
DEFAULTS = {"log_n": ["16", "18"], "impl": ["affine"], "modes": list(MODES), "reps": 3, "warmup": 1}


def _random_scalars(n: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    limbs = rng.integers(0, 2**32, size=(8, n), dtype=np.uint64).astype(np.uint32)
    limbs[7] &= 0x3FFFFFFF  # < 2^254 < r: canonical
    return limbs


def synthetic_r1cs(log_n: int, seed: int = 0):
    """An R1CS with ``2^log_n - 2`` constraints (a ``2^log_n`` domain with the 2 input constraints), 2 / 1 / 1
    nonzeros per row of A / B / C at random columns and coefficients from a table of 4; for timing a setup only
    (no witness satisfies it)."""
    import numpy as np

    from cuzk_jax.circuits.r1cs import R1CS, SparseMatrix
    from cuzk_jax.reference.constants import R

    rng = np.random.default_rng(seed)
    m = (1 << log_n) - 2
    num_inputs, num_aux = 2, m
    nv = num_inputs + num_aux

    def mat(per_row):
        nnz = m * per_row
        return SparseMatrix(indptr=np.arange(0, nnz + 1, per_row, dtype=np.int64),
                            cols=rng.integers(0, nv, nnz, dtype=np.int32),
                            coeff_ids=rng.integers(0, 4, nnz, dtype=np.int32))

    rnd = random.Random(seed)
    return R1CS(num_inputs=num_inputs, num_aux=num_aux, A=mat(2), B=mat(1), C=mat(1),
                coeffs=(1,) + tuple(rnd.randrange(R) for _ in range(3)), namespaces=("synthetic",), labels=("row",),
                row_namespace=np.zeros(m, np.int32), row_label=np.zeros(m, np.int32))


def _spot_check(curve, scalars, pts, idx) -> bool:
    from cuzk_jax import encoding
    from cuzk_jax.groth16.host_curve import affine_from_device

    import jax

    ks = encoding.limbs_to_ints(scalars[:, idx], "fr")
    got = affine_from_device(curve, jax.tree_util.tree_map(lambda a: a[..., idx], pts))
    return got == [curve.ref.mul(curve.ref.generator, k) for k in ks]


def _fixed_base_rows(cfg, rows, log_n):
    import jax
    import numpy as np

    from cuzk_jax.ops import curve as C
    from cuzk_jax.ops import fixed_base

    n = 1 << log_n
    for group in cfg.group:
        curve = C.g1 if group == "g1" else C.g2
        scalars = _random_scalars(n, log_n)
        dev = jax.device_put(scalars)
        for impl in cfg.impl:
            kind, kw = parse_impl(impl)
            fn = {"affine": lambda s, kw=kw: fixed_base.mul_affine(curve, s, **kw),
                  "bucket": lambda s, kw=kw: fixed_base.mul_bucket(curve, s, **kw),
                  "jacobian": lambda s: fixed_base.mul(curve, s)}[kind]
            t0 = time.perf_counter()
            out = jax.block_until_ready(fn(dev))
            first = time.perf_counter() - t0
            for _ in range(max(0, cfg.warmup - 1)):
                jax.block_until_ready(fn(dev))
            times = []
            for _ in range(max(1, cfg.reps)):
                t0 = time.perf_counter()
                out = jax.block_until_ready(fn(dev))
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            idx = np.array(sorted(random.Random(log_n).sample(range(n), min(4, n))))
            window = {"affine": fixed_base.default_window, "bucket": lambda: fixed_base.default_bucket_window(group),
                      "jacobian": lambda: fixed_base.WINDOW}[kind]()
            bench.emit(rows, {"phase": "fixed_base", "impl": impl, "group": group, "log_n": log_n, "points": n,
                              "window": kw.get("window", window),
                              "first_s": round(first, 3), "median_s": round(med, 4),
                              "points_per_s": round(n / med), "ok": _spot_check(curve, scalars, out, idx)})
            del out


def _setup_rows(cfg, rows, log_n, want_keyfile: bool):
    import jax

    from cuzk_jax.groth16 import generator, keyfile
    from cuzk_jax.groth16.data_structures import h_query_size
    from cuzk_jax.groth16.host_curve import affine_from_device
    from cuzk_jax.ops import curve as C

    kind, tuning = parse_impl(cfg.impl[0]) if cfg.impl else ("affine", {})
    if "schedule" in tuning:
        raise ValueError("--modes=setup takes no sched= (development_setup has no schedule argument)")
    if kind == "jacobian":
        tuning = {"points": "jacobian"}
    elif kind == "bucket":
        if {_KEYS[k] for k in _BUCKET_ONLY} & set(tuning):
            raise ValueError("--modes=setup takes no block= / warps= (the device setup runs the kernels' defaults)")
        tuning = {**tuning, "points": "bucket"}
    r1cs = synthetic_r1cs(log_n)
    toxic = generator.insecure_toxic_waste_for_tests(log_n)
    nv, n = r1cs.num_vars, 1 << log_n
    g1_points = 2 * nv + h_query_size(n, generator.DEFAULT_H_FORM) + r1cs.num_aux + r1cs.num_inputs
    g2_points = nv
    pk = None
    for rep in ("first", "warm"):
        del pk
        t0 = time.perf_counter()
        phases: dict = {}
        pk = jax.block_until_ready(generator.development_setup(r1cs, toxic, timings=phases, **tuning))
        dt = time.perf_counter() - t0
        # one H point against its scalar (the key's form)
        i = n // 3
        k = generator.h_scalar_at(i, n, toxic, pk.h_form)
        got = affine_from_device(C.g1, jax.tree_util.tree_map(lambda a: a[..., i:i + 1], pk.h_query))[0]
        bench.emit(rows, {"phase": "setup", "run": rep, "log_n": log_n, "tuning": str(tuning or "default"),
                          "constraints": r1cs.num_constraints,
                          "g1_points": g1_points, "g2_points": g2_points, "seconds": round(dt, 3),
                          "points_per_s": round((g1_points + g2_points) / dt),
                          "device_mbytes": round(pk.nbytes() / 2**20, 2), "phases": phases,
                          "ok": got == C.g1.ref.mul(C.g1.ref.generator, k)})
    if not want_keyfile:
        return
    own_dir = not cfg.key_dir
    directory = cfg.key_dir or tempfile.mkdtemp(prefix="cuzk-bench-setup-")
    path = os.path.join(directory, f"bench-setup-2^{log_n}.pk")
    try:
        t0 = time.perf_counter()
        size = keyfile.save(pk, path)
        dt = time.perf_counter() - t0
        bench.emit(rows, {"phase": "key_write", "log_n": log_n, "mbytes": round(size / 2**20, 2),
                          "seconds": round(dt, 3), "gb_per_s": round(size / 1e9 / dt, 3)})
        want = pk.to_bytes() if size < (1 << 28) else None  # the byte comparison only where it is cheap
        for label, kw in (("key_load_checked", {}), ("key_load_checksums", {"check": False})):
            t0 = time.perf_counter()
            got = jax.block_until_ready(keyfile.load(path, **kw))
            dt = time.perf_counter() - t0
            ok = (got.to_bytes() == want) if want is not None else bool(
                (jax.numpy.asarray(got.h_query.x) == pk.h_query.x).all())
            bench.emit(rows, {"phase": label, "log_n": log_n, "mbytes": round(size / 2**20, 2),
                              "seconds": round(dt, 3), "gb_per_s": round(size / 1e9 / dt, 3), "ok": bool(ok)})
            del got
    finally:
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)
        elif os.path.exists(path):
            os.unlink(path)


def run(cfg) -> list[dict]:
    bad = [m for m in cfg.modes if m not in MODES]
    if bad:
        raise ValueError(f"unknown --modes {bad} for --op=setup; expected some of {MODES}")
    rows: list[dict] = []
    for log_n in (int(x) for x in cfg.log_n):
        if not 2 <= log_n <= 28:
            raise ValueError(f"--log_n {log_n} out of range [2, 28] for --op=setup")
        if "fixed_base" in cfg.modes:
            _fixed_base_rows(cfg, rows, log_n)
        if "setup" in cfg.modes:
            _setup_rows(cfg, rows, log_n, "keyfile" in cfg.modes)
    return rows
