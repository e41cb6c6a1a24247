"""cuzk_jax.groth16.staging: every way of copying a witness batch gives the device array the host holds, bit for bit
(kinds against the Montgomery and the canonical one, zeros, dense values, padding columns, threads)."""

from __future__ import annotations

import numpy as np
import pytest

import jax.numpy as jnp

from cuzk_jax import encoding
from cuzk_jax.errors import BadInput
from cuzk_jax.groth16 import staging

ONE_MONT = np.asarray(encoding.ints_to_limbs([1], "fr", montgomery=True)[:, 0], np.uint32)
ONE_CANON = np.asarray(encoding.ints_to_limbs([1], "fr")[:, 0], np.uint32)


def _batch(rng, P, n, one, p_zero=0.5, p_one=0.4):
    u = rng.random((P, n))
    z = rng.integers(0, 2**32, size=(8, P, n), dtype=np.uint32)
    z[7] &= 0x0FFFFFFF
    z[:, u < p_zero] = 0
    z[:, (u >= p_zero) & (u < p_zero + p_one)] = one[:, None]
    # near misses: one limb off the one pattern, a single nonzero limb -- both "other"
    z[:, 0, 0] = one
    z[3, 0, 0] ^= 1
    z[:, 0, 1] = 0
    z[5, 0, 1] = 7
    return z


@pytest.fixture
def nrng():
    return np.random.default_rng(0x5EED)


def _padded(z, width):
    return np.pad(z, [(0, 0), (0, 0), (0, width - z.shape[-1])])


@pytest.mark.parametrize("one", [ONE_MONT, ONE_CANON], ids=["montgomery", "canonical"])
@pytest.mark.parametrize("threads,span", [(1, 1 << 22), (3, 37)])
def test_packed_stage_is_bit_exact(one, threads, span, nrng):
    z = _batch(nrng, 3, 1000, one)
    kinds, pos, vals = staging.pack(z, one, threads=threads, span=span)
    zero = ~np.any(z, axis=0)
    is_one = np.all(z == one[:, None, None], axis=0)
    assert np.array_equal(kinds, np.where(zero, 0, np.where(is_one, 1, 2)))
    assert kinds[0, 0] == 2 and kinds[0, 1] == 2 and pos.size == int(np.sum(kinds == 2))
    out = staging.unpack(jnp.asarray(kinds), jnp.asarray(pos.astype(np.int32)), jnp.asarray(vals),
                         jnp.asarray(one), width=1024)
    assert np.array_equal(np.asarray(out), _padded(z, 1024))
    assert np.array_equal(np.asarray(staging.stage_packed(z, one, 1000, threads=threads)), z)


@pytest.mark.parametrize("kind", ["zeros", "ones", "dense"])
def test_packed_stage_uniform_batches(kind, nrng):
    P, n = 2, 257
    if kind == "zeros":
        z = np.zeros((8, P, n), np.uint32)
    elif kind == "ones":
        z = np.broadcast_to(ONE_MONT[:, None, None], (8, P, n)).copy()
    else:
        z = _batch(nrng, P, n, ONE_MONT, p_zero=0.0, p_one=0.0)
    out = staging.stage_packed(z, ONE_MONT, 300, threads=2)
    assert np.array_equal(np.asarray(out), _padded(z, 300))


def test_copy_rows_threads_equal(nrng):
    z = _batch(nrng, 2, 333, ONE_MONT)
    for threads in (1, 4):
        rows = staging.copy_rows(z, threads=threads)
        assert len(rows) == 8 and all(np.array_equal(np.asarray(r), z[k]) for k, r in enumerate(rows))


def test_bad_batches():
    for bad in (np.zeros((8, 2, 4), np.uint64), np.zeros((7, 2, 4), np.uint32), np.zeros((8, 4), np.uint32)):
        with pytest.raises(BadInput, match="witness batch"):
            staging.pack(bad, ONE_MONT)
        with pytest.raises(BadInput, match="witness batch"):
            staging.copy_rows(bad)
