"""Host encoding: ints/bytes <-> limb arrays, round trips and malformed input."""

import random
import time

import numpy as np
import pytest

from cuzk_jax import encoding as E
from cuzk_jax.reference import fq, fr


@pytest.mark.parametrize("ref", [fq, fr], ids=["fq", "fr"])
def test_int_roundtrip(ref):
    rnd = random.Random(0)
    vals = [0, 1, ref.modulus - 1] + [rnd.randrange(ref.modulus) for _ in range(100)]
    for mont in (False, True):
        limbs = E.ints_to_limbs(vals, ref, montgomery=mont)
        assert limbs.shape == (ref.limbs, len(vals)) and limbs.dtype == np.uint32
        assert E.limbs_to_ints(limbs, ref, montgomery=mont) == vals
    # limb order: little-endian 32-bit words, limb-major
    limbs = E.ints_to_limbs([(5 << 32) | 7], ref)
    assert limbs[:2, 0].tolist() == [7, 5] and not limbs[2:].any()
    # Montgomery form really is v * 2^(32 L) mod p
    assert E.limbs_to_ints(E.ints_to_limbs([3], ref, montgomery=True), ref) == [3 * ref.mont_r % ref.modulus]


@pytest.mark.parametrize("order", ["little", "big"])
def test_bytes_roundtrip(order):
    rnd = random.Random(1)
    vals = [rnd.randrange(fq.modulus) for _ in range(20)]
    data = b"".join(v.to_bytes(48, order) for v in vals)
    limbs = E.bytes_to_limbs(data, "fq", byteorder=order)
    assert E.limbs_to_ints(limbs, "fq") == vals
    assert E.limbs_to_bytes(limbs, "fq", byteorder=order) == data
    assert E.limbs_to_ints(E.bytes_to_limbs([v.to_bytes(48, order) for v in vals], "fq", order), "fq") == vals


def test_malformed_input_raises_value_error():
    with pytest.raises(ValueError, match="out of range"):
        E.ints_to_limbs([fr.modulus], fr)
    with pytest.raises(ValueError, match="out of range"):
        E.ints_to_limbs([-1], fr)
    for mont in (False, True):  # the range check happens before any Montgomery conversion
        with pytest.raises(ValueError, match="out of range"):
            E.ints_to_limbs([1, fr.modulus], fr, montgomery=mont)
    with pytest.raises(ValueError, match="must be an int"):
        E.ints_to_limbs([1.5], fr)
    with pytest.raises(ValueError, match="must be an int"):
        E.ints_to_limbs([True], fr)
    with pytest.raises(ValueError, match="multiple of 48"):
        E.bytes_to_limbs(b"\x00" * 47, "fq")
    with pytest.raises(ValueError, match=">= the modulus"):
        E.bytes_to_limbs(fq.modulus.to_bytes(48, "little"), "fq")
    with pytest.raises(ValueError, match="48 bytes"):
        E.bytes_to_limbs([b"\x00" * 32], "fq")
    with pytest.raises(ValueError, match="uint32"):
        E.limbs_to_ints(np.zeros((8, 2), np.int64), fr)
    with pytest.raises(ValueError, match="shape"):
        E.limbs_to_ints(np.zeros((12, 2), np.uint32), fr)
    with pytest.raises(ValueError, match="unknown field"):
        E.ints_to_limbs([1], "fp")


def test_vectorised_speed_is_reasonable():
    # 2^16 values must convert far faster than a per-limb Python loop (~1 s for 2^20 on one core)
    rnd = random.Random(2)
    vals = [rnd.randrange(fq.modulus) for _ in range(1 << 16)]
    t0 = time.perf_counter()
    limbs = E.ints_to_limbs(vals, fq)
    back = E.limbs_to_ints(limbs, fq)
    assert back == vals
    assert time.perf_counter() - t0 < 5.0
