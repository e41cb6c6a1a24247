"""The memory plan (cuzk_jax.groth16.plan): budgets -> batch size, streamed queries, tables, chunked evaluation;
and the pipeline proving under a plan that splits a batch (the proofs still verify and equal the unplanned ones)."""

import dataclasses

import jax
import pytest

from cuzk_jax.circuits import base
from cuzk_jax.errors import BadInput, MemoryBudgetError
from cuzk_jax.groth16 import generator, pipeline, prover, verifier
from cuzk_jax.groth16 import plan as memplan

GIB = 1 << 30


def sector_shape(log_n: int = 27) -> memplan.Shape:
    """A PoRep-like 2^log_n partition: ~0.97 n constraints, 3 nonzeros per row per matrix, B used on 35 % of the
    variables (numbers from the issue's porep_like measurements); the device R1CS at 8 B per nonzero (column and
    coefficient id; no per-nonzero row ids)."""
    n = 1 << log_n
    m = int(0.97 * n)
    return memplan.Shape(num_vars=m, num_rows=m, nnz=9 * m, domain=n,
                         bases={"msm_a": int(0.91 * m), "msm_b1": int(0.35 * m), "msm_b2": int(0.35 * m),
                                "msm_l": m, "msm_h": n - 1}, r1cs_bytes=8 * 9 * m)


@pytest.mark.parametrize("text,want", [("96GiB", 96 * GIB), ("1.5g", int(1.5 * GIB)), ("512M", 512 << 20),
                                       ("123456", 123456), ("auto", None), (None, None), (7, 7)])
def test_parse_bytes(text, want):
    assert memplan.parse_bytes(text) == want


@pytest.mark.parametrize("text", ["lots", "-5G", "12 parsecs", "0", "nanG"])
def test_parse_bytes_refuses(text):
    with pytest.raises(BadInput, match="memory size"):
        memplan.parse_bytes(text)


#: The full-size PoRep partition (sector32g, tiled R1CS) as the H200 sector run of session 24 recorded its plan's
#: shape (bench/results/2026-12-05-s24-s32-h200-241a389.json), and the device peak that run measured.
SECTOR32G = memplan.Shape(num_vars=130_139_186, num_rows=131_021_564, nnz=50_331_648, domain=1 << 27,
                          bases={"msm_a": 119_887_034, "msm_b1": 43_401_222, "msm_b2": 43_401_222,
                                 "msm_l": 130_138_912, "msm_h": (1 << 27) - 1},
                          r1cs_bytes=2_074_115_632, eval_bytes=46_153_562_784)
SECTOR32G_MEASURED_PEAK = 99.38 * GIB


def test_sector_plan_matches_the_measured_sector():
    """At the 128 GiB budget the 2^27 sector ran under (every query resident, late prefetch: 26.87 s), the plan
    keeps every query resident and estimates at least the peak that run measured (it must not under-count), with
    at most ~30 % of margin; at 120 GiB it streams B2 first."""
    plan = memplan.make_plan_prefetch(SECTOR32G, 10, "late", device_budget=128 * GIB, host_budget=96 * GIB)
    assert plan.streamed == () and plan.batch == 1 and plan.prefetch == "late"
    assert SECTOR32G_MEASURED_PEAK <= plan.peak <= min(128 * GIB, 1.3 * SECTOR32G_MEASURED_PEAK)
    tight = memplan.make_plan_prefetch(SECTOR32G, 10, "late", device_budget=120 * GIB, host_budget=96 * GIB)
    assert tight.streamed == ("msm_b2",) and tight.peak <= 120 * GIB


def test_unbounded_plan_keeps_everything_resident():
    plan = memplan.make_plan(sector_shape(20), 10, device_budget=None)
    assert (plan.batch, plan.streamed, plan.eval_chunk) == (10, (), None)
    assert set(plan.resident) == set(memplan.GROUPS)
    assert plan.batches == 1 and "10 partition(s) in 1 batch(es)" in plan.describe()


def test_plan_shrinks_the_batch_before_streaming():
    shape = sector_shape(24)
    full = memplan.make_plan(shape, 10, device_budget=None)
    fixed = sum(full.estimate[k] for k in ("r1cs", "resident_bases", "stream_buffers"))
    per = full.estimate["per_partition_peak"]
    budget = int(memplan.SAFETY * (fixed + 3.5 * per))
    plan = memplan.make_plan(shape, 10, device_budget=budget)
    # the MSM's bucket arrays grow with the partitions of a pass, not in proportion to the batch: more than 3 fit
    assert 3 <= plan.batch < 10 and plan.streamed == () and plan.batches == -(-10 // plan.batch)
    assert plan.peak <= budget
    assert memplan.make_plan(shape, 10, device_budget=None, max_batch=plan.batch + 1).peak > budget  # the largest


def test_prefetch_counts_the_next_batch_of_witnesses():
    """With prefetch the plan holds one more z per partition: same budget, a smaller or equal batch."""
    shape = sector_shape(24)
    budget = 60 * GIB
    plain = memplan.make_plan(shape, 10, device_budget=budget)
    ahead = memplan.make_plan(shape, 10, device_budget=budget, prefetch=True)
    assert ahead.estimate["per_partition_peak"] == plain.estimate["per_partition_peak"] + 32 * shape.num_vars
    assert "per_partition_prefetch_z" not in plain.estimate and ahead.batch <= plain.batch
    assert ahead.peak <= budget


def test_prefetch_modes_and_what_the_plan_counts():
    """``prefetch``: ``"on"`` counts the next witnesses beside a whole step (the 2^27 sector at the smallest budget
    that keeps every query resident would stream one for them); ``"late"`` and ``"auto"`` (= late: staged once the
    step's witness is dead) plan exactly as ``"off"``, and say so in the logged plan."""
    shape = sector_shape(27)
    # the smallest budget (to 1 MiB) that holds a partition with every query resident
    lo, hi = 1 << 30, 1 << 40
    while hi - lo > 1 << 20:
        mid = (lo + hi) // 2
        try:
            ok = memplan.make_plan(shape, 10, device_budget=mid).streamed == ()
        except MemoryBudgetError:
            ok = False
        lo, hi = (lo, mid) if ok else (mid, hi)
    budget = hi
    off = memplan.make_plan_prefetch(shape, 10, "off", device_budget=budget)
    assert off.prefetch == "off" and off.streamed == () and "prefetch" not in off.describe()
    for mode in ("auto", "late"):
        late = memplan.make_plan_prefetch(shape, 10, mode, device_budget=budget)
        assert late.prefetch == "late" and "late prefetch" in late.describe()
        assert (late.batch, late.streamed, late.peak, late.estimate) == (off.batch, off.streamed, off.peak,
                                                                         off.estimate)
    forced = memplan.make_plan_prefetch(shape, 10, "on", device_budget=budget)
    assert forced.prefetch == "on" and forced.streamed and "(prefetch)" in forced.describe()
    assert forced.estimate["per_partition_prefetch_z"] == 2 * forced.estimate["per_partition_z"]
    with pytest.raises(ValueError, match="prefetch mode"):
        memplan.make_plan_prefetch(shape, 10, "yes", device_budget=None)


def test_sector_plan_on_an_h200_streams_and_fits():
    """A 2^27 partition on a 139 GiB device with a 120 GiB budget: the plan must stream (a key of ~70 GiB plus
    the 20+ GiB per partition do not fit together with more than a few partitions), keep the peak under the
    budget, and bound the host."""
    plan = memplan.make_plan(sector_shape(27), 10, device_budget=120 * GIB, host_budget=96 * GIB)
    assert 1 <= plan.batch < 10
    assert plan.peak <= 120 * GIB and plan.host <= 96 * GIB
    assert not plan.tables  # tables never fit at this size


def test_tight_budget_streams_biggest_query_first():
    shape = sector_shape(24)
    full = memplan.make_plan(shape, 1, device_budget=None)
    # room for one partition (evaluated in chunks) and the R1CS tables but not for B2's bases (G2, the biggest
    # per point): B2 streams, nothing else does
    chunk = 1 << 20
    per = memplan._per_partition(shape, ("msm_b2",), chunk, shape.num_rows // 8)["peak"]
    budget = int(memplan.SAFETY * (full.estimate["r1cs"] + full.estimate["h_tables"] + per
                                   + full.estimate["resident_bases"]
                                   - shape.query_bytes("msm_b2") + 2 * chunk * memplan.G2_BYTES + (1 << 20)))
    plan = memplan.make_plan(shape, 10, device_budget=budget, chunk=chunk)
    assert plan.streamed == ("msm_b2",) and plan.batch == 1 and plan.peak <= budget


def test_budget_below_one_partition_is_one_clear_error():
    with pytest.raises(MemoryBudgetError, match="cannot hold one partition"):
        memplan.make_plan(sector_shape(24), 10, device_budget=64 << 20)
    with pytest.raises(MemoryBudgetError, match="cannot hold one partition"):
        memplan.make_plan(sector_shape(20), 10, device_budget=200 << 20, allow_streaming=False)
    with pytest.raises(MemoryBudgetError, match="host budget"):
        memplan.make_plan(sector_shape(24), 10, device_budget=None, host_budget=1 << 20)


@pytest.fixture(scope="module")
def cube():
    circuit = base.get_circuit("cube")
    r1cs = circuit.r1cs()
    pk = generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(11))
    witnesses = [circuit.witness(circuit.sample_inputs(p)) for p in range(4)]
    return dict(r1cs=r1cs, pk=pk, witnesses=witnesses)


def test_precompile_split_compiles_the_programs_the_batch_runs(cube):
    """``pipeline.precompile_split``: from a witness batch, the split MSM programs of every witness query that will
    split, at the capacity the batch rounds to (``query:capacity``; the split proofs themselves are tested in
    test_groth16). A key whose queries cannot split compiles nothing."""
    from cuzk_jax.circuits.r1cs import stack_z_native
    from cuzk_jax.ops import msm_split as ops_split

    z, montgomery = stack_z_native(cube["witnesses"][:2])
    rk = pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off,split=on")
    names = pipeline.precompile_split(rk, z, montgomery)
    queries = [n.split(":")[0] for n in names]
    assert queries and set(queries) <= set(pipeline.SPLIT_QUERIES)
    assert all(int(n.split(":")[1]) == ops_split.MIN_CAPACITY for n in names)  # a handful of "other" scalars
    assert pipeline.precompile_split(pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off,split=off"),
                                     z, montgomery) == []


def test_prove_in_planned_batches(cube):
    """A device budget with room for two partitions proves four in two batches of two (the programs of
    test_groth16's P = 2 shape); the proofs verify and equal the one-batch proofs bit for bit; a budget too
    small for one partition fails before any device work."""
    rs = prover.insecure_randomness_for_tests(3, 4)
    # the reference: one batch of four with the host MSMs (bit-identical to the device MSMs, test_groth16)
    one, t1 = prover.prove(cube["pk"], cube["r1cs"], cube["witnesses"], randomness=rs, config="msm=host")
    assert t1.batches == 1
    rk = pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off,prefetch=off")
    assert pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off").plan.prefetch == "late"  # auto

    def room_for_two(prefetch=0):  # the plan's own peak of a batch of two, plus one byte
        return memplan.make_plan(rk.plan.shape, 10, device_budget=None, max_batch=2, prefetch=prefetch).peak + 1

    budget = room_for_two()
    planned = pipeline.make_resident(cube["pk"], cube["r1cs"], f"msm=xla,tables=off,device_budget={budget}")
    assert planned.plan.batch == 2 and planned.plan.streamed == ()
    assert planned.plan.prefetch == "late"  # prefetch=auto: the next step staged during the H MSM, no extra bytes
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(planned.r1cs))  # uploaded whole
    two, t2 = prover.prove(planned, cube["r1cs"], cube["witnesses"], randomness=rs)
    assert t2.batches == 2 and two == one
    assert all(verifier.verify(cube["pk"].vk, w.public_inputs, p) for w, p in zip(cube["witnesses"], two))
    # prefetch: the second step's witnesses are staged while the first runs; staging stacks the limb rows on the
    # device, so the plan counts two more copies of z per partition
    ahead = pipeline.make_resident(cube["pk"], cube["r1cs"],
                                   f"msm=xla,tables=off,device_budget={room_for_two(2)},prefetch=on")
    est = ahead.plan.estimate
    assert est["per_partition_prefetch_z"] == 2 * est["per_partition_z"] and ahead.plan.batch == 2
    assert est["per_partition_peak"] == rk.plan.estimate["per_partition_peak"] + 2 * est["per_partition_z"]
    pre, t3 = prover.prove(ahead, cube["r1cs"], cube["witnesses"], randomness=rs)
    assert t3.batches == 2 and pre == one
    # batch=N caps the plan's batch where the budget (none here) would take all four at once
    capped = pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off,batch=2,prefetch=on")
    assert rk.plan.batch >= 4 and capped.plan.batch == 2 and str(capped.config).count("batch=2") == 1
    by_two, t5 = prover.prove(capped, cube["r1cs"], cube["witnesses"], randomness=rs)
    assert t5.batches == 2 and by_two == one
    # prefetch=auto (the default) with room to spare: still late, the proofs are the same
    auto = pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off,batch=2")
    assert auto.config.prefetch == "auto" and auto.plan.prefetch == "late" and auto.plan.batch == 2
    ahead_auto, t6 = prover.prove(auto, cube["r1cs"], cube["witnesses"], randomness=rs)
    assert t6.batches == 2 and ahead_auto == one
    for bad in ("batch=0", "batch=x", "batch=-1"):
        with pytest.raises(BadInput, match="batch"):
            pipeline.ProverConfig.parse(bad)
    with pytest.raises(MemoryBudgetError):
        pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off,device_budget=1000")


@pytest.mark.slow
def test_budget_that_streams_every_query_still_proves():
    """A device budget below the key's bases and the one-shot evaluation: the plan evaluates in row chunks,
    streams every query (chunks of 256 points) and proves in batches of one; with the split MSM on, the proofs
    equal the host-MSM proofs bit for bit and verify, and the scalar kinds of the witness queries are reported."""
    circuit = base.get_circuit("porep_like", "mini")
    r1cs = circuit.r1cs()
    pk = generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(5))
    witnesses = [circuit.witness(circuit.sample_inputs(p)) for p in range(2)]
    rs = prover.insecure_randomness_for_tests(9, 2)
    want, _ = prover.prove(pk, r1cs, witnesses, randomness=rs, config="msm=host")
    free = pipeline.make_resident(pk, r1cs, "msm=xla,tables=off,chunk=256")
    est = free.plan.estimate
    # room for the R1CS tables, two chunks of G2 bases and one partition's work, not for any query's bases
    per = memplan._per_partition(free.plan.shape, tuple(memplan.STREAM_ORDER), 256, 1024)["peak"]
    budget = int(memplan.SAFETY * (est["r1cs"] + est["h_tables"] + 2 * 256 * memplan.G2_BYTES + per)) + 1024
    rk = pipeline.make_resident(pk, r1cs, f"msm=xla,tables=off,chunk=256,split=on,device_budget={budget}")
    assert set(rk.plan.streamed) == set(memplan.GROUPS) and rk.plan.batch == 1 and not rk.queries
    assert rk.plan.eval_chunk == 1024 and rk.r1cs.num_chunks == 3
    # the R1CS went to the device once, as chunks (make_resident builds it on the host: to_device(upload=False))
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(rk.r1cs))
    got, timings = prover.prove(rk, r1cs, witnesses, randomness=rs)
    assert got == want and timings.batches == 2
    assert set(timings.scalar_kinds) == set(pipeline.SPLIT_QUERIES)
    assert all(abs(sum(k.values()) - 1) < 1e-5 for k in timings.scalar_kinds.values())  # shares rounded to 1e-6


def test_split_h_step_proves_the_same(cube, monkeypatch):
    """With the split H step forced (one program per input vector, ``plan.H_SPLIT_DOMAIN``), the device
    prover's H scalars and proofs equal the one-program path's bit for bit and verify."""
    import numpy as np

    from cuzk_jax.groth16.data_structures import Proof

    rs = prover.insecure_randomness_for_tests(3, 4)
    rk = pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off")
    from cuzk_jax.circuits.r1cs import stack_z

    z = pipeline.stage(rk, stack_z(cube["witnesses"]))
    az, bz, cz, ok, _ = pipeline.evaluate(rk, z)
    assert bool(np.all(np.asarray(ok)))
    one = np.asarray(pipeline.h_scalars(rk, az, bz, cz))
    want = pipeline.prove_batch(rk, np.asarray(z), rs)
    monkeypatch.setattr(memplan, "H_SPLIT_DOMAIN", 2)
    assert np.array_equal(np.asarray(pipeline.h_scalars(rk, az, bz, cz)), one)
    got = pipeline.prove_batch(rk, np.asarray(z), rs)
    assert got == want
    # the config's switch (the A/B of a benchmark): h=fused keeps one program whatever the domain
    fused = pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off,h=fused")
    assert pipeline.prove_batch(fused, np.asarray(z), rs) == want
    assert all(verifier.verify(cube["pk"].vk, w.public_inputs, Proof(*p)) for w, p in zip(cube["witnesses"], got))


def test_prove_takes_a_ready_z(cube):
    """A ready ``(8, P, num_vars)`` Montgomery batch proves as the witnesses it stacks (no copy at sector scale);
    a batch of the wrong width or dtype is one clear error."""
    import numpy as np

    from cuzk_jax.circuits.r1cs import stack_z

    rs = prover.insecure_randomness_for_tests(3, 4)
    z = stack_z(cube["witnesses"], montgomery=True)
    want, _ = prover.prove(cube["pk"], cube["r1cs"], cube["witnesses"], randomness=rs, config="msm=host")
    got, _ = prover.prove(cube["pk"], cube["r1cs"], z, randomness=rs, config="msm=host")
    assert got == want
    with pytest.raises(BadInput, match="ready witness batch"):
        prover.prove(cube["pk"], cube["r1cs"], z[:, :, :-1], config="msm=host")
    with pytest.raises(BadInput, match="ready witness batch"):
        prover.prove(cube["pk"], cube["r1cs"], z.astype(np.int64), config="msm=host")
    with pytest.raises(BadInput, match="no witnesses"):
        prover.prove(cube["pk"], cube["r1cs"], z[:, :0], config="msm=host")


def test_stage_converts_a_canonical_batch_on_the_device(cube):
    """prove() stages Python-int witnesses as canonical limbs (stack_z_native) and stage(montgomery=False) converts
    them on the device: the staged array equals the staged host-Montgomery batch bit for bit, and prove_batch of
    the canonical batch gives the same proofs (public inputs read in the right form for the verifier)."""
    import numpy as np

    from cuzk_jax.circuits.r1cs import stack_z, stack_z_native

    rk = prover.resident(cube["pk"], cube["r1cs"], "msm=host")
    canon, mont = stack_z_native(cube["witnesses"])
    assert mont is False and np.array_equal(canon, stack_z(cube["witnesses"], montgomery=False))
    host = stack_z(cube["witnesses"], montgomery=True)
    assert np.array_equal(np.asarray(pipeline.stage(rk, canon, montgomery=False)), np.asarray(pipeline.stage(rk, host)))
    assert pipeline.public_inputs(rk, canon, montgomery=False) == pipeline.public_inputs(rk, host)
    rs = prover.insecure_randomness_for_tests(3, 4)
    want = pipeline.prove_batch(rk, host, rs)
    assert pipeline.prove_batch(rk, canon, rs, montgomery=False) == want
    # staging: limb rows copied as they lie (here of a partition slice, as prove_batch's steps), stacked and padded
    # on the device -- the host batch padded to the programs' width, in Montgomery form, whatever form came in
    width = rk.z_width or rk.num_vars
    padded = np.pad(host[:, 1:3], [(0, 0), (0, 0), (0, width - host.shape[-1])])
    assert pipeline.precompile(rk, 2)[0] == "stage"  # the stacking program is what the staging below runs
    for z, m in ((host, True), (canon, False)):
        assert np.array_equal(np.asarray(pipeline.stage(rk, z[:, 1:3], montgomery=m)), padded)


def test_engine_staged_batches_are_in_the_plan(cube):
    """The engine may keep ``prefetch`` batches staged on the device while one runs: its device backend's plans
    count two copies of ``z`` per partition for each when they keep the layout of the plan without them (or
    ``prefetch=on`` asks for it) and record ``"on"``; else ``"late"``, and the engine stages nothing before the
    running batch's witness is dead (the engine test of the witness room)."""
    from cuzk_jax.engine.backends import DeviceBackend
    from cuzk_jax.engine.core import Engine, EngineConfig

    shape = sector_shape(24)
    two = memplan.make_plan_prefetch(shape, 10, "auto", staged_ahead=2, device_budget=None)
    assert two.prefetch == "on" and two.estimate["per_partition_prefetch_z"] == 4 * two.estimate["per_partition_z"]
    assert memplan.make_plan_prefetch(shape, 10, "late", staged_ahead=1, device_budget=None).prefetch == "late"
    with pytest.raises(ValueError, match="staged_ahead"):
        memplan.make_plan_prefetch(shape, 10, "auto", staged_ahead=-1, device_budget=None)
    free = DeviceBackend(config="msm=xla,tables=off").place(cube["pk"], cube["r1cs"])
    assert free.plan.prefetch == "late" and "per_partition_prefetch_z" not in free.plan.estimate
    budget = memplan.make_plan(free.plan.shape, 10, device_budget=None, max_batch=2).peak + 1  # room for two
    # auto: counting a staged batch would halve the batch, so the plan is made without it and says "late" (the
    # engine then stages nothing before the running batch's witness is dead)
    rk = DeviceBackend(config=f"msm=xla,tables=off,device_budget={budget}", staged_ahead=1).place(cube["pk"],
                                                                                                  cube["r1cs"])
    assert rk.plan.prefetch == "late" and rk.plan.batch == 2 and "per_partition_prefetch_z" not in rk.plan.estimate
    forced = DeviceBackend(config=f"msm=xla,tables=off,device_budget={budget},prefetch=on",
                           staged_ahead=1).place(cube["pk"], cube["r1cs"])
    est = forced.plan.estimate
    assert forced.plan.prefetch == "on" and est["per_partition_prefetch_z"] == 2 * est["per_partition_z"]
    assert forced.plan.batch == 1
    with Engine(EngineConfig(prefetch=2, synthesis="thread", synthesis_workers=1)) as eng:
        assert eng.backend.staged_ahead == 2


def test_run_frees_the_witness_before_the_h_msm(cube):
    """``run(witness_done=)`` (what ``prefetch="late"`` stages the next step from): called once, after the four
    witness MSMs and before the H MSM, when nothing of the run refers to the staged witness any more (a weak
    reference to it is dead there) -- so its device memory is free for the next one; the results are the ones
    of a run without the callback. Its negative twin: a caller that keeps its own reference keeps it alive."""
    import gc
    import weakref

    import numpy as np

    from cuzk_jax.circuits.r1cs import stack_z

    rk = pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off")
    host = stack_z(cube["witnesses"][:2], montgomery=True)
    seen, alive = [], []

    def phase(name, fn):
        seen.append(name)
        return fn()

    def probe(ref):
        def done():
            gc.collect()
            seen.append("witness_done")
            alive.append(ref() is not None)
        return done

    box = [pipeline.stage(rk, host)]
    ref = weakref.ref(box[0])
    out = pipeline.run(rk, box.pop(), phase, witness_done=probe(ref))  # the run holds the only reference
    assert seen == ["evaluate", "h", *pipeline.WITNESS_MSMS, "witness_done", "msm_h", "fetch"]
    kept = pipeline.stage(rk, host)
    base = pipeline.run(rk, kept, phase, witness_done=probe(weakref.ref(kept)))
    assert alive == [False, True]  # the twin: this caller still holds `kept`
    box = [pipeline.stage(rk, host)]  # dispatched in one go (sync_phases=False): the callback still comes after
    ref = weakref.ref(box[0])         # the witness MSMs, with the witness freed
    pipeline.run(rk, box.pop(), sync_phases=False, witness_done=probe(ref))
    assert alive == [False, True, False]
    assert set(out.points) == set(pipeline.MSMS)
    got, want = (jax.tree_util.tree_leaves(o.points) for o in (out, base))
    assert len(got) == len(want) and all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(got, want))


def test_engine_backend_runs_oversized_batches_in_planned_steps(cube):
    """The engine's device backend keeps a batch larger than the plan allows on the host and runs it in the plan's
    sub-batches (P = 2 programs; each next one staged late), calling the engine back once, when the last one's
    witness is dead; the proofs equal prove()'s bit for bit."""
    from cuzk_jax.circuits.r1cs import stack_z
    from cuzk_jax.engine.backends import DeviceBackend

    rs = prover.insecure_randomness_for_tests(3, 4)
    want, _ = prover.prove(cube["pk"], cube["r1cs"], cube["witnesses"], randomness=rs, config="msm=host")
    free = pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off")
    # the plan's own peak of a batch of two, plus one byte
    budget = memplan.make_plan(free.plan.shape, 10, device_budget=None, max_batch=2).peak + 1
    backend = DeviceBackend(config=f"msm=xla,tables=off,device_budget={budget}")
    rk = backend.place(cube["pk"], cube["r1cs"])
    assert rk.plan.batch == 2
    seen = []
    staged = backend.stage(rk, stack_z(cube["witnesses"], montgomery=True))
    out = backend.run(rk, staged, lambda name, fn: (seen.append(name), fn())[1],
                      witness_done=lambda: seen.append("witness_done"))
    assert seen.count("stage") == 2 and seen.count("evaluate") == 2 and out.ok.tolist() == [True] * 4
    # the second step is staged once the first one's witness is dead; the caller hears of the last step's only
    assert seen.count("witness_done") == 1 and seen[-3:] == ["witness_done", "msm_h", "fetch"]
    got = [backend.finish(rk, out, i, r, s) for i, (r, s) in enumerate(rs)]
    assert got == want


@pytest.mark.slow  # a subprocess: setup, witnesses, two proves of the smallest preset (about a minute on 2 cores)
def test_sector_bench_runs_verifies_and_records(tmp_path):
    """``bench --op=sector`` on the smallest porep_like preset: every rep proves and verifies both partitions and
    its row carries the phases, the scalar kinds, the plan text and the per-stage device memory record (a first
    ``prepare`` row has the stages before proving); with ``prefetch=late`` each rep also runs with ``prefetch=off``
    (two variants); another circuit is one clear usage error (exit status 2)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = tmp_path / "sector.json"
    r = subprocess.run([sys.executable, str(root / "scripts" / "bench.py"), "--op=sector", "--preset=tiny",
                        "--partitions=2", "--reps=1", "--workers=1", "--prover=prefetch=late", "--variants=h=split",
                        f"--out={out}",
                        "--cache_dir=", f"--key_dir={tmp_path / 'keys'}"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    prepare, *rows = json.loads(out.read_text())["rows"]
    assert prepare["key_source"] == "setup" and prepare["key_file_gib"] > 0 and prepare["h_form"] == "lagrange"
    assert prepare["setup_phases"]["total"] > 0 and "scalars_column_sums" in prepare["setup_phases"]
    assert prepare["rep"] == "prepare" and prepare["witness_s"] > 0 and "resident" in prepare["device_memory_gib"]
    assert prepare["precompiled"][:4] == ["stage@2", "evaluate@2", "h@2", "canonical_z@2"]  # one step of both
    assert prepare["precompile_s"] > 0
    assert prepare["precompiled_split"] == [] and prepare["precompile_split_s"] >= 0  # the host MSM: none to split
    assert [(row["rep"], row["variant"], row["prefetch"], row["prefetch_mode"]) for row in rows] == [
        (0, "prefetch=late", "late", "late"), (0, "prefetch=off", "off", "off"), (0, "h=split", "late", "late")]
    assert "h=split" in rows[2]["prover"] and "h=split" not in rows[0]["prover"]
    for row in rows:
        assert row["ok"] and row["proofs"] == 2 and row["preset"] == "tiny" and row["constraints"] > 0
        assert row["witness_s"] > 0 and row["witness_wait_s"] >= 0 and row["witness_gib"] >= 0
        assert set(pipeline.PHASES) - {"h"} <= set(row["phases"]) and row["phases"]["verify"] > 0
        assert row["plan_text"] and "setup" in row["device_memory_gib"] and "resident" in row["device_memory_gib"]
    assert "rep0-prefetch=off" in rows[1]["device_memory_gib"]
    assert "sector: rep 0 (prefetch=off)" in r.stdout
    # --key_dir again, in a fresh process: the key is read from the file the first run wrote, and proves
    again = tmp_path / "again.json"
    r = subprocess.run([sys.executable, str(root / "scripts" / "bench.py"), "--op=sector", "--preset=tiny",
                        "--partitions=2", "--reps=1", "--workers=1", f"--out={again}", "--cache_dir=",
                        f"--key_dir={tmp_path / 'keys'}"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    prepare, row = json.loads(again.read_text())["rows"]
    assert prepare["key_source"] == "file" and row["key_source"] == "file" and row["ok"] and row["proofs"] == 2
    r = subprocess.run([sys.executable, str(root / "scripts" / "bench.py"), "--op=sector", "--preset=tiny",
                        "--variants=nope=1", f"--out={tmp_path / 'bad.json'}", "--cache_dir="], env=env,
                       capture_output=True, text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "unknown key 'nope'" in lines[0], r.stderr
    r = subprocess.run([sys.executable, str(root / "scripts" / "bench.py"), "--op=sector", "--circuit=cube",
                        f"--out={tmp_path / 'bad.json'}", "--cache_dir="], env=env, capture_output=True, text=True,
                       timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "porep_like" in lines[0], r.stderr
    assert not (tmp_path / "bad.json").exists()


@pytest.mark.slow  # a subprocess: setup, a warm-up partition and two streamed sectors of the smallest preset
def test_sector_stream_bench_proves_through_the_engine(tmp_path):
    """``bench --op=sector --stream``: sectors submitted at once to the engine over the resident key, synthesis by
    worker processes; its row has every proof verified, a latency per sector, the interval between completions and
    the host witness budget left by host_budget. Twin: --sectors=0 is a usage error (exit 2, no output file)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = tmp_path / "stream.json"
    base = [sys.executable, str(root / "scripts" / "bench.py"), "--op=sector", "--preset=tiny", "--partitions=2",
            "--workers=2", "--stream", "--prover=host_budget=8GiB", "--cache_dir="]
    r = subprocess.run(base + ["--sectors=2", f"--out={out}"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["mode"] == "stream" and row["ok"] and row["proofs"] == 4 and row["sectors"] == 2
    assert len(row["latency_s"]) == 2 and all(t > 0 for t in row["latency_s"]) and row["interval_s"] >= 0
    assert row["warm_s"] > 0 and row["warm_workers_s"] > 0 and row["synthesis_mean_s"] > 0 and row["lone_latency_s"] > 0
    # tiny has one challenge (nothing to split) and a witness far below the shared-file size
    assert 0 < row["lone_first_batch_s"] < row["lone_latency_s"] and row["lone_split_partitions"] == 0
    lone = row["lone_events"]
    assert {e[1] for e in lone} >= {"synthesis", "evaluate"} and min(e[2] for e in lone) >= 0
    # the lone sector again from inputs sampled before its clock (C2 proper): its own timeline, its proofs verified
    assert row["lone_inputs_sample_s"] > 0 and 0 < row["lone_inputs_first_batch_s"] < row["lone_inputs_latency_s"]
    assert {e[1] for e in row["lone_inputs_events"]} >= {"synthesis", "evaluate"}
    assert row["host_witness_budget_bytes"] == 2 * 2 * 32 * row["num_vars"]  # two sectors' witnesses, within 8 GiB
    # and the warm-up partition, and the two lone sectors before the stream
    assert sum(int(k.split("/")[0]) * n for k, n in row["batch_sizes"].items()) == 4 + 1 + 2 + 2
    assert {"synthesis", "evaluate", "msm_h"} <= set(row["phase_mean_s"]) and 0 < row["device_busy_fraction"] <= 1
    lanes = {e[0] for e in row["events"]}
    assert "device" in lanes and any(e[1] == "synthesis" for e in row["events"])
    assert all(e[3] >= e[2] and e[3] > 0 for e in row["events"])
    bad = tmp_path / "bad.json"
    r = subprocess.run(base + ["--sectors=0", f"--out={bad}"], env=env, capture_output=True, text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "--sectors" in lines[0], r.stderr
    assert not bad.exists()


def test_bench_memory_reports_each_programs_buffers():
    """bench --op=memory: the prove programs compiled on abstract shapes (nothing allocated), XLA's buffer sizes
    per program -- the outputs are exactly the arrays the prover gets back -- and the plan's term beside the
    programs it models; ``--impl`` selects programs by name or prefix."""
    import types

    from cuzk_jax.bench import memory

    n, batch = 1 << 10, 2
    names = [p[0] for p in memory.programs(10, batch)]
    assert names[:4] == ["evaluate", "h.coset", "h.finish", "from_mont_z"]
    assert {"msm_a.split", "msm_b2.plain", "msm_l.split", "msm_h.plain"} <= set(names)
    assert "msm_h.split" not in names  # H's scalars are dense: never the split MSM
    progs = {p[0]: p for p in memory.programs(10, batch)}
    # evaluate: A z, B z, C z, then per partition ok (bool) and first (int32); XLA adds its tuple's pointer table
    rows = memory._scaled("rows", n)
    ma = progs["evaluate"][2]().compile().memory_analysis()
    assert 0 <= ma.output_size_in_bytes - (96 * batch * rows + 5 * batch) <= 64
    # the H scalars: one per point of the setup's H query (Lagrange form: n; bellman's coefficients: n - 1)
    from cuzk_jax.groth16.data_structures import h_query_size
    from cuzk_jax.groth16.generator import DEFAULT_H_FORM

    for name, out_bytes in (("h.coset", 32 * batch * n), ("h.finish", 32 * batch * h_query_size(n, DEFAULT_H_FORM))):
        ma = progs[name][2]().compile().memory_analysis()
        assert ma.output_size_in_bytes == out_bytes, name
    rows = memory.run(types.SimpleNamespace(log_n=["10"], batch=batch, impl=["h", "msm_h"]))
    assert [r["program"] for r in rows] == ["h.coset", "h.finish", "msm_h.plain"]
    assert all(r["temp_gib"] >= 0 and "error" not in r for r in rows)
    assert "plan_temp_gib" in rows[1] and "plan_temp_gib" in rows[2] and "plan_temp_gib" not in rows[0]


@pytest.mark.slow  # compiles the P = 3 programs twice over (once ahead, once to compare)
@pytest.mark.usefixtures("no_persistent_cache")
def test_precompile_leaves_nothing_of_its_programs_to_compile(cube):
    """pipeline.precompile compiles, in its own thread and without data, the staging's stacking, the evaluation, the
    split H step, the canonical witness and the plain MSMs of a batch of three; proving then compiles none of them
    in the main thread (jit finds the programs), and the proofs equal the host-MSM ones. A batch size no other test uses, so
    nothing is compiled before."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from jax import monitoring

    from cuzk_jax.compile_cache import BACKEND_COMPILE_EVENT

    rk = pipeline.make_resident(cube["pk"], cube["r1cs"], "msm=xla,tables=off,split=off,h=split")
    compiled = []

    def listener(event, duration, **kw):
        if event == BACKEND_COMPILE_EVENT:
            compiled.append((threading.current_thread().name, str(kw.get("fun_name"))))

    monitoring.register_event_duration_secs_listener(listener)
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="prove-compile") as pool:
            done = pool.submit(pipeline.precompile, rk, 3).result()
        ahead = {name for thread, name in compiled if thread.startswith("prove-compile")}
        compiled.clear()
        rs = prover.insecure_randomness_for_tests(5, 3)
        proofs, _ = prover.prove(rk, cube["r1cs"], cube["witnesses"][:3], randomness=rs)
    finally:
        monitoring.unregister_event_duration_listener(listener)
    assert done == ["stage", "evaluate", "h", "canonical_z", "msm_a", "msm_b1", "msm_b2", "msm_l", "msm_h"]
    want = {"stack_rows", "_evaluate_body", "_coset_evaluations_impl", "_h_from_evaluations_impl", "msm"}
    assert want <= {name.removeprefix("jit(").removesuffix(")") for name in ahead}, ahead
    main = {name.removeprefix("jit(").removesuffix(")") for thread, name in compiled}
    assert not main & want, main
    one, _ = prover.prove(cube["pk"], cube["r1cs"], cube["witnesses"][:3], randomness=rs, config="msm=host")
    assert proofs == one


def test_sector_bench_recheck_tells_a_bad_witness_from_bad_staging(monkeypatch):
    """After an unsatisfied partition the sector bench proves it again alone, staged plainly: "passes" (the
    witness is right: the failure came from staging or running the batch), "fails again" (the witness is wrong);
    an error without a partition is not rechecked."""
    import numpy as np

    from cuzk_jax.bench import sector
    from cuzk_jax.errors import Unsatisfied

    @dataclasses.dataclass
    class Key:
        config: pipeline.ProverConfig

    key = Key(pipeline.ProverConfig(prefetch="on"))
    z = np.arange(8 * 3 * 5, dtype=np.uint32).reshape(8, 3, 5)
    seen = []

    def ok(k, zz):
        seen.append((k.config.prefetch, zz.copy()))

    def unsat(k, zz):
        raise Unsatisfied(7, "c7", 0)

    err = Unsatisfied(7, "c7", 1)
    monkeypatch.setattr(pipeline, "prove_batch", ok)
    assert sector._recheck(key, z, err) == "passes"
    (prefetch, zz), = seen
    assert prefetch == "off" and np.array_equal(zz, z[:, 1:2])
    assert sector._recheck(key, z, BadInput("x")) is None and len(seen) == 1
    monkeypatch.setattr(pipeline, "prove_batch", unsat)
    assert sector._recheck(key, z, err).startswith("fails again: ")


def test_device_out_of_memory_is_one_clear_error(cube, monkeypatch):
    """The allocator's RESOURCE_EXHAUSTED inside a phase (here the A MSM) and inside staging becomes one
    DeviceMemoryError naming the phase, the allocation and the plan; any other runtime error passes unchanged."""
    from cuzk_jax.circuits.r1cs import stack_z
    from cuzk_jax.errors import CuzkError, DeviceMemoryError

    rk = prover.resident(cube["pk"], cube["r1cs"], "msm=host,device_budget=64GiB")
    z = stack_z(cube["witnesses"][:1], montgomery=True)
    oom = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 31.61GiB with "
                                     "allocator GPU_0_bfc on device 0. [executable_name='jit_msm_split']")

    def failing_msm(rk_, name, scalars, kinds):
        if name == "msm_a":
            raise oom
        return real_msm(rk_, name, scalars, kinds)

    real_msm = pipeline.msm
    monkeypatch.setattr(pipeline, "msm", failing_msm)
    with pytest.raises(DeviceMemoryError, match=r"phase .msm_a. allocating 31.61GiB; .*plan.*device_budget"):
        pipeline.prove_batch(rk, z)
    monkeypatch.setattr(pipeline, "msm", real_msm)
    assert issubclass(DeviceMemoryError, CuzkError) and DeviceMemoryError.exit_code == 2

    # staging: the rows are copied from worker threads; the allocator's error there reaches the caller as one
    # DeviceMemoryError
    from cuzk_jax.groth16 import staging

    def failing_put(*args, **kwargs):
        raise oom

    monkeypatch.setattr(staging, "_put", failing_put)
    with pytest.raises(DeviceMemoryError, match="phase 'stage'"):
        pipeline.stage(rk, z)

    def other_error(*args, **kwargs):
        raise jax.errors.JaxRuntimeError("INTERNAL: something else")

    monkeypatch.setattr(staging, "_put", other_error)
    with pytest.raises(jax.errors.JaxRuntimeError, match="INTERNAL"):
        pipeline.stage(rk, z)


@pytest.mark.parametrize("group, n, batch, measured_gib", [
    ("g1", 1 << 20, 10, 10.563), ("g1", (1 << 24) - 1, 1, 12.156), ("g1", (1 << 25) - 1, 1, 15.281),
    ("g1", (1 << 26) - 1, 1, 26.696), ("g1", (1 << 27) - 1, 1, 34.696), ("g2", 5_425_152, 1, 21.063),
    ("g2", 10_850_305, 1, 22.656), ("g2", 21_700_611, 1, 30.25), ("g2", 339_072, 10, 21.063)])
def test_plain_msm_model_matches_xla_buffer_assignment(group, n, batch, measured_gib):
    """The plan's plain-MSM temporaries against XLA's buffer assignment on the H200 at the MSM's own pass bound
    (bench --op=memory of the straight-line Pallas pass with merged chunk buckets, session 24:
    bench/results/2026-12-05-s24-mem{27,2,3}-h200-241a389.json): at most 0.2 % below (the safety factor covers it)
    and at most 19 % above (G1 2^25 in one pass, whose pair term over-counts)."""
    model = memplan.plain_msm_bytes(group, n, batch) / GIB
    assert 0.998 * measured_gib <= model <= 1.19 * measured_gib


def test_smaller_msm_passes_shrink_the_plain_msm_term():
    """MsmConfig.max_pairs bounds one MSM pass: ten 2^20 partitions then run in groups with smaller bucket arrays,
    and the plan (which reads the bound from the prover config) counts less for them."""
    from cuzk_jax.ops import msm as ops_msm

    default = memplan.plain_msm_bytes("g1", 1 << 20, 10)
    assert memplan.plain_msm_bytes("g1", 1 << 20, 10, max_pairs=1 << 25) < default / 3
    assert memplan.plain_msm_bytes("g1", 1 << 20, 10, max_pairs=ops_msm.DEFAULT_MAX_PAIRS) == default
    shape = sector_shape(20)
    default = memplan.make_plan(shape, 10, device_budget=None)
    small = memplan.make_plan(shape, 10, device_budget=None, max_pairs=1 << 25)
    assert small.estimate["batch"] < default.estimate["batch"]
    config = pipeline.ProverConfig.parse("msm=xla:max_pairs=33554432")
    assert config.msm.max_pairs == 1 << 25


def test_plan_shortens_msm_passes_before_splitting_the_batch():
    """With the MSM's pass bound left open, a budget that holds ten 2^20 partitions only with shorter passes gets
    them (the plan records the bound, the resident key's MSM config carries it); an unbounded budget keeps the
    default; a budget no bound can meet still shrinks the batch (keeping the largest bound that gives that batch);
    a bound the config fixes is never changed."""
    from cuzk_jax.ops import msm as ops_msm

    bounds = memplan.candidate_pass_bounds()
    assert bounds[0] == ops_msm.DEFAULT_MAX_PAIRS and bounds[-1] == memplan.MIN_PLAN_PAIRS
    assert all(a == 2 * b for a, b in zip(bounds, bounds[1:]))
    # a 2^20 partition fits every bound in one pass; a 2^27 one already takes several: no shorter bound for it
    assert memplan._whole_partition_bounds(sector_shape(20), bounds) == bounds
    assert memplan._whole_partition_bounds(sector_shape(27), bounds) == bounds[:1]
    big = memplan.make_plan(sector_shape(27), 10, device_budget=124 * GIB, pass_bounds=bounds)
    assert big.max_pairs is None
    shape = sector_shape(20)
    assert memplan.make_plan(shape, 10, device_budget=None, pass_bounds=bounds).max_pairs is None
    short = memplan.make_plan(shape, 10, device_budget=None, max_pairs=1 << 25)
    budget = short.peak + (1 << 20)  # fits ten partitions at 2^25 pairs per pass, not at the default
    assert memplan.make_plan(shape, 10, device_budget=budget).batch < 10
    plan = memplan.make_plan(shape, 10, device_budget=budget, pass_bounds=bounds)
    assert plan.batch == 10 and plan.streamed == () and plan.peak <= budget
    assert plan.max_pairs is not None and plan.max_pairs >= 1 << 25
    assert "MSM passes of <= 2^" in plan.describe()
    tiny = memplan.make_plan(shape, 10, device_budget=budget // 3, pass_bounds=bounds)
    assert 1 <= tiny.batch < 10 and tiny.peak <= budget // 3


def test_resident_key_takes_the_plans_msm_pass_bound(cube, monkeypatch):
    """build_resident applies the plan's chosen pass bound to the key's MSM config (and leaves a fixed one)."""
    r1cs, pk = cube["r1cs"], cube["pk"]
    monkeypatch.setattr(memplan, "candidate_pass_bounds", lambda default=None: (1 << 28, 1 << 20))
    real = memplan._make_plan

    def squeezed(shape, partitions, *, max_pairs=None, **kw):  # only the short passes fit the whole batch
        plan = real(shape, partitions, max_pairs=max_pairs, **kw)
        return plan if max_pairs == 1 << 20 else dataclasses.replace(plan, batch=1)

    monkeypatch.setattr(memplan, "_make_plan", squeezed)
    rk = pipeline.make_resident(pk, r1cs, "msm=xla", partitions=2)
    assert rk.plan.max_pairs == 1 << 20 and rk.config.msm.max_pairs == 1 << 20 and rk.plan.batch == 2
    rk = pipeline.make_resident(pk, r1cs, "msm=xla:max_pairs=33554432", partitions=2)
    assert rk.plan.max_pairs is None and rk.config.msm.max_pairs == 1 << 25


def test_bench_h_parts_times_each_split_h_program():
    """bench --op=h --impl=parts: one row per program of the split H step, each against one NTT of the domain."""
    import types

    from cuzk_jax.bench import h

    rows = h.run(types.SimpleNamespace(impl=["parts"], log_n=["8"], batch=2, reps=1, warmup=0))
    assert [r["part"] for r in rows] == ["ntt", "coset", "finish", "finish_lagrange", "split"]
    assert rows[0]["ntt_equiv"] == 1 and all(r["median_ms"] > 0 and r["batch"] == 2 for r in rows)
