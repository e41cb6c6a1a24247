"""circuits.block_witness: the parallel, limb-native witness of header-and-blocks circuits equals the builder's."""

import numpy as np
import pytest

from cuzk_jax import encoding
from cuzk_jax.circuits import base, block_witness
from cuzk_jax.circuits.fallback_post import SAMPLE_CHUNK
from cuzk_jax.circuits.r1cs import stack_z
from cuzk_jax.errors import BadInput

# window_post with 37 sectors: three sampling chunks, the last one partial
CASES = [("window_post", "tiny", {"sectors": 2 * SAMPLE_CHUNK + 5}, 2), ("snap_update", "tiny", {}, 2),
         ("winning_post", "tiny", {}, 1)]


@pytest.fixture(scope="module")
def builder():
    """Per case: circuit, R1CS, the builder's witnesses and public inputs of partitions 0 .. P-1 of sector 3."""
    out = {}
    for name, preset, over, P in CASES:
        c = base.get_circuit(name, preset, **over)
        r1cs = c.r1cs()
        inputs = [c.sample_inputs(p, 3) for p in range(P)]
        out[name] = (c, r1cs, [c.witness(x) for x in inputs], [c.public_inputs(x) for x in inputs])
    yield out
    block_witness.shutdown_pool()


@pytest.mark.parametrize("name", [c[0] for c in CASES])
@pytest.mark.parametrize("workers,montgomery", [(1, False), (1, True), (2, False)])
def test_equals_builder(builder, name, workers, montgomery):
    c, r1cs, ws, publics = builder[name]
    for w in ws:
        r1cs.check(w)
    z, pub = block_witness.witness_batch(c, len(ws), 3, workers=workers, montgomery=montgomery)
    assert z.dtype == np.uint32 and z.shape == (8, len(ws), r1cs.num_vars)
    assert np.array_equal(z, stack_z(ws, montgomery=montgomery))
    assert pub == publics


def test_given_inputs_and_num_vars(builder):
    """Caller-given inputs (here one with a wrong leaf) are synthesized as they are, by the workers too."""
    c, r1cs, _, _ = builder["window_post"]
    inp = c.sample_inputs(1, 3)
    inp["leaves"] = inp["leaves"].copy()
    inp["leaves"][SAMPLE_CHUNK + 1, 0] = (int(inp["leaves"][SAMPLE_CHUNK + 1, 0]) + 1)
    want = c.witness(inp, check_shape=False)
    z, pub = block_witness.witness_batch(c, 0, inputs_list=[inp], workers=2, num_vars=r1cs.num_vars)
    assert np.array_equal(z[:, 0], want.z_limbs(montgomery=False))
    assert pub == [c.public_inputs(inp)]


def test_sample_blocks_are_slices_of_the_instance():
    c = base.get_circuit("window_post", "tiny", sectors=2 * SAMPLE_CHUNK + 5)
    whole = c.sample_inputs(0, 9)
    part, offset = c.sample_blocks(0, 9, SAMPLE_CHUNK - 3, SAMPLE_CHUNK + 4)  # across a chunk boundary
    assert offset == SAMPLE_CHUNK - 3
    assert part["randomness"] == whole["randomness"]
    assert part["sector_ids"] == whole["sector_ids"][SAMPLE_CHUNK - 3:SAMPLE_CHUNK + 4]
    for key in ("comm_r", "comm_c", "comm_r_last", "challenges", "leaves", "paths"):
        assert np.array_equal(part[key], np.asarray(whole[key])[SAMPLE_CHUNK - 3:SAMPLE_CHUNK + 4]), key
    assert c.check_challenges(whole)
    with pytest.raises(BadInput, match="sector range"):
        c.sample_blocks(0, 9, 5, 5)


@pytest.mark.parametrize("P,count,workers,align", [(1, 37, 4, 16), (3, 5, 2, 1), (2, 2349, 16, 16), (4, 1, 8, 1)])
def test_work_units_cover_every_block_once(P, count, workers, align):
    units = block_witness.work_units(P, count, workers, align)
    for p in range(P):
        spans = sorted((b0, b1) for q, b0, b1 in units if q == p)
        assert spans[0][0] == 0 and spans[-1][1] == count
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        assert all(b0 % align == 0 and b1 > b0 for b0, b1 in spans)
    assert len(units) <= max(P, 2 * workers) + P


def test_not_a_block_circuit_is_bad_input():
    with pytest.raises(BadInput, match="not a header-and-blocks circuit"):
        block_witness.witness_batch(base.get_circuit("cube"), 1)


def test_public_inputs_read_back_canonically(builder):
    c, r1cs, ws, publics = builder["snap_update"]
    z, _ = block_witness.witness_batch(c, 1, 3, workers=1)
    assert encoding.limbs_to_ints(z[:, 0, 1:r1cs.num_inputs], "fr") == publics[0]


def test_tiling_survives_the_compiled_file(tmp_path):
    """The R1CS's Tiling (what the prover's tiled evaluation reads) is derived again for an R1CS loaded from a
    compiled file, which does not store it; a one-block circuit has none."""
    first = base.get_circuit("window_post", "tiny", sectors=5).r1cs(cache_dir=tmp_path)
    again = base.get_circuit("window_post", "tiny", sectors=5).r1cs(cache_dir=tmp_path)
    assert first is not again and first.tiling is not None and again.tiling == first.tiling
    assert again.digest() == first.digest() and first.tiling.count == 5 and first.tiling.m_h == 0
    assert base.get_circuit("winning_post", "tiny").r1cs().tiling is None
    snap = base.get_circuit("snap_update", "tiny").r1cs()
    assert snap.tiling.m_h > 0 and snap.tiling.m_h + 2 * snap.tiling.m_b == snap.num_constraints


@pytest.mark.parametrize("name", ["window_post", "snap_update"])
def test_engine_worker_synthesizes_one_partition_by_block_ranges(builder, name, monkeypatch):
    """The engine's synthesis task for these circuits (engine.synthesis.synthesize_partition -> partition_z): one
    partition's canonical limbs block range by block range (as many units as the sampling granule allows), equal
    to the builder's, with the sizes the engine checks against the R1CS; caller-given inputs
    likewise."""
    from cuzk_jax.engine import synthesis

    monkeypatch.setattr(block_witness, "PARTITION_UNITS", 64)
    c, r1cs, ws, publics = builder[name]
    out = synthesis.synthesize_partition(c.without_r1cs(), ("sample", 1, 3))
    assert out.montgomery is False and out.z.shape == (8, r1cs.num_vars)
    assert np.array_equal(out.z, ws[1].z_limbs(montgomery=False))
    assert out.public_inputs == publics[1]
    assert (out.num_inputs, out.num_aux, out.num_constraints) == (r1cs.num_inputs, r1cs.num_aux,
                                                                  r1cs.num_constraints)
    given = synthesis.synthesize_partition(c, ("inputs", c.sample_inputs(0, 3)))
    assert np.array_equal(given.z, ws[0].z_limbs(montgomery=False)) and given.public_inputs == publics[0]
