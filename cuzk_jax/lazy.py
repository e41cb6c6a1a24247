"""Lazily imported submodules for package ``__init__`` files (base layer: standard library only).

``__getattr__, __dir__ = lazy.submodules(__name__, __all__)`` in a package's ``__init__.py`` makes
``package.name`` import ``package.name`` on first access (PEP 562), so importing a package stays cheap (no JAX
until a submodule that needs it is used) while every public name resolves.
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable, Sequence


def submodules(package: str, names: Sequence[str]) -> tuple[Callable, Callable]:
    """The ``__getattr__`` and ``__dir__`` of a package whose public ``names`` are its submodules."""
    names = frozenset(names)

    def __getattr__(name: str):
        if name in names:
            return importlib.import_module(f".{name}", package)  # also binds the submodule on the package
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | names)

    return __getattr__, __dir__
