"""cuzk_jax: a Groth16 prover for BLS12-381 in JAX, following the cuzk pipelined proving engine.

Subpackages: :mod:`cuzk_jax.reference` (Python-int oracle), :mod:`cuzk_jax.ops` (XLA programs and Pallas kernels),
:mod:`cuzk_jax.circuits` (constraint systems), :mod:`cuzk_jax.groth16` (setup, prove, verify),
:mod:`cuzk_jax.engine` (the pipelined proving engine), :mod:`cuzk_jax.snarkjs` (circom/snarkjs interop),
:mod:`cuzk_jax.errors` (the project's error classes and the exit codes the scripts map them to).
Importing this package never changes global JAX configuration.

Host-level entry points for library users are loaded lazily (so ``import cuzk_jax`` stays cheap):
``cuzk_jax.msm`` (multi-scalar multiplication on encoded points), ``cuzk_jax.ntt`` (NTT on Python ints) and
``cuzk_jax.enable_compile_cache()`` (JAX's persistent compilation cache for this process: compiled programs are
loaded from ``~/.cache/cuzk_jax/xla`` or ``$CUZK_JAX_CACHE_DIR`` by the next process instead of recompiled).
"""

import importlib

__version__ = "0.1.0"

# public name -> (module, attribute); resolved on first access
_LAZY = {
    "msm": ("cuzk_jax.host_msm", "msm"),
    "ntt": ("cuzk_jax.host_ntt", "ntt"),
    "enable_compile_cache": ("cuzk_jax.compile_cache", "enable_compile_cache"),
}
# entry points whose first use installs the one-time "compiles are slow, enable the cache" hint
_HINTED = ("msm", "ntt")

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        if name in _HINTED:
            from cuzk_jax.compile_cache import install_compile_hint

            install_compile_hint()
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cuzk_jax' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
