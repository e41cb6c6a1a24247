"""The command-line programs (imported as ``cuzk_jax.scripts``): thin absl mains over one library call each.

:mod:`.prove` (``cuzk-prove``), :mod:`.setup` (``cuzk-setup``), :mod:`.verify` (``cuzk-verify``), :mod:`.bench`
(``cuzk-bench --op=...``); also ``python -m cuzk_jax {prove,setup,verify,bench}``. Each defines its absl flags when
imported, so import one per process (they are loaded on first access, never by this package).
"""

from cuzk_jax import lazy

__all__ = ['bench', 'prove', 'setup', 'verify']

__getattr__, __dir__ = lazy.submodules(__name__, __all__)
