"""Batched (vectorised) porep_like witnesses equal the Python builder's wire for wire; tiled structure equals the
builder's R1CS and carries its Tiling (the prover's tiled layout, which proves and verifies); a mutated batched
witness is reported unsatisfied at the right constraint."""

import dataclasses

import numpy as np
import pytest

from cuzk_jax import encoding
from cuzk_jax.circuits import get_circuit
from cuzk_jax.circuits.base import Circuit
from cuzk_jax.circuits.porep_like import block_counts, witness_batch
from cuzk_jax.circuits.r1cs import PackedWitness, stack_z
from cuzk_jax.errors import BadInput, Unsatisfied


def _builder(c, inputs):
    return Circuit.witness(c, inputs)  # the Python builder, whatever PorepLike.witness picks


@pytest.mark.parametrize("preset,overrides,P", [
    ("tiny", {}, 2), ("mini", {"challenges": 3}, 2), ("small", {}, 2), ("sha_min", {"challenges": 2, "depth": 2}, 2),
    ("sha_min", {"depth": 2, "parents": 2, "label_parents": 3}, 1),  # repeated parent labels (Filecoin's 37)
])
def test_batch_equals_builder(preset, overrides, P):
    c = get_circuit("porep_like", preset, **overrides)
    ins = [c.sample_inputs(p, seed=3) for p in range(P)]
    ws = [_builder(c, i) for i in ins]
    z, publics = witness_batch(c, ins)
    assert z.dtype == np.uint32 and z.shape == (8, P, ws[0].num_vars)
    assert np.array_equal(z, stack_z(ws))
    assert publics == [w.public_inputs for w in ws]
    zc, _ = witness_batch(c, ins, montgomery=False)
    assert np.array_equal(zc, stack_z(ws, montgomery=False))
    counts = block_counts(c)
    r1cs = c.r1cs()
    assert (counts["num_inputs"], counts["num_aux"], counts["num_constraints"]) == \
        (r1cs.num_inputs, r1cs.num_aux, r1cs.num_constraints)


def test_witness_fast_path_and_unsatisfied_report():
    c = get_circuit("porep_like", "mini", challenges=4, depth=3)
    inputs = c.sample_inputs(1, seed=5)
    w = c.witness(inputs)
    assert isinstance(w, PackedWitness)
    wb = _builder(c, inputs)
    assert w.inputs == wb.inputs and list(w.aux) == wb.aux and w.num_constraints == wb.num_constraints
    r1cs = c.r1cs()
    r1cs.check(w)
    # negative twin: flip one private wire of challenge 2's block; the report names that block's constraint
    counts = block_counts(c)
    col = counts["num_inputs"] + counts["head_aux"] + 2 * counts["block_aux"] + 7
    bad = w.with_value(col, w.z[col] + 1)
    with pytest.raises(Unsatisfied) as e:
        r1cs.check(bad)
    assert "challenge_2/" in str(e.value)
    _, full_w = c.full(inputs)
    with pytest.raises(Unsatisfied) as e2:
        r1cs.check(full_w.with_value(col, full_w.z[col] + 1))
    assert str(e2.value) == str(e.value)  # same constraint index and name as the builder's witness


def test_witness_batch_rejects_bad_input():
    c = get_circuit("porep_like", "tiny")
    with pytest.raises(BadInput):
        witness_batch(c, [])
    with pytest.raises(BadInput):
        witness_batch(get_circuit("cube"), [{}])


@pytest.mark.parametrize("preset,overrides", [("mini", {"challenges": 3}), ("small", {}),
                                              ("sha_min", {"challenges": 3, "depth": 2}),
                                              ("sha_min", {"challenges": 2, "depth": 2, "parents": 1,
                                                           "label_parents": 2})])
def test_tiled_structure_equals_builder(preset, overrides):
    from cuzk_jax.circuits.cs import ConstraintSystem

    c = get_circuit("porep_like", preset, **overrides)
    cs = ConstraintSystem("structure")
    c.synthesize(cs, None)
    built, tiled = cs.to_r1cs(), c.build_structure()  # tiled from one challenge block (circuits.tiling)
    assert tiled.tiling is not None and built.tiling is None
    assert tiled.digest() == built.digest()
    assert tiled.namespaces == built.namespaces and tiled.labels == built.labels
    assert tiled.input_names == built.input_names
    assert np.array_equal(tiled.row_namespace, built.row_namespace)
    assert np.array_equal(tiled.row_label, built.row_label)
    assert c.r1cs().digest() == built.digest()  # Circuit.r1cs takes the tiled path


@pytest.mark.parametrize("preset,overrides", [("mini", {"challenges": 3}), ("small", {})])
def test_porep_r1cs_carries_its_tiling(preset, overrides, tmp_path, monkeypatch):
    """A multi-challenge porep_like R1CS carries its Tiling (header, one block per challenge) -- built, and loaded
    from a compiled file (which does not store it) -- equal to block_tiling's and to the batched witness's block
    sizes; a one-challenge preset carries none."""
    from cuzk_jax.circuits.porep_like import PorepLike
    from cuzk_jax.circuits.tiling import block_tiling

    c = get_circuit("porep_like", preset, **overrides)
    C = c.params["challenges"]
    built = c.r1cs(cache_dir=tmp_path)  # built (tiled) and written
    t = built.tiling
    assert t is not None and t == block_tiling(*c._blocks()) and t.count == C
    assert (t.m_h + C * t.m_b, t.ni_h + C * t.ni_b, t.na_h + C * t.na_b) == \
        (built.num_constraints, built.num_inputs, built.num_aux)
    counts = block_counts(c)
    assert (t.m_h, t.m_b, t.ni_h, t.ni_b, t.na_h, t.na_b) == tuple(counts[k] for k in (
        "head_constraints", "block_constraints", "head_inputs", "block_inputs", "head_aux", "block_aux"))
    monkeypatch.setattr(PorepLike, "build_structure", lambda self: pytest.fail("not loaded from the file"))
    loaded = get_circuit("porep_like", preset, **overrides).r1cs(cache_dir=tmp_path)
    assert loaded is not built and loaded.digest() == built.digest() and loaded.tiling == t
    monkeypatch.undo()
    for spec in (("mini", {}), ("small", {"challenges": 1})):
        one = get_circuit("porep_like", spec[0], **spec[1])
        assert one._blocks() is None and one.r1cs(cache_dir=tmp_path).tiling is None  # built
        assert get_circuit("porep_like", spec[0], **spec[1]).r1cs(cache_dir=tmp_path).tiling is None  # loaded


def test_r1cs_layout_choice(monkeypatch):
    """``ProverConfig.layout``: ``flat_bytes`` is exactly what the flat layout holds; ``auto`` tiles only when the
    tiled tables are no larger (a small multi-challenge PoRep pads its header and input-row patterns to the whole
    group, so it stays flat) or the flat layout cannot be indexed; ``tiled`` without a tiling and an unknown
    layout are BadInput."""
    from cuzk_jax.errors import BadInput
    from cuzk_jax.groth16 import pipeline
    from cuzk_jax.ops import r1cs as ops_r1cs

    r1cs = get_circuit("porep_like", "tiny", challenges=3, depth=2).r1cs()
    flat = ops_r1cs.to_device(r1cs.with_input_constraints(), bucket_steps=ops_r1cs.BUCKET_STEPS, upload=False)
    assert ops_r1cs.flat_bytes(r1cs) == pipeline._r1cs_bytes(flat._replace(sizes=None))
    tiled = pipeline.r1cs_layout(r1cs, "tiled")
    assert isinstance(tiled, ops_r1cs.TiledR1CS) and tiled.nbytes > ops_r1cs.flat_bytes(r1cs)
    assert pipeline.r1cs_layout(r1cs) is None and pipeline.r1cs_layout(r1cs, "flat") is None
    monkeypatch.setattr(ops_r1cs, "flat_bytes", lambda r: tiled.nbytes)  # a tie: the tiled layout
    assert isinstance(pipeline.r1cs_layout(r1cs), ops_r1cs.TiledR1CS)
    monkeypatch.undo()

    def too_large(r):
        raise BadInput("R1CS too large for the device evaluation's int32 indexing")

    monkeypatch.setattr(ops_r1cs, "check_indexable", too_large)
    assert isinstance(pipeline.r1cs_layout(r1cs), ops_r1cs.TiledR1CS)
    with pytest.raises(BadInput, match="int32"):
        pipeline.r1cs_layout(r1cs, "flat")
    monkeypatch.undo()
    one = get_circuit("porep_like", "tiny").r1cs()
    assert one.tiling is None and pipeline.r1cs_layout(one) is None
    with pytest.raises(BadInput, match="layout=tiled needs"):
        pipeline.r1cs_layout(one, "tiled")
    with pytest.raises(BadInput, match="layout must be one of"):
        pipeline.ProverConfig.parse("layout=rows")
    assert str(pipeline.ProverConfig.parse("layout=flat")) == "tables=auto,layout=flat"


@pytest.mark.slow
def test_porep_tiled_layout_proves_and_verifies():
    """A multi-challenge porep_like key is made resident with the tiled layout (TiledR1CS): its proofs equal the
    flat layout's (the same R1CS without its tiling) and verify; a wrong public input does not verify, and an
    unsatisfied witness is refused naming its challenge block's constraint."""
    from cuzk_jax.groth16 import generator, pipeline, prover, verifier
    from cuzk_jax.ops import r1cs as ops_r1cs
    from cuzk_jax.reference.constants import R

    c = get_circuit("porep_like", "tiny", challenges=3, depth=2)
    r1cs = c.r1cs()
    assert r1cs.tiling is not None and r1cs.tiling.count == 3
    pk = generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(31))
    ins = [c.sample_inputs(p, seed=6) for p in range(2)]
    z, publics = witness_batch(c, ins)
    rs = prover.insecure_randomness_for_tests(8, 2)
    variants = (r1cs, dataclasses.replace(r1cs, tiling=None))
    keys = [pipeline.make_resident(pk, v, "msm=host,layout=tiled") for v in variants[:1]]
    keys.append(pipeline.make_resident(pk, variants[1], "msm=host"))
    # so small a circuit pads its header and input-row patterns to the whole group: auto picks flat for it
    assert not isinstance(pipeline.make_resident(pk, r1cs, "msm=host").r1cs, ops_r1cs.TiledR1CS)
    assert [isinstance(k.r1cs, ops_r1cs.TiledR1CS) for k in keys] == [True, False]
    got = [prover.prove(k, v, z, randomness=rs)[0] for k, v in zip(keys, variants)]  # verified before returned
    assert got[0] == got[1]
    assert verifier.verify_batch(pk.vk, publics, got[0])
    bad = [list(x) for x in publics]
    bad[1][-1] = (bad[1][-1] + 1) % R  # a parent index of partition 1's last challenge
    assert verifier.verify_each(pk.vk, bad, got[0]) == [True, False]
    counts = block_counts(c)
    col = counts["num_inputs"] + counts["head_aux"] + 2 * counts["block_aux"] + 7  # a private wire of challenge 2
    v = encoding.limbs_to_ints(z[:, 1, col:col + 1], "fr", montgomery=True)[0]
    z[:, 1, col] = encoding.ints_to_limbs([(v + 1) % R], "fr", montgomery=True)[:, 0]
    for k, v in zip(keys, variants):
        with pytest.raises(Unsatisfied, match="partition 1: .*challenge_2/"):
            prover.prove(k, v, z)


def test_worker_processes_and_sector_synthesis():
    """Two worker processes (spawned, writing one shared file) give the in-process batch; the sector synthesis
    returns PackedWitness objects that stack to the same z."""
    from cuzk_jax.circuits.porep_like import partition_witnesses, shutdown_pool
    from cuzk_jax.groth16.sector import synthesize

    c = get_circuit("porep_like", "mini", challenges=2, depth=3)
    ins = [c.sample_inputs(p, seed=0) for p in range(3)]
    one, publics = witness_batch(c, ins, workers=1)
    try:
        two, publics2 = witness_batch(c, ins, workers=2)
    finally:
        shutdown_pool()
    assert np.array_equal(one, two) and publics == publics2
    ws, pubs = synthesize(c, 3, 0)
    assert all(isinstance(w, PackedWitness) for w in ws) and pubs == publics
    assert np.array_equal(stack_z(ws), one)
    c.r1cs().check(ws[1])
    try:  # the workers sample their own partitions
        ws2, pubs2 = synthesize(c, 3, 0, workers=2)
    finally:
        shutdown_pool()
    assert pubs2 == publics and np.array_equal(stack_z(ws2), one)


@pytest.mark.parametrize("P,workers", [(1, 2), (2, 3)])
def test_more_workers_than_partitions(P, workers):
    """workers > partitions: the (partition, challenge) instances are split between the workers (a partition's
    challenges may go to different workers) and z, publics and the sampled sector are those of workers=1."""
    from cuzk_jax.circuits.porep_like import sampled_witness_batch, sector_witnesses, shutdown_pool, work_spans

    c = get_circuit("porep_like", "small")  # 2 challenges per partition
    C = c.params["challenges"]
    spans = work_spans(P, C, workers)
    assert len(spans) == min(workers, P * C) and spans[0][0] == 0 and spans[-1][1] == P * C
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert any(s[0] % C or s[1] % C for s in spans)  # some partition is split between workers
    ins = [c.sample_inputs(p, seed=4) for p in range(P)]
    one, publics = witness_batch(c, ins, workers=1)
    plain, _ = witness_batch(c, ins, workers=1, montgomery=False)
    try:
        many, publics2 = witness_batch(c, ins, workers=workers)
        plain2, _ = witness_batch(c, ins, workers=workers, montgomery=False)
        ws, pubs = sector_witnesses(c, P, 4, workers=workers)
        sampled, pubs2 = sampled_witness_batch(c, P, 4, workers=workers)
    finally:
        shutdown_pool()
    assert np.array_equal(one, many) and publics == publics2
    assert np.array_equal(plain, plain2)
    assert pubs == publics and np.array_equal(stack_z(ws), one)
    assert pubs2 == publics and np.array_equal(sampled, one)


def test_synth_bench_batched_row():
    from cuzk_jax.circuits import bench

    res = bench.run("porep_like", "mini", partitions=2, reps=1, warmup=0, device_eval=False, compiled=False,
                    workers=1, log=lambda *a: None)
    assert res["witness_mode"] == "batched" and res["batched_equals_builder"] is True
    assert res["workers"] == 1 and res["builder_partitions"] == 2
    for key in ("structure_constraints_per_s", "witness_constraints_per_s", "builder_constraints_per_s",
                "bytes_per_constraint", "peak_host_used_bytes", "peak_rss_self_bytes", "sector_sample_and_witness_s"):
        assert res[key] >= 0, key


def test_label_parents_validation_and_sector_presets():
    with pytest.raises(ValueError, match="label_parents"):
        get_circuit("porep_like", "small", label_parents=3)  # Poseidon labels
    with pytest.raises(ValueError, match="label_parents"):
        get_circuit("porep_like", "sha_min", parents=2, depth=2, label_parents=1)  # fewer than parents
    c = get_circuit("porep_like", "sector32g")
    assert (c.params["challenges"], c.params["depth"], c.params["layers"], c.params["parents"],
            c.params["label_parents"], c.params["tree_arity"]) == (18, 30, 11, 14, 37, 8)
