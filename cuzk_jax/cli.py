"""What every absl main under scripts/ shares: flag helpers, ``--help``, one-line errors.

* :func:`define_cache_dir_flag` / :func:`use_cache_dir`: ``--cache_dir`` (default ``~/.cache/cuzk_jax/xla``, ``''``
  disables it) and turning it on for this process only -- set by the script's ``main``, never at import.
* :func:`define_path`: a string flag whose value has ``~`` expanded.
* :func:`run`: ``app.run(main)`` for the same main however it is started (``python scripts/prove.py``, the
  ``cuzk-prove`` console script, ``python -m cuzk_jax prove``): ``--help`` prints the script's docstring and its own
  flags and exits 0 (``--helpfull``: every flag); an unknown or malformed flag, a :class:`absl.app.UsageError` or
  bad input (a ``ValueError`` or missing file: unknown circuit or preset, unreadable or corrupt file, unsatisfied
  witness) ends with one ``error: ...`` line on stderr and exit status 2, not a traceback. A project error
  (:mod:`cuzk_jax.errors`) ends with its ``exit_code`` (:class:`~cuzk_jax.errors.ProofRejected`: 1, the others 2);
  an ``OSError`` (a file that cannot be read or written: full disk, permissions) with one line and 2.
* :func:`check_output_dir` / :func:`check_output_file`: output paths checked (directory created, a file created
  and removed in it) *before* any work, so a bad ``--out`` costs nothing; :func:`cuzk_jax.fileio.atomic_write`: a unique temporary
  file in the same directory, fsync, ``os.replace`` -- a crash or full disk never leaves a partial or empty output,
  and the temporary file is removed on error.

Exit status of every script: 0 ok, 1 a proof did not verify, 2 bad usage or bad input.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Callable, NoReturn

from absl import app, flags
from absl import logging as absl_logging

from cuzk_jax.errors import BadInput, CuzkError

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


def one_line(message, limit: int = 600) -> str:
    """``message`` as one line (newlines folded, at most ``limit`` characters)."""
    text = " ".join(str(message).split()) or "unknown error"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def fail(message, code: int = 2) -> NoReturn:
    print(f"error: {one_line(message)}", file=sys.stderr)
    sys.exit(code)


def _os_error(e: OSError) -> str:
    where = e.filename if e.filename is not None else ""
    what = e.strerror or str(e) or type(e).__name__
    return f"{where}: {what}" if where else what


def check_output_dir(path: str, flag: str = "out", shown: str | None = None) -> None:
    """Create ``path`` if needed and check that a file can be created in it; :class:`BadInput` (naming
    ``--flag=shown``, default ``path``) otherwise."""
    shown = path if shown is None else shown
    if os.path.exists(path) and not os.path.isdir(path):
        raise BadInput(f"--{flag}={shown}: cannot write there ({path} is not a directory)")
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".cuzk-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise BadInput(f"--{flag}={shown}: cannot write there ({e.strerror or e})") from None


def check_output_file(path: str, flag: str = "out") -> None:
    """Check that ``path`` can be written (atomically: its directory is created if needed and must be writable;
    ``path`` must not be a directory); :class:`BadInput` otherwise."""
    if not path:
        raise BadInput(f"--{flag}: empty path")
    if os.path.isdir(path):
        raise BadInput(f"--{flag}={path}: is a directory")
    check_output_dir(os.path.dirname(os.path.abspath(path)), flag, shown=path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise BadInput(f"--{flag}={path}: file is not writable")


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
        if not flags.FLAGS["verbosity"].present:  # absl's default (INFO) puts library chatter on stderr
            absl_logging.set_verbosity(absl_logging.WARNING)
        if len(rest) > 1:
            usage_error(f"unexpected arguments {' '.join(rest[1:])!r}")
        try:
            return main(rest)
        except app.UsageError as e:
            usage_error(e)
        except CuzkError as e:  # project errors: their own status (ProofRejected 1, bad input 2)
            fail(e, e.exit_code)
        except (ValueError, RecursionError) as e:  # bad input the library did not wrap
            fail(e if str(e) else type(e).__name__)
        except OSError as e:  # a file that cannot be read or written (missing, permissions, full disk)
            fail(_os_error(e))

    app.run(guarded, argv=argv, flags_parser=_parse)
