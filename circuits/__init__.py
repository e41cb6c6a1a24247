"""Constraint-system builder, gadgets and circuits (imported as ``cuzk_jax.circuits``).

* :mod:`.cs` -- :class:`ConstraintSystem` (bellpepper-style builder: ``alloc``, ``alloc_input``, ``enforce``,
  namespaces; structure / witness / full modes), :class:`LinearCombination`, :class:`Variable`.
* :mod:`.r1cs` -- :class:`R1CS` (sparse A, B, C in CSR over ``z = [1, public..., private...]``) and
  :class:`Witness`.
* :mod:`.gadgets` -- boolean, num (Fr arithmetic), uint32, sha256, poseidon, merkle.
* :mod:`.poseidon`, :mod:`.sha256_native` -- plain-Python oracles (Poseidon parameters from the Grain LFSR).
* Circuits: ``get_circuit(name, preset)`` for ``cube``, ``merkle_inclusion``, ``porep_like`` (:mod:`.base`: the
  :class:`Circuit` API and the catalog, which imports a circuit module on first lookup).
* Errors (:mod:`cuzk_jax.errors`, re-exported): :class:`SynthesisError`, :class:`Unsatisfied`.

Imports within the package go one way: ``cs -> r1cs``; gadgets -> ``cs``; circuit modules -> ``base``, gadgets;
the package imports only the base layer (and ``cuzk_jax.ops`` inside functions that evaluate on the device).
"""

from .base import CATALOG, Circuit, get_circuit, list_circuits, presets, register
from .cs import ONE, ConstraintSystem, LinearCombination, SynthesisError, Unsatisfied, Variable
from .r1cs import R1CS, SparseMatrix, Witness, stack_z

__all__ = ["CATALOG", "Circuit", "get_circuit", "list_circuits", "presets", "register", "ONE", "ConstraintSystem",
           "LinearCombination", "SynthesisError", "Unsatisfied", "Variable", "R1CS", "SparseMatrix", "Witness", "stack_z"]
