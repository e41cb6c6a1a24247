"""What every absl script under scripts/ shares: the persistent-compilation-cache flag, one-line errors.

* :func:`define_cache_dir_flag` / :func:`use_cache_dir`: ``--cache_dir`` (default ``~/.cache/cuzk_jax/xla``, ``''``
  disables it) and turning it on for this process only -- set by the script's ``main``, never at import.
* :func:`fail` and :func:`run`: bad input (a ``ValueError``: unknown circuit or preset, unreadable or corrupt file,
  unsatisfied witness) ends with one ``error: ...`` line on stderr and exit status 2, not a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, NoReturn

from absl import app, flags

DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "cuzk_jax", "xla")


def define_cache_dir_flag() -> None:
    flags.DEFINE_string("cache_dir", DEFAULT_CACHE_DIR, "persistent XLA compilation cache ('' to disable)")


def use_cache_dir(path: str) -> None:
    """Turn on JAX's persistent compilation cache at ``path`` (nothing when empty)."""
    if path:
        import jax

        jax.config.update("jax_compilation_cache_dir", path)


def fail(message) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def run(main: Callable) -> None:
    """``app.run(main)``, with a ``ValueError`` reported by :func:`fail`."""

    def guarded(argv):
        try:
            return main(argv)
        except ValueError as e:
            fail(e)

    app.run(guarded)
