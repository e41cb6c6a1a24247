"""Pallas kernels (imported as ``cuzk_jax.ops.pallas``). Each has an XLA fallback chosen by the ops layer.

Submodules (loaded on first access): :mod:`.bucket` (MSM bucket accumulation), :mod:`.ntt` (NTT stages),
:mod:`.field_mul` (field multiplication kernel), :mod:`.limb_field` / :mod:`.ptx_field` (the limb-list field objects
the kernels compute with).
"""

from cuzk_jax import lazy

__all__ = ['bucket', 'field_mul', 'limb_field', 'ntt', 'ptx_field']

__getattr__, __dir__ = lazy.submodules(__name__, __all__)
