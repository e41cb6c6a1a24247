"""The ops configs (ops/config.py): frozen and hashable, one parser per type that round-trips and names bad tokens,
platform defaults in one place, and configs in the jit cache key (no shared compiled program)."""

from __future__ import annotations

import dataclasses

import pytest

from cuzk_jax.ops import msm as M
from cuzk_jax.ops import msm_precomputed as MP
from cuzk_jax.ops.config import MsmConfig, NttConfig, default_schedule


def test_configs_frozen_and_hashable():
    a, b = MsmConfig("pallas", block=8), MsmConfig("pallas", block=8)
    assert a == b and hash(a) == hash(b) and len({a, b, MsmConfig("xla")}) == 2
    n = NttConfig("pallas", block=128)
    assert hash(n) == hash(NttConfig("pallas", block=128)) and n != NttConfig("pallas")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.kernel = "xla"  # type: ignore[misc]


def test_platform_defaults():
    assert MsmConfig.default("gpu") == MsmConfig("pallas") and MsmConfig.default("cpu") == MsmConfig("xla")
    assert MsmConfig.default("tpu").kernel == "xla"
    assert NttConfig.default("gpu") == NttConfig("pallas", schedule="unrolled")  # measured faster on the H200
    assert NttConfig("pallas").sub_log() == 3 and NttConfig("xla").sub_log() == 32
    assert NttConfig.default("cpu") == NttConfig("xla", schedule="rolled")
    assert NttConfig.default("tpu") == NttConfig("xla", schedule="unrolled")
    assert default_schedule("cpu") == "rolled" and default_schedule("gpu") == "unrolled"
    assert MsmConfig.coerce(None) == MsmConfig.default() and NttConfig.coerce(None) == NttConfig.default()
    assert NttConfig.coerce("xla").schedule == default_schedule()  # None resolved before it keys a jit


@pytest.mark.parametrize("text", ["xla", "pallas", "pallas_interpret", "pallas:block=64:warps=2",
                                  "pallas_interpret:block=8:seg=8:acc_seg=8", "pallas:stages=0",
                                  "pallas:dbl_branch=0"])
def test_msm_parse_round_trips(text):
    cfg = MsmConfig.parse(text)
    assert str(cfg) == text and MsmConfig.parse(str(cfg)) == cfg


@pytest.mark.parametrize("text", ["xla", "pallas", "pallas_interpret:block=2", "pallas:block=128:warps=4",
                                  "xla:schedule=unrolled", "pallas:block=4096:sub=4",
                                  "pallas:finish=kernel"])
def test_ntt_parse_round_trips(text):
    cfg = NttConfig.parse(text)
    assert str(cfg) == text and NttConfig.parse(str(cfg)) == cfg


@pytest.mark.parametrize("text,token", [("cuda", "'cuda'"), ("pallas:ms=asm", "'ms'"), ("pallas:block", "'block'"),
                                        ("pallas:block=0", "block='0'"), ("pallas:block=48", "power of two"),
                                        ("xla:stages=6", "stages"), ("pallas-r4", "'pallas-r4'"),
                                        ("pallas:mul=split", "'mul'"), ("pallas:dbl_branch=2", "dbl_branch"),
                                        ("pallas:g2_mul=split_redc", "'g2_mul'"),
                                        ("pallas:lookahead=1", "'lookahead'")])
def test_msm_parse_rejects(text, token):
    with pytest.raises(ValueError, match=token):
        MsmConfig.parse(text)


@pytest.mark.parametrize("text,token", [("xla-r2", "'xla-r2'"), ("pallas:lead=3", "'lead'"),
                                        ("pallas:schedule=asm", "'asm'"), ("pallas:warps=-1", "warps='-1'"),
                                        ("pallas:seg=8", "'seg'"), ("pallas:fourstep=powers", "'fourstep'"),
                                        ("pallas:mul=split", "'mul'"), ("pallas:finish=fused", "finish"),
                                        ("xla:finish=kernel", "finish=kernel needs")])
def test_ntt_parse_rejects(text, token):
    with pytest.raises(ValueError, match=token):
        NttConfig.parse(text)


def test_configs_key_the_jit_cache():
    """Two configs -> two cached jitted functions; equal configs (or a string parsing to one) -> the same one."""
    a = M.msm_jit("g1", MsmConfig("xla"))
    b = M.msm_jit("g1", MsmConfig("pallas_interpret", block=8))
    assert a is not b
    assert a is M.msm_jit("g1", MsmConfig("xla")) is M.msm_jit("g1", "xla")
    assert b is M.msm_jit("g1", "pallas_interpret:block=8")
    assert M.msm_jit("g1", MsmConfig("xla"), window=4) is not a
    assert MP.msm_jit("g1", 8, MsmConfig("xla")) is not MP.msm_jit("g1", 8, MsmConfig("pallas_interpret"))
    if MsmConfig.default().kernel == "xla":
        assert M.msm_jit("g1") is a


def test_ntt_configs_key_the_jit_cache():
    """The NTT's stage program is jitted with the config static: a second config compiles a second program (even
    one whose fields the XLA kernel ignores), the same config reuses it; both compute the same transform."""
    import jax.numpy as jnp

    from cuzk_jax.ops import ntt as N

    x = jnp.zeros((8, 8), jnp.uint32).at[0, 1].set(1)
    a, b = NttConfig("xla", schedule="rolled"), NttConfig("xla", block=64, schedule="rolled")
    size = N._stages_jit._cache_size()
    ya = N.ntt(x, config=a)
    after_a = N._stages_jit._cache_size()
    assert bool(jnp.all(N.ntt(x, config=a) == ya)) and N._stages_jit._cache_size() == after_a
    assert bool(jnp.all(N.ntt(x, config=b) == ya))
    assert N._stages_jit._cache_size() == after_a + 1 and after_a in (size, size + 1)
