"""cuzk_jax.groth16.staging and the pipeline's stage: the rows copied from several threads are the host's limbs,
bit for bit, and bad batches get one clear error."""

from __future__ import annotations

import numpy as np
import pytest

from cuzk_jax.errors import BadInput
from cuzk_jax.groth16 import staging


@pytest.mark.parametrize("threads", [1, 3, 8, 16])
def test_copy_rows_threads_equal(threads):
    z = np.random.default_rng(threads).integers(0, 2**32, size=(8, 3, 333), dtype=np.uint32)
    rows = staging.copy_rows(z[:, 1:3], threads=threads)  # a partition slice: rows still contiguous per limb
    assert len(rows) == 8 and all(np.array_equal(np.asarray(r), z[k, 1:3]) for k, r in enumerate(rows))


def test_bad_batches():
    for bad in (np.zeros((8, 2, 4), np.uint64), np.zeros((7, 2, 4), np.uint32), np.zeros((8, 4), np.uint32)):
        with pytest.raises(BadInput, match="witness batch"):
            staging.copy_rows(bad, threads=4)
