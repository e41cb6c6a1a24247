"""Pallas kernels (imported as ``cuzk_jax.ops.pallas``). Each has an XLA fallback chosen by the ops layer.

Submodules (loaded on first access): :mod:`.bucket` (MSM bucket accumulation), :mod:`.ntt` (NTT stages),
:mod:`.field_mul` (field multiplication kernel), :mod:`.limb_field` / :mod:`.ptx_field` (the limb-list field objects
the kernels compute with).
"""

import importlib

__all__ = ['bucket', 'field_mul', 'limb_field', 'ntt', 'ptx_field']


def __getattr__(name):
    if name in __all__:
        return importlib.import_module(f".{name}", __name__)  # also binds the submodule on this package
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
