"""Every package has an ``__init__.py`` with a docstring and ``__all__`` whose names resolve, and ``py.typed`` ships
as package data (issue 22 item 5). Building a wheel is slow, so pyproject.toml is read instead."""

import ast
import importlib
import importlib.util
import os
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setuptools():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)["tool"]["setuptools"]


def _package_dir(pkg: str) -> str:
    mapping = _setuptools()["package-dir"]
    parts = pkg.split(".")
    for k in range(len(parts), 0, -1):  # the longest mapped prefix
        prefix = ".".join(parts[:k])
        if prefix in mapping:
            return os.path.join(ROOT, mapping[prefix], *parts[k:])
    return os.path.join(ROOT, *parts)


PACKAGES = _setuptools()["packages"]


def test_py_typed_is_package_data():
    st = _setuptools()
    assert "py.typed" in st["package-data"]["cuzk_jax"]
    assert os.path.isfile(os.path.join(_package_dir("cuzk_jax"), "py.typed"))


def test_every_package_directory_is_listed():
    """No package directory is missing from pyproject's list (it would be left out of the wheel)."""
    listed = {os.path.realpath(_package_dir(p)) for p in PACKAGES}
    for pkg in PACKAGES:
        d = _package_dir(pkg)
        for name in os.listdir(d):
            sub = os.path.join(d, name)
            if os.path.isdir(sub) and any(f.endswith(".py") for f in os.listdir(sub)) and name != "__pycache__":
                assert os.path.realpath(sub) in listed, f"{pkg}.{name} ({sub}) is not in pyproject's packages"


@pytest.mark.parametrize("pkg", PACKAGES)
def test_init_has_docstring_and_all(pkg):
    path = os.path.join(_package_dir(pkg), "__init__.py")
    assert os.path.isfile(path), f"{pkg} has no __init__.py"
    with open(path) as fh:
        tree = ast.parse(fh.read())
    assert ast.get_docstring(tree), f"{pkg}/__init__.py has no docstring"
    assigned = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    assert "__all__" in assigned, f"{pkg}/__init__.py has no __all__"


@pytest.mark.parametrize("pkg", [p for p in PACKAGES if p != "cuzk_jax.scripts"])
def test_all_names_resolve(pkg):
    mod = importlib.import_module(pkg)
    assert len(set(mod.__all__)) == len(mod.__all__), f"{pkg}.__all__ has duplicates"
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{pkg}.{name}"


def test_scripts_names_exist():
    """Each script defines absl flags when imported (one per process), so only check the modules exist."""
    mod = importlib.import_module("cuzk_jax.scripts")
    for name in mod.__all__:
        assert importlib.util.find_spec(f"cuzk_jax.scripts.{name}") is not None, name


def test_package_imports_stay_light():
    """Importing these packages loads no JAX: their public names are resolved lazily."""
    light = ["cuzk_jax", "cuzk_jax.ops", "cuzk_jax.ops.pallas", "cuzk_jax.groth16", "cuzk_jax.engine",
             "cuzk_jax.scripts", "cuzk_jax.reference"]
    code = "import sys\n" + "".join(f"import {p}\n" for p in light) + "print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out
