"""XLA's buffer assignment for the prover's device programs at a domain size, beside the memory plan's terms.

  python scripts/bench.py --op=memory --log_n=27          # the 32 GiB-sector shape, one partition per batch
  python scripts/bench.py --op=memory --log_n=20 --batch=10

Nothing runs and no data is allocated: each program is lowered on abstract shapes and compiled, and its
``memory_analysis()`` read (temporaries, arguments, outputs). The constraint evaluation is the flat layout's,
with ~5.9 nonzeros per constraint (PoRep's). That finds a program whose temporaries do not fit
before a sector run spends minutes on setup (session 13: the split H step's finishing program held 64 GiB at 2^27),
and it is what the plan's measured constants (:data:`cuzk_jax.groth16.plan.SPLIT_H_TEMP_BYTES`,
:data:`~cuzk_jax.groth16.plan.SPLIT_BYTES_PER_BASE`, :func:`~cuzk_jax.groth16.plan.plain_msm_bytes`) come from.

Shapes: per partition, ``rows`` evaluations and ``vars`` witness values, and the bases of each query, as fractions
of the domain taken from the ``porep_like/sector32g`` circuit (:data:`SECTOR_SHAPE`), every query at its full
size (resident, in the layout the prover holds: :class:`~cuzk_jax.ops.msm.BaseRows` with the Pallas kernels,
:func:`cuzk_jax.groth16.pipeline.rows_layout`); the split MSM's capacity for "other" scalars is 1 % of its bases (the measured share), rounded up
to a power of two. The programs are the default prover configuration's (``MsmConfig`` / ``NttConfig`` of the
platform). ``--impl`` restricts the programs (names or prefixes: ``h``, ``msm_h``, ``msm_l.split``).

Rows: program, log_n, batch, elements (per partition), temp_gib, arg_gib, out_gib, compile_s, plan_temp_gib (the
plan's estimate of the same program's temporaries, where it has one), fits (``plan_temp_gib >= temp_gib``).
"""

from __future__ import annotations

import dataclasses
import time

#: porep_like/sector32g per domain point (2^27): 131,021,290 rows, 130,139,186 variables; bases kept per query;
#: nonzeros of A, B, C together (~5.9 per constraint, session 16).
SECTOR_SHAPE = {"rows": 131_021_290, "vars": 130_139_186, "msm_a": 119_887_034, "msm_b1": 43_401_222,
                "msm_b2": 43_401_222, "msm_l": 130_138_912, "nnz": 773_025_611}
SECTOR_DOMAIN = 1 << 27
#: Share of a witness query's scalars that are neither 0 nor 1 (porep_like, measured), for the split capacity.
OTHER_SHARE = 0.01


def _scaled(key: str, n: int) -> int:
    return max(2, int(SECTOR_SHAPE[key] * n / SECTOR_DOMAIN))


def _gib(b) -> float:
    return round(b / 2**30, 3)


def programs(log_n: int, batch: int, prover: str | None = None) -> list[tuple[str, int, object, int | None]]:
    """``(name, elements, lower(), plan temporaries in bytes or None)`` for the prove programs at ``2^log_n``;
    ``prover``: a ``--prover`` string whose NTT / MSM configs the programs take (None: the platform's)."""
    import jax
    import jax.numpy as jnp

    from cuzk_jax.groth16 import pipeline
    from cuzk_jax.groth16 import plan as memplan
    from cuzk_jax.groth16.data_structures import h_query_size
    from cuzk_jax.groth16.generator import DEFAULT_H_FORM
    from cuzk_jax.ops import curve, msm as ops_msm, msm_split as ops_split, qap, r1cs as ops_r1cs
    from cuzk_jax.ops.config import MsmConfig, NttConfig

    n = 1 << log_n
    rows, nv = _scaled("rows", n), _scaled("vars", n)
    config = pipeline.as_config(prover or None)
    ntt, msm = NttConfig.coerce(config.ntt), MsmConfig.coerce(config.msm)
    # the programs of a key from this project's setup (bellman's QAP, the setup's H query form)
    progs = pipeline.device_programs(None, "bellman", n, ntt, msm, DEFAULT_H_FORM)
    u32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.uint32)  # noqa: E731

    # the layout the prover's resident key holds the bases in (the resolved MSM config's kernel decides)
    as_rows = pipeline.rows_layout(dataclasses.replace(config, msm=msm))

    def bases(group, count):
        if as_rows:
            return ops_msm.BaseRows(u32(count, 24 if group == "g1" else 48))
        sh = (12, count) if group == "g1" else (2, 12, count)
        return curve.Affine(u32(*sh), u32(*sh), jax.ShapeDtypeStruct((count,), jnp.bool_))

    split = qap.lower_split(rows, n, batch, config=ntt, form=pipeline.h_step_form("bellman", DEFAULT_H_FORM),
                            scalars=True)  # as the prover's split H step
    i32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.int32)  # noqa: E731
    nnz = _scaled("nnz", n)
    # the flat one-shot evaluation (the layout of an untiled circuit whose nonzeros int32 can index)
    dr = ops_r1cs.DeviceR1CS(cols=i32(nnz), coeff_ids=i32(nnz), indptr=i32(3 * rows + 1),
                             coeffs=u32(8, 64))
    out = [("evaluate", rows, lambda: progs["evaluate"].lower(dr, u32(8, batch, nv)), None),
           ("h.coset", rows, lambda: split["coset"], None),
           ("h.finish", n, lambda: split["finish"], memplan.SPLIT_H_TEMP_BYTES * n * batch),
           ("from_mont_z", nv, lambda: progs["from_mont"].lower(u32(8, batch, nv)), None)]
    counts = {q: _scaled(q, n) for q in ("msm_a", "msm_b1", "msm_b2", "msm_l")}
    counts["msm_h"] = h_query_size(n, DEFAULT_H_FORM)
    for q, count in counts.items():
        group = memplan.GROUPS[q]
        plan_temp = memplan.msm_work_bytes(q, count, batch, msm.max_pairs, as_rows)  # the plan's, either path
        out.append((f"{q}.plain", count,
                    lambda g=group, c=count: ops_msm.msm_jit(g, msm).lower(bases(g, c), u32(8, batch, c)), plan_temp))
        if q in memplan.SPLIT_QUERIES:
            cap = ops_msm.pow2_ceil(max(int(OTHER_SHARE * count), ops_split.MIN_CAPACITY))
            out.append((f"{q}.split", count,
                        lambda g=group, c=count, k=cap: ops_split.msm_split_jit(g, msm, capacity=k).lower(
                            bases(g, c), u32(8, batch, c)), plan_temp))
    return out


def run(cfg) -> list[dict]:
    from cuzk_jax import bench

    only = set(cfg.impl)  # program names (or prefixes such as msm_h) to compile; empty: all
    rows = []
    for log_n in (int(v) for v in cfg.log_n):
        batch = max(1, int(cfg.batch))
        for name, elements, lower, plan_temp in programs(log_n, batch, getattr(cfg, "prover", None)):
            if only and not any(name == k or name.startswith(k + ".") for k in only):
                continue
            row = {"program": name, "log_n": log_n, "batch": batch, "elements": elements}
            t0 = time.perf_counter()
            try:
                ma = lower().compile().memory_analysis()
            except Exception as e:  # noqa: BLE001  (a program that does not compile is a row, not the end)
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            else:
                row.update(temp_gib=_gib(ma.temp_size_in_bytes), arg_gib=_gib(ma.argument_size_in_bytes),
                           out_gib=_gib(ma.output_size_in_bytes), compile_s=round(time.perf_counter() - t0, 2))
                if plan_temp is not None:
                    row["plan_temp_gib"] = _gib(plan_temp)
                    row["fits"] = plan_temp >= ma.temp_size_in_bytes
            bench.emit(rows, row)
            print(row, flush=True)
    return rows
