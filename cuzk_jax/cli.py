"""What every absl main under scripts/ shares: flag helpers, ``--help``, one-line errors.

* :func:`define_cache_dir_flag` / :func:`use_cache_dir`: ``--cache_dir`` (default ``~/.cache/cuzk_jax/xla``, ``''``
  disables it) and turning it on for this process only -- set by the script's ``main``, never at import.
* :func:`define_path`: a string flag whose value has ``~`` expanded.
* :func:`run`: ``app.run(main)`` for the same main however it is started (``python scripts/prove.py``, the
  ``cuzk-prove`` console script, ``python -m cuzk_jax prove``): ``--help`` prints the script's docstring and its own
  flags and exits 0 (``--helpfull``: every flag); an unknown or malformed flag, a :class:`absl.app.UsageError` or
  bad input (a ``ValueError`` or missing file: unknown circuit or preset, unreadable or corrupt file, unsatisfied
  witness) ends with one ``error: ...`` line on stderr and exit status 2, not a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, NoReturn

from absl import app, flags

flags.disclaim_key_flags()  # flags defined through the helpers below belong to the script that calls them

DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "cuzk_jax", "xla")
HELP_ARGS = ("--help", "-help", "-h", "-?", "--helpshort", "-helpshort")


class _PathParser(flags.ArgumentParser):
    def parse(self, argument):
        return os.path.expanduser(argument) if isinstance(argument, str) else argument

    def flag_type(self):
        return "path"


def define_path(name: str, default: str | None, help_text: str, **kw) -> None:
    """A string flag for a file or directory; ``~`` is expanded (in the default too)."""
    flags.DEFINE(_PathParser(), name, default, help_text, serializer=flags.ArgumentSerializer(), **kw)


def define_cache_dir_flag() -> None:
    define_path("cache_dir", DEFAULT_CACHE_DIR, "persistent XLA compilation cache ('' to disable)")


def use_cache_dir(path: str) -> None:
    """Turn on JAX's persistent compilation cache at ``path`` (nothing when empty)."""
    if path:
        from cuzk_jax.compile_cache import enable_compile_cache

        enable_compile_cache(path)


def _prog() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv else "cuzk"


def fail(message) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def usage_error(message) -> NoReturn:
    """One line (the message and where to find help), exit status 2."""
    fail(f"{message} (see {_prog()} --help)")


def _help(module) -> NoReturn:
    doc = (module.__doc__ or "").strip()
    name = sys.argv[0] if module.__name__ == "__main__" else module.__name__  # where absl registered its flags
    text = flags.FLAGS.module_help(name)
    print(f"{doc}\n\nflags:\n{text}" if text else doc)
    sys.exit(0)


def _parse(argv):
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        usage_error(str(e).splitlines()[0] if str(e) else type(e).__name__)


def run(main: Callable, argv: list[str] | None = None) -> None:
    """``app.run(main)`` with this project's ``--help`` and error handling (see the module docstring)."""
    argv = list(sys.argv if argv is None else argv)
    module = sys.modules[main.__module__]
    args = argv[1:argv.index("--")] if "--" in argv else argv[1:]
    if any(a in HELP_ARGS or a.startswith("--help=") for a in args):
        _help(module)
    if any(a in ("--helpfull", "-helpfull") for a in args):  # every flag, absl's included
        print(flags.FLAGS.get_help())
        sys.exit(0)

    def guarded(rest):
        if len(rest) > 1:
            usage_error(f"unexpected arguments {' '.join(rest[1:])!r}")
        try:
            return main(rest)
        except app.UsageError as e:
            usage_error(e)
        except (ValueError, FileNotFoundError) as e:
            fail(e)

    app.run(guarded, argv=argv, flags_parser=_parse)
