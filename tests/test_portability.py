"""The portable (XLA, non-Pallas) ops lower for TPU, checked from a machine without one.

``jax.export.export(jax.jit(f), platforms=["tpu"])`` traces and lowers to StableHLO for TPU without a TPU (no
compilation): it fails on anything with no TPU lowering (a Triton/Pallas GPU kernel, a CPU/GPU-only custom call).
Every op is exported with the configuration its TPU default gives (:mod:`cuzk_jax.ops.config`), and so is the
whole prover: the device programs of the one prove pipeline (evaluate, H, the G1 and G2 MSMs) for a small
circuit. The modules contain 64-bit integer types (``ui64`` partial products and carries of the
limb arithmetic, ``i64`` loop indices): recorded as the ``int64_types`` property of each test (see "Portability
(TPU)" in BUILD.md); this test asserts only that the ops lower.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import pytest

from cuzk_jax.ops import curve, field, msm, ntt, qap
from cuzk_jax.ops import r1cs as ops_r1cs

from cuzk_jax.ops import config as ops_config

PLATFORM = "tpu"
U32 = jnp.uint32
N_MSM = 1 << 8
N_NTT = 1 << 10


def _ntt_kw() -> dict:
    return {"config": ops_config.NttConfig.default(PLATFORM)}


def _msm_kw() -> dict:
    return {"config": ops_config.MsmConfig.default(PLATFORM)}


def _on_tpu_schedule(obj):
    """The TPU field-multiplication schedule, explicit: a ``"platform"`` schedule would resolve to the *host's*
    choice while tracing here."""
    return obj.with_schedule(ops_config.default_schedule(PLATFORM))


def _spec(shape, dtype=U32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _lower(record_property, f, *args) -> str:
    exported = jax.export.export(jax.jit(f), platforms=[PLATFORM])(*args)
    assert tuple(exported.platforms) == (PLATFORM,)
    text = exported.mlir_module()
    wide = sorted(set(re.findall(r"\bu?i64\b", text)))
    record_property("int64_types", ",".join(wide) or "none")
    return text


@pytest.mark.parametrize("name", ["fr", "fq", "fq2"])
def test_field_mul_lowers_for_tpu(record_property, name):
    F = _on_tpu_schedule(field.FIELDS[name])
    shape = (2, 12, 64) if name == "fq2" else (F.limbs, 64)
    _lower(record_property, F.mul, _spec(shape), _spec(shape))


@pytest.mark.parametrize("form", ["jacobian", "xyzz"])
def test_curve_add_lowers_for_tpu(record_property, form):
    g1 = _on_tpu_schedule(curve.g1)
    if form == "jacobian":
        pt = curve.Jacobian(*[_spec((12, 64)) for _ in range(3)])
        _lower(record_property, g1.jacobian_add, pt, pt)
    else:
        pt = curve.XYZZ(*[_spec((12, 64)) for _ in range(4)])
        _lower(record_property, g1.xyzz_add, pt, pt)


@pytest.mark.parametrize("inverse", [False, True])
def test_ntt_lowers_for_tpu(record_property, inverse):
    kw = _ntt_kw()
    _lower(record_property, lambda x: ntt.ntt(x, inverse=inverse, **kw), _spec((8, 2, N_NTT)))


def test_compute_h_lowers_for_tpu(record_property):
    kw = _ntt_kw()
    v = _spec((8, N_NTT))
    _lower(record_property, lambda a, b, c: qap.compute_h(a, b, c, **kw), v, v, v)


def test_r1cs_evaluate_lowers_for_tpu(record_property):
    from cuzk_jax.circuits import get_circuit

    r = get_circuit("cube").r1cs()
    dr = jax.tree.map(lambda x: _spec(x.shape, x.dtype), ops_r1cs.to_device(r))
    _lower(record_property, lambda d, z: ops_r1cs.evaluate(d, z), dr, _spec((8, 4, r.num_vars)))


def test_msm_lowers_for_tpu(record_property):
    kw = _msm_kw()
    bases = curve.Affine(_spec((12, N_MSM)), _spec((12, N_MSM)), _spec((N_MSM,), jnp.bool_))
    _lower(record_property, lambda b, s: msm.msm(b, s, "g1", **kw), bases, _spec((8, N_MSM)))


def test_tpu_defaults_are_the_portable_path():
    """A Pallas/Triton kernel is never the only path: on TPU the defaults pick the XLA programs."""
    assert ops_config.MsmConfig.default(PLATFORM).kernel == "xla"
    assert ops_config.NttConfig.default(PLATFORM).kernel == "xla"


def test_a_gpu_kernel_does_not_lower_for_tpu():
    """The twin of the tests above: the export really checks the platform (the Pallas/Triton NTT is GPU-only)."""
    with pytest.raises(Exception):
        jax.export.export(jax.jit(lambda x: ntt.ntt(x, config=ops_config.NttConfig("pallas"))),
                          platforms=[PLATFORM])(_spec((8, N_NTT)))


def test_whole_prover_lowers_for_tpu(record_property):
    """The pipeline's device programs (cuzk_jax.groth16.pipeline.device_programs: evaluate with the satisfaction
    check, H, the G1 and G2 MSMs) with the TPU prover config, for the cube circuit: every program the prover runs
    on a device lowers for TPU."""
    from cuzk_jax.circuits import get_circuit
    from cuzk_jax.groth16 import pipeline

    cfg = pipeline.ProverConfig(msm=ops_config.MsmConfig.default(PLATFORM),
                                ntt=ops_config.NttConfig.default(PLATFORM), tables="off").resolved()
    ext = get_circuit("cube").r1cs().with_input_constraints()
    n = 1 << max(1, (ext.num_constraints - 1).bit_length())
    progs = pipeline.device_programs(None, "bellman", n, cfg.ntt, cfg.msm)
    P, m, v = 2, ext.num_constraints, ext.num_vars
    dr = jax.tree.map(lambda x: _spec(x.shape, x.dtype), ops_r1cs.to_device(ext))
    exported = {}
    for name, fn, args in (
            ("evaluate", progs["evaluate"], (dr, _spec((8, P, v)))),
            ("h", progs["h"], (_spec((8, P, m)),) * 3 + (qap.table_specs(n, config=cfg.ntt),)),
            ("g1", progs["g1"], (curve.Affine(_spec((12, v)), _spec((12, v)), _spec((v,), jnp.bool_)),
                                 _spec((8, P, v)))),
            ("g2", progs["g2"], (curve.Affine(_spec((2, 12, v)), _spec((2, 12, v)), _spec((v,), jnp.bool_)),
                                 _spec((8, P, v))))):
        exported[name] = jax.export.export(fn, platforms=[PLATFORM])(*args)
        assert tuple(exported[name].platforms) == (PLATFORM,), name
    record_property("programs", ",".join(sorted(exported)))
