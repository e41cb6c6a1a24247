"""Constraint-system builder, gadgets and circuits (imported as ``cuzk_jax.circuits``)."""
