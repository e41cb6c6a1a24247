"""Public ops functions check dtype and limb shape of their array arguments (issue 22 item 5): int32 / uint64 /
float arrays and wrong limb counts raise one clear BadInput naming the function, eagerly and under jit; correct
inputs are unchanged. Cheap: the checks run before any program is compiled."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cuzk_jax.errors import BadInput
from cuzk_jax.ops import curve as C
from cuzk_jax.ops import field as F
from cuzk_jax.ops import msm as M
from cuzk_jax.ops import ntt as N

BAD_DTYPES = [jnp.int32, jnp.float32, np.uint64, np.int64]


def _bad(x, dtype):
    return np.asarray(x).astype(dtype)


@pytest.mark.parametrize("dtype", BAD_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("field", [F.fr, F.fq, F.fq2], ids=repr)
def test_field_rejects_wrong_dtype(field, dtype):
    a = field.ones((3,))
    name = repr(field)
    for method, call in [("mul", lambda x: field.mul(x, a)), ("add", lambda x: field.add(a, x)),
                         ("sub", lambda x: field.sub(x, a)), ("neg", field.neg), ("square", field.square),
                         ("eq", lambda x: field.eq(x, a)), ("from_mont", field.from_mont),
                         ("to_mont", field.to_mont), ("inv", field.inv), ("pow", lambda x: field.pow(x, 5)),
                         ("select", lambda x: field.select(True, x, a)),
                         ("mul_many", lambda x: field.mul_many([(a, a), (a, x)]))]:
        with pytest.raises(BadInput, match=rf"{name}\.{method}.*uint32.*got a {np.dtype(dtype).name}"):
            call(_bad(a, dtype))


def test_field_error_names_limb_shape():
    a = F.fr.ones((4,))
    with pytest.raises(BadInput, match=r"ops\.field\.fr\.mul: .*uint32 array of shape \(8, \*batch\).*\(7, 4\)"):
        F.fr.mul(a[:7], a)
    with pytest.raises(BadInput, match=r"\(12, \*batch\).*\(8, 4\)"):
        F.fq.mul(a, a)                                    # an Fr element given to Fq
    with pytest.raises(BadInput, match=r"ops\.field\.fq2\.mul: .*\(2, 12, \*batch\).*\(12, 4\)"):
        F.fq2.mul(F.fq.ones((4,)), F.fq2.ones((4,)))     # an Fq element given to Fq2
    with pytest.raises(BadInput, match="got a list"):
        F.fr.add([1, 2, 3], a)
    with pytest.raises(ValueError):                       # BadInput is a ValueError
        F.fr.square(jnp.zeros((8,), jnp.int32))


def test_checks_apply_under_jit_and_leave_results_unchanged():
    a = F.fr.constant(3, (2,))
    b = F.fr.constant(5, (2,))
    with pytest.raises(BadInput, match=r"ops\.field\.fr\.mul"):
        jax.jit(F.fr.mul)(a.astype(jnp.int32), b)
    out = F.fr.from_mont(F.fr.mul(a, b))
    assert np.asarray(out)[0].tolist() == [15, 15] and not np.asarray(out)[1:].any()
    assert out.dtype == jnp.uint32


@pytest.mark.parametrize("curve", [C.g1, C.g2], ids=repr)
def test_curve_rejects_bad_points(curve):
    g = curve.generator((2,))
    bad_x = C.Affine(_bad(g.x, jnp.int32), g.y, g.inf)
    with pytest.raises(BadInput, match=rf"ops\.curve\.{curve.name}\.affine_to_jacobian: .*Affine\.x.*uint32"):
        curve.affine_to_jacobian(bad_x)
    with pytest.raises(BadInput, match=r"Affine\.y.*got a float32"):
        curve.affine_neg(C.Affine(g.x, _bad(g.y, jnp.float32), g.inf))
    with pytest.raises(BadInput, match=r"inf as a bool mask"):
        curve.is_on_curve(C.Affine(g.x, g.y, g.inf.astype(jnp.int32)))
    with pytest.raises(BadInput, match=r"expected a point as Jacobian.*got Affine"):
        curve.jacobian_double(g)
    j = curve.affine_to_jacobian(g)
    with pytest.raises(BadInput, match=r"Jacobian\.z.*got a uint64"):
        curve.to_affine(C.Jacobian(j.x, j.y, _bad(j.z, np.uint64)))
    other = C.g2 if curve is C.g1 else C.g1
    with pytest.raises(BadInput, match=rf"ops\.curve\.{curve.name}\.affine_eq"):
        curve.affine_eq(other.generator((2,)), other.generator((2,)))   # G1 coordinates given to G2 and back
    assert bool(np.all(curve.affine_eq(g, curve.to_affine(j))))


def test_ntt_rejects_bad_limbs():
    for x in (jnp.zeros((8, 16), jnp.int32), np.zeros((8, 16), np.uint64), np.zeros((8, 16), np.float32)):
        with pytest.raises(BadInput, match=r"ops\.ntt\.ntt: x must have dtype uint32"):
            N.ntt(x)
    with pytest.raises(BadInput, match=r"ops\.ntt\.ntt: .*\(8, \*batch, n\).*\(12, 16\)"):
        N.ntt(jnp.zeros((12, 16), jnp.uint32))


def test_msm_rejects_bad_bases_and_scalars():
    g = C.g1.generator((4,))
    s = jnp.zeros((8, 4), jnp.uint32)
    with pytest.raises(BadInput, match=r"ops\.msm\.msm \(g1 bases\).*Affine\.x.*got a int32"):
        M.msm(C.Affine(_bad(g.x, jnp.int32), g.y, g.inf), s)
    with pytest.raises(BadInput, match=r"ops\.msm\.msm \(g2 bases\).*\(2, 12, \*batch\)"):
        M.msm(g, s, "g2")
    with pytest.raises(BadInput, match=r"ops\.msm\.msm: scalars .*uint32.*int32"):
        M.msm(g, s.astype(jnp.int32))
    with pytest.raises(BadInput, match=r"scalars"):
        M.msm(g, jnp.zeros((7, 4), jnp.uint32))


def test_r1cs_evaluate_checks_z():
    from cuzk_jax.circuits import get_circuit
    from cuzk_jax.ops import r1cs as OR

    r1cs = get_circuit("cube").r1cs()
    dr = OR.to_device(r1cs)
    with pytest.raises(ValueError, match="uint32"):
        OR.evaluate(dr, jnp.zeros((8, r1cs.num_vars), jnp.int32))
    with pytest.raises(ValueError, match=r"\(8, \*batch, n_vars\)"):
        OR.evaluate(dr, jnp.zeros((12, r1cs.num_vars), jnp.uint32))
