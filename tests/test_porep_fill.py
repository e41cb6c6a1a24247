"""The batched witness's fast paths equal their references exactly: a planned SHA-256 compression (replayed from a
probe-built gather table) against the gadget, and fill_instances through os.pwrite into a file-backed memmap (also
a view of one) against the plain array write."""

import numpy as np
import pytest

from cuzk_jax.circuits import get_circuit
from cuzk_jax.circuits import porep_like as pl
from cuzk_jax.circuits.gadgets import boolean as B
from cuzk_jax.circuits.gadgets import sha256 as S
from cuzk_jax.circuits.gadgets.uint32 import UInt32, as_batched
from cuzk_jax.circuits.vector_witness import BatchCS

N = 3


def _inputs(cs, shape: str, seed: int):
    """State words and block bits of a compression of ``shape`` allocated in ``cs`` (the same wires for the same
    seed in any BatchCS)."""
    rng = np.random.default_rng(seed)
    bits = B.alloc_bits(cs, rng.integers(0, 2, size=(768, N), dtype=np.uint8), 768)
    if shape == "iv":  # the first compression of a hash: constant IV, some constant and repeated message bits
        state = S.iv()
        block = list(bits[256:])
        for p in range(40, 100):
            block[p] = B.constant(p % 3 == 0)
        block[200:232] = block[300:332]  # a repeated variable word
        block[5] = B.not_(block[5])
    else:
        state = [as_batched(cs, UInt32(bits[32 * i:32 * i + 32], B.pack_value(bits[32 * i:32 * i + 32])))
                 for i in range(8)]
        block = list(bits[256:])
        if shape == "padding":  # a constant block after a variable state
            block = S.constant_bits(bytes(range(64)))
    return state, block


@pytest.mark.parametrize("shape", ["variable", "iv", "padding"])
def test_planned_compression_equals_gadget(shape):
    S._PLANS.clear()
    runs = []
    for planned in (True, False):
        cs = BatchCS(N)
        state, block = _inputs(cs, shape, seed=7)
        out = S.sha256_compress(cs, state, block) if planned else S._compress_gadget(cs, state, block)
        runs.append((cs, out))
    assert any(p is not None for p in S._PLANS.values())  # the planned run did replay
    (a, oa), (b, ob) = runs
    assert (a.num_aux, a.num_constraints) == (b.num_aux, b.num_constraints)
    assert np.array_equal(a.bit_aux, b.bit_aux) and np.array_equal(a.bits, b.bits) and not a.fr_aux
    for x, y in zip(oa, ob):
        assert [(c.var, c.neg, c.value.tolist()) for c in x.bits] == [(c.var, c.neg, c.value.tolist()) for c in y.bits]
        assert np.array_equal(x.value, y.value)


@pytest.mark.parametrize("montgomery", [True, False])
def test_fill_memmap_equals_array(tmp_path, montgomery):
    c = get_circuit("porep_like", "sha_min", challenges=3, depth=2)
    ins = [c.sample_inputs(p, seed=4) for p in range(2)]
    parts, chals = [0, 0, 1, 1], [0, 2, 1, 0]
    cs, counts = pl.synthesize_batch(c, ins, (parts, chals))
    V = counts["num_vars"]
    rows = [1, 1, 2, 2]
    ref = np.zeros((8, 3, V), np.uint32)
    pl.fill_instances(cs, counts, ref, rows, chals, montgomery)
    mm = np.memmap(tmp_path / "z.u32", np.uint32, "w+", shape=(8, 3, V))
    assert pl._file_writer(mm) is not None
    pl.fill_instances(cs, counts, mm, rows, chals, montgomery)
    mm.flush()
    assert np.array_equal(np.fromfile(tmp_path / "z.u32", np.uint32).reshape(8, 3, V), ref)
    # a view of the mapping (rows shifted by one) lands at the same file positions
    mm2 = np.memmap(tmp_path / "z2.u32", np.uint32, "w+", shape=(8, 3, V))
    pl.fill_instances(cs, counts, mm2[:, 1:, :], [r - 1 for r in rows], chals, montgomery)
    mm2.flush()
    assert np.array_equal(np.fromfile(tmp_path / "z2.u32", np.uint32).reshape(8, 3, V), ref)


def test_witness_into_memmap_equals_private(tmp_path):
    """PorepLike.witness(out=) into a file-backed memmap (the engine's shared file) takes the os.pwrite path and
    gives the private array's limbs."""
    c = get_circuit("porep_like", "sha_min", challenges=3, depth=2)
    inp = c.sample_inputs(0, seed=2)
    ref = c.witness(inp, batched=True, check_shape=False)
    n = pl.block_counts(c)["num_vars"]
    mm = np.memmap(tmp_path / "w.u32", np.uint32, "w+", shape=(8, 1, n))
    w = c.witness(inp, batched=True, check_shape=False, out=mm)
    mm.flush()
    assert np.array_equal(np.fromfile(tmp_path / "w.u32", np.uint32).reshape(8, n), ref.limbs)
    assert np.array_equal(w.limbs, ref.limbs)
