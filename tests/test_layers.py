"""The layering contract (``.importlinter``): each layer imports only from the layers below it.

import-linter (grimp) builds its graph by walking the ``cuzk_jax`` directory, where ``ops/``, ``circuits/`` and
``scripts/`` are not (they are mapped in by pyproject's ``package-dir``). So these tests copy the sources into a
temporary tree laid out as installed (``ops/`` -> ``tmp/cuzk_jax/ops`` ...), following the mapping read from
pyproject.toml, and lint that tree in a subprocess with ``PYTHONPATH=tmp``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".importlinter"

# Packages being rewritten by other engineers right now; a violation whose importer is in one of these is expected.

_LINT = ("import sys; from importlinter.cli import lint_imports; "
         "sys.exit(lint_imports(config_filenames=(sys.argv[1],), no_cache=True, no_logo=True))")
_CYCLES = """
import itertools, sys, grimp
g = grimp.build_graph("cuzk_jax")
mods = sorted(m for m in g.modules if m.startswith(tuple(sys.argv[1:])))
for a, b in itertools.combinations(mods, 2):
    if g.chain_exists(a, b) and g.chain_exists(b, a):
        print(" -> ".join(g.find_shortest_chain(a, b)), "->", " -> ".join(g.find_shortest_chain(b, a)[1:]))
"""


def _package_tree(dst: Path) -> Path:
    """Copy the package's .py files into ``dst`` as installed (pyproject's ``packages`` and ``package-dir``)."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = cfg["package-dir"]
    for pkg in cfg["packages"]:
        base = max((k for k in mapping if pkg == k or pkg.startswith(k + ".")), key=len)
        src = ROOT / mapping[base] / Path(*pkg[len(base):].split(".")[1:])
        out = dst / Path(*pkg.split("."))
        out.mkdir(parents=True, exist_ok=True)
        for f in src.glob("*.py"):
            shutil.copy(f, out / f.name)
    return dst


def _run(tree: Path, code: str, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run([sys.executable, "-c", code, *args], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=300)


def _violations(output: str) -> list[tuple[str, str]]:
    """``(importer, imported)`` of every import line in import-linter's report of broken contracts."""
    return re.findall(r"(cuzk_jax[\w.]*) -> ([\w.]+)(?: \(l\.[\d, ]+\))?$", output, re.M)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return _package_tree(tmp_path_factory.mktemp("layers"))


def test_tree_has_mapped_subpackages(tree):
    for sub in ("ops", "ops/pallas", "circuits", "circuits/gadgets", "scripts"):
        assert (tree / "cuzk_jax" / sub / "__init__.py").exists(), sub


def test_layers_contract(tree):
    res = _run(tree, _LINT, str(CONFIG))
    assert res.returncode == 0, "layer violations:\n" + "\n".join(
        f"{a} -> {b}" for a, b in _violations(res.stdout)) + "\n" + res.stdout[-3000:] + res.stderr[-2000:]


@pytest.mark.parametrize("path, line, expect", [
    ("ops/field.py", "import cuzk_jax.groth16", "cuzk_jax.ops.field -> cuzk_jax.groth16"),
    ("circuits/cs.py", "from cuzk_jax import engine", "cuzk_jax.circuits.cs -> cuzk_jax.engine"),
    ("reference/field.py", "import cuzk_jax.encoding", "cuzk_jax.reference.field -> cuzk_jax.encoding"),
    ("reference/field.py", "import jax.numpy", "cuzk_jax.reference.field -> jax"),
])
def test_an_upward_import_breaks_the_contract(tmp_path, path, line, expect):
    tree = _package_tree(tmp_path)
    with open(tree / "cuzk_jax" / path, "a") as f:
        f.write(f"\n{line}  # injected by test_layers\n")
    res = _run(tree, _LINT, str(CONFIG))
    assert res.returncode != 0, res.stdout
    assert expect in res.stdout, res.stdout


def test_no_import_cycles_in_circuits_and_base(tree):
    res = _run(tree, _CYCLES, "cuzk_jax.circuits", "cuzk_jax.reference", "cuzk_jax.encoding", "cuzk_jax.errors")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "", "import cycles:\n" + res.stdout
