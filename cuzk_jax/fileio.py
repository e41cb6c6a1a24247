"""Atomic file output and bounded JSON input (base layer: standard library only).

:func:`load_json` parses untrusted JSON text after checking its nesting depth without recursion: CPython's JSON
decoder recurses once per nesting level and can crash the process (not raise) on hostile input such as
``"[" * 100000``, so a depth limit must be enforced before it runs.

Every file the project writes (keys, manifests, proofs, public inputs, snarkjs JSON, compiled circuits, benchmark
JSON, script outputs) goes through :func:`atomic_file` / :func:`atomic_write`, so a reader sees the old file or
the whole new one, never a part, and a crash or full disk leaves no partial or empty file:

1. a unique temporary file in the target's folder (``tempfile.mkstemp``: concurrent writers never share one),
   with the mode ``open()`` would have given a new file (0666 less the umask) or the existing file's mode;
2. the data, ``flush`` and ``fsync``;
3. ``os.replace`` onto the target, then ``fsync`` of the folder (best effort) so the rename reaches the disk.

On any error the temporary file is removed, the target is left as it was, and an ``OSError`` names the target.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from typing import BinaryIO, Iterator


def file_mode(path: str) -> int:
    """The mode a new file at ``path`` gets from ``open()`` (0666 less the umask), or the existing file's mode."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextlib.contextmanager
def atomic_file(path) -> Iterator[BinaryIO]:
    """A binary file object whose contents replace ``path`` atomically when the ``with`` block ends without an
    exception (see the module docstring); on an exception nothing is replaced and the temporary file is removed."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
        os.fchmod(fd, file_mode(path))  # mkstemp's 0600 -> what open() would have given
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise OSError(e.errno, f"cannot write file ({e.strerror or e})", path) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    with contextlib.suppress(OSError):  # the rename itself reaches the disk (not every filesystem allows it)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def atomic_write(path, data) -> None:
    """Write ``data`` (bytes or str, UTF-8) to ``path`` atomically (see the module docstring)."""
    with atomic_file(path) as fh:
        fh.write(data.encode() if isinstance(data, str) else bytes(data))


MAX_JSON_DEPTH = 64  # every JSON format of the project nests a few levels; anything deeper is hostile or broken
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def json_depth(text: str) -> int:
    """The deepest ``[`` / ``{`` nesting of JSON ``text`` (brackets inside strings not counted), found by one
    linear scan -- no recursion whatever the input."""
    depth = deepest = 0
    for ch in _JSON_STRING.sub('""', text):
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def load_json(text, name: str, error=ValueError, max_depth: int = MAX_JSON_DEPTH):
    """``json.loads(text)`` for untrusted input: ``error(f"{name}: not valid JSON (...)")`` for malformed text,
    text that is not UTF-8, or nesting deeper than ``max_depth`` (checked first, see the module docstring)."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise error(f"{name}: not valid JSON (not UTF-8 text: {e.reason})") from None
    if json_depth(text) > max_depth:
        raise error(f"{name}: not valid JSON (nested too deeply: more than {max_depth} levels)")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise error(f"{name}: not valid JSON ({e})") from None
