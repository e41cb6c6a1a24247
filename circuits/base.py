"""Circuit API and registry: ``get_circuit(name, preset)`` -> a :class:`Circuit`.

A circuit describes one R1CS *shape*. ``synthesize(cs, inputs)`` writes its constraints into a
:class:`~cuzk_jax.circuits.cs.ConstraintSystem`; ``inputs`` is a dict of witness values (from
``sample_inputs``) or ``None`` for structure-only synthesis. Synthesis must emit the same constraints whatever the
input values (partitions of one circuit share ONE R1CS), which is what lets the prover build the structure once
(:meth:`Circuit.r1cs`) and only the witness per partition (:meth:`Circuit.witness`).

**Compiled-circuit cache.** ``circuit.r1cs(cache=True)`` keeps the structure in a compiled file
(:mod:`.compiled`) under ``$CUZK_JAX_CIRCUIT_DIR`` or ``~/.cache/cuzk_jax/circuits``, named
``<name>-<preset>-<hash16>.r1cs`` where the hash covers the name, preset, parameters, the compiled-format version
and a fingerprint of the circuit code (the ``circuits`` package sources and the circuit's own module), so editing a
gadget never reuses a stale structure. Present: it is memory-mapped (no synthesis); absent: synthesized once and
saved. A file whose header metadata does not match the circuit is rebuilt; a corrupt or truncated one is rebuilt
too, with a logged warning (as the key cache does; :func:`.compiled.load` itself raises FormatError). A cache
directory that cannot be written only logs a warning. The file cache is opt-in for library calls: plain
``r1cs()`` uses it only when ``cache_dir`` is given or ``$CUZK_JAX_CIRCUIT_DIR`` is set, so tests and library users
never write into the home directory unasked; the scripts pass ``cache=True``.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib
import inspect
import json
import logging
import os
import random
from typing import Any, ClassVar

from cuzk_jax.errors import BadInput, FormatError

from . import compiled
from .cs import ConstraintSystem
from .r1cs import R1CS, Witness

log = logging.getLogger(__name__)
CIRCUIT_DIR_ENV = "CUZK_JAX_CIRCUIT_DIR"


def circuit_cache_dir() -> str:
    """Where compiled circuits are cached: ``$CUZK_JAX_CIRCUIT_DIR`` or ``~/.cache/cuzk_jax/circuits``."""
    return os.environ.get(CIRCUIT_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "cuzk_jax", "circuits")


@functools.lru_cache(maxsize=None)
def _source_fingerprint(extra: tuple) -> str:
    """SHA-256 (16 hex digits) of the ``circuits`` package's .py sources plus the files in ``extra``."""
    h = hashlib.sha256()
    root = os.path.dirname(os.path.abspath(__file__))
    files = []
    for d, _, names in os.walk(root):
        files += [os.path.join(d, n) for n in names if n.endswith(".py")]
    for f in sorted(set(files)) + [f for f in extra if f not in files]:
        h.update(os.path.relpath(f, root).encode() + b"\0")
        try:
            with open(f, "rb") as fh:
                h.update(fh.read())
        except OSError:  # no source (frozen / zip install): the name alone
            h.update(b"<unreadable>")
    return h.hexdigest()[:16]


class Circuit:
    name: ClassVar[str] = ""
    PRESETS: ClassVar[dict] = {}
    DEFAULT_PRESET: ClassVar[str] = "default"

    def __init__(self, preset: str | None = None, **overrides):
        preset = preset or self.DEFAULT_PRESET
        if preset not in self.PRESETS:
            raise BadInput(f"unknown preset {preset!r} for circuit {self.name!r}; "
                             f"available: {', '.join(self.PRESETS)}")
        params = dict(self.PRESETS[preset])
        params.pop("doc", None)
        unknown = set(overrides) - set(params)
        if unknown:
            raise BadInput(f"unknown parameter(s) {sorted(unknown)} for circuit {self.name!r}; "
                             f"parameters: {sorted(params)}")
        params.update(overrides)
        self.preset = preset
        self.params = params
        self._validate()
        self._r1cs: R1CS | None = None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({self.preset!r}, {args})"

    # -- to implement --------------------------------------------------------------------------------------------------
    def _validate(self) -> None:
        pass

    def synthesize(self, cs: ConstraintSystem, inputs: dict | None = None) -> None:
        raise NotImplementedError

    def sample_inputs(self, partition: int = 0, seed: int = 0) -> dict:
        raise NotImplementedError

    def public_inputs(self, inputs: dict) -> list[int]:
        raise NotImplementedError

    # -- helpers -----------------------------------------------------------------------------------------------------
    def _rng(self, partition: int, seed: int) -> random.Random:
        if partition < 0:
            raise BadInput(f"partition must be >= 0, got {partition}")
        # str seeding is deterministic across runs (hashed with SHA-512 by the random module)
        return random.Random(f"{self.name}:{self.preset}:{sorted(self.params.items())}:{seed}:{partition}")

    def code_fingerprint(self) -> str:
        """A hash of the code that synthesizes this circuit (the ``circuits`` sources and the class's module)."""
        try:
            own = inspect.getsourcefile(type(self))
        except TypeError:
            own = None
        return _source_fingerprint((os.path.abspath(own),) if own else ())

    def compiled_meta(self) -> dict:
        """The metadata a compiled file of this circuit carries (and must match to be reused)."""
        return json.loads(json.dumps({"circuit": self.name, "preset": self.preset, "params": self.params,
                                      "code": self.code_fingerprint(), "format": compiled.VERSION},
                                     sort_keys=True, default=str))

    def compiled_path(self, cache_dir: str | os.PathLike | None = None) -> str:
        """``<cache_dir>/<name>-<preset>-<hash16>.r1cs`` (default directory: :func:`circuit_cache_dir`)."""
        key = hashlib.sha256(json.dumps(self.compiled_meta(), sort_keys=True).encode()).hexdigest()[:16]
        return os.path.join(os.fspath(cache_dir) if cache_dir else circuit_cache_dir(),
                            f"{self.name}-{self.preset}-{key}.r1cs")

    def r1cs(self, cache_dir: str | os.PathLike | None = None, cache: bool | None = None) -> R1CS:
        """The R1CS (structure-only synthesis; cached on the instance, and in a compiled file when asked).

        ``cache=True``: load the compiled file from ``cache_dir`` (default :func:`circuit_cache_dir`) or synthesize
        and save it; ``cache=False``: never touch files; ``cache=None`` (default): as ``True`` when ``cache_dir``
        is given or ``$CUZK_JAX_CIRCUIT_DIR`` is set, else ``False`` (see the module docstring).
        """
        if cache is None:
            cache = bool(cache_dir) or bool(os.environ.get(CIRCUIT_DIR_ENV))
        path = self.compiled_path(cache_dir) if cache else None
        if self._r1cs is not None:  # already in memory: only make sure the file exists when asked for
            if path is not None and not os.path.exists(path):
                self._save_compiled(path)
            return self._r1cs
        if path is not None:
            self._r1cs = self._load_compiled(path)
            if self._r1cs is not None:
                return self._with_tiling(self._r1cs)
        self._r1cs = self.build_structure()
        if path is not None:  # absent, or unusable and rebuilt: (re)write it
            self._save_compiled(path)
        return self._r1cs

    def _blocks(self) -> tuple | None:
        """``(header, block0, count, prefix)`` of a header-and-blocks circuit with more than one block (the block
        protocol of :mod:`.block_witness`, structure mode), else None. A circuit of identical blocks with its own
        witness machinery may override it alone (porep_like: its challenge blocks)."""
        uses = getattr(self, "uses_blocks", None)
        if uses is None or not uses() or self.block_count < 2:
            return None
        header, block = self.block_synthesis(None)
        return header, (lambda cs, shared: block(cs, shared, 0)), self.block_count, self.BLOCK_PREFIX

    def _with_tiling(self, r1cs: R1CS) -> R1CS:
        """``r1cs`` with its :class:`~.tiling.Tiling` (a header-and-blocks circuit's R1CS loaded from a compiled
        file, which does not store it: derived from the header and one block, sizes only)."""
        blocks = self._blocks() if r1cs.tiling is None else None
        if blocks is not None:
            from .tiling import block_tiling

            object.__setattr__(r1cs, "tiling", block_tiling(*blocks))  # not part of the structure (compare=False)
        return r1cs

    def build_structure(self) -> R1CS:
        """The R1CS from scratch (no cache): structure-only synthesis with the builder, or -- for a circuit made of
        a header and identical blocks (:meth:`_blocks`) -- tiled from one synthesized block
        (:func:`.tiling.tiled_r1cs`, equal to the builder's, carrying its :class:`~.tiling.Tiling`)."""
        blocks = self._blocks()
        if blocks is not None:
            from .tiling import tiled_r1cs

            return tiled_r1cs(*blocks)
        cs = ConstraintSystem("structure")
        self.synthesize(cs, None)
        return cs.to_r1cs()

    def _load_compiled(self, path: str) -> R1CS | None:
        if not os.path.exists(path):
            return None
        try:
            r1cs, hdr = compiled.load_with_header(path)
        except FormatError as e:
            log.warning("rebuilding unusable compiled circuit: %s", e)
            return None
        if hdr.meta != self.compiled_meta():
            log.warning("rebuilding compiled circuit %s: it was built for %s, not %s", path, hdr.meta,
                        self.compiled_meta())
            return None
        return r1cs

    def _save_compiled(self, path: str) -> None:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            compiled.save(self._r1cs, path, self.compiled_meta())
        except OSError as e:
            log.warning("cannot save compiled circuit %s: %s", path, e)

    def without_r1cs(self) -> "Circuit":
        """A shallow copy without the cached R1CS: name, preset and parameters only (what a synthesis worker
        process needs; cheap to pickle)."""
        c = copy.copy(self)
        c._r1cs = None
        return c

    def witness(self, inputs: dict, check_shape: bool = True) -> Witness:
        """The assignment for ``inputs`` (witness-only synthesis: no constraints recorded)."""
        cs = ConstraintSystem("witness")
        self.synthesize(cs, inputs)
        w = cs.witness()
        if check_shape and self._r1cs is not None:
            self._r1cs.check_shape(w)
        return w

    def full(self, inputs: dict) -> tuple[R1CS, Witness]:
        """Constraints and values in one pass (tests and debugging)."""
        cs = ConstraintSystem("full")
        self.synthesize(cs, inputs)
        return cs.to_r1cs(), cs.witness()


# The catalog: circuit name -> "module:Class" inside this package. A circuit module imports this one (for
# :class:`Circuit`), never the other way round: the class is imported on first lookup, so importing the registry
# imports no circuit, and ``get_circuit("cube")`` imports only ``cube``.
CATALOG: dict[str, str] = {
    "cube": "cube:Cube",
    "merkle_inclusion": "merkle_inclusion:MerkleInclusion",
    "porep_like": "porep_like:PorepLike",
}
_REGISTRY: dict[str, type] = {}  # loaded catalog entries and circuits added with register()


def register(cls):
    """Add a circuit class outside the catalog (a test's or a user's circuit) under ``cls.name``."""
    _REGISTRY[cls.name] = cls
    return cls


def _lookup(name: str) -> type:
    cls = _REGISTRY.get(name)
    if cls is None:
        if name not in CATALOG:
            raise BadInput(f"unknown circuit {name!r}; available: {', '.join(_names())}")
        module, _, attr = CATALOG[name].partition(":")
        cls = _REGISTRY[name] = getattr(importlib.import_module(f"{__package__}.{module}"), attr)
    return cls


def _names() -> list[str]:
    return sorted(set(CATALOG) | set(_REGISTRY))


def get_circuit(name: str, preset: str | None = None, **overrides) -> Circuit:
    """``get_circuit("porep_like", "small")`` -> a circuit instance (parameters may be overridden by keyword)."""
    return _lookup(name)(preset, **overrides)


def list_circuits() -> dict[str, list[str]]:
    """``{circuit name: [preset names]}``."""
    return {n: list(_lookup(n).PRESETS) for n in _names()}


def presets(name: str) -> dict[str, dict[str, Any]]:
    return {k: dict(v) for k, v in _lookup(name).PRESETS.items()}
