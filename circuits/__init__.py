"""Constraint-system builder, gadgets and circuits (imported as ``cuzk_jax.circuits``).

* :mod:`.cs` -- :class:`ConstraintSystem` (bellpepper-style builder: ``alloc``, ``alloc_input``, ``enforce``,
  namespaces; structure / witness / full modes), :class:`LinearCombination`, :class:`Variable`.
* :mod:`.r1cs` -- :class:`R1CS` (sparse A, B, C in CSR over ``z = [1, public..., private...]``) and
  :class:`Witness`.
* :mod:`.compiled` -- the compiled circuit form on disk: ``save(r1cs, path)`` / ``load(path)`` (memory-mapped,
  checksummed; one :class:`~cuzk_jax.errors.FormatError` for a damaged file), ``bytes_per_constraint``;
  ``Circuit.r1cs(cache=True)`` keeps one file per circuit shape under :func:`circuit_cache_dir`.
* :mod:`.gadgets` -- boolean, num (Fr arithmetic), uint32, sha256, poseidon, merkle.
* :mod:`.poseidon`, :mod:`.sha256_native` -- plain-Python oracles (Poseidon parameters from the Grain LFSR).
* Circuits: ``get_circuit(name, preset)`` for ``cube``, ``merkle_inclusion``, ``porep_like`` and Filecoin's other
  proof kinds ``winning_post``, ``window_post`` (:mod:`.fallback_post`) and ``snap_update`` (EmptySectorUpdate)
  (:mod:`.base`: the :class:`Circuit` API and the catalog, which imports a circuit module on first lookup;
  ``docs/proof_kinds.md``). :mod:`.native_batch`: batched native Poseidon and sparse Merkle forests.
* Errors (:mod:`cuzk_jax.errors`, re-exported): :class:`SynthesisError`, :class:`Unsatisfied`.

Imports within the package go one way: ``cs -> r1cs``; ``compiled -> r1cs``; ``base -> compiled``; gadgets ->
``cs``; circuit modules -> ``base``, gadgets; the package imports only the base layer (and ``cuzk_jax.ops`` inside
functions that evaluate on the device).
"""

from . import compiled
from .base import CATALOG, Circuit, circuit_cache_dir, get_circuit, list_circuits, presets, register
from .cs import ONE, ConstraintSystem, LinearCombination, SynthesisError, Unsatisfied, Variable
from .r1cs import R1CS, SparseMatrix, Witness, stack_z

# Filecoin's other proof kinds (issue 24), in the catalog so they load lazily like the circuits listed in base
CATALOG.update({
    "winning_post": "winning_post:WinningPost",
    "window_post": "window_post:WindowPost",
    "snap_update": "snap_update:SnapUpdate",
})

__all__ = ["compiled", "circuit_cache_dir", "CATALOG", "Circuit", "get_circuit", "list_circuits", "presets",
           "register", "ONE", "ConstraintSystem", "LinearCombination", "SynthesisError", "Unsatisfied", "Variable",
           "R1CS", "SparseMatrix", "Witness", "stack_z"]
