"""The command-line programs (imported as ``cuzk_jax.scripts``): thin absl mains over one library call each.

:mod:`.prove` (``cuzk-prove``), :mod:`.setup` (``cuzk-setup``), :mod:`.verify` (``cuzk-verify``), :mod:`.bench`
(``cuzk-bench --op=...``); also ``python -m cuzk_jax {prove,setup,verify,bench}``. Each defines its absl flags when
imported, so import one per process (they are loaded on first access, never by this package).
"""

import importlib

__all__ = ['bench', 'prove', 'setup', 'verify']


def __getattr__(name):
    if name in __all__:
        return importlib.import_module(f".{name}", __name__)  # also binds the submodule on this package
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
