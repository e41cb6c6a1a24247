"""jit/vmap XLA programs (imported as ``cuzk_jax.ops``): field, curve, NTT, MSM, R1CS evaluation, QAP.

Submodules (loaded on first access, so ``import cuzk_jax.ops`` imports nothing heavy):

* :mod:`.field` -- Fq / Fr / Fq2 on limb-major Montgomery uint32 arrays (:data:`~.field.fq`, ``fr``, ``fq2``);
* :mod:`.curve` -- G1 / G2 point formulas (:data:`~.curve.g1`, ``g2``; ``Affine``, ``Jacobian``, ``XYZZ``);
* :mod:`.ntt`, :mod:`.ntt_network` -- NTT over Fr; :mod:`.qap` -- the H polynomial;
* :mod:`.msm`, :mod:`.msm_precomputed`, :mod:`.fixed_base` -- multi-scalar and fixed-base multiplication;
  :mod:`.msm_split` -- the split MSM by scalar kind and the MSM over bases streamed from host memory;
  :mod:`.setup_scalars` -- the device setup's scalar programs (Lagrange basis, column sums);
* :mod:`.r1cs` -- constraint evaluation on the device; :mod:`.config` -- ``MsmConfig`` / ``NttConfig``;
* :mod:`.pallas` -- the Pallas kernels beside their XLA paths.

Public functions check dtype and limb shape of their array arguments and raise
:class:`~cuzk_jax.errors.BadInput` (see :mod:`.field`).
"""

from cuzk_jax import lazy

__all__ = ['config', 'curve', 'fixed_base', 'field', 'msm', 'msm_precomputed', 'msm_split', 'ntt', 'ntt_network', 'pallas', 'qap', 'r1cs', 'setup_scalars']

__getattr__, __dir__ = lazy.submodules(__name__, __all__)
