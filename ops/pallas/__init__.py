"""Pallas kernels (imported as ``cuzk_jax.ops.pallas``). Each has an XLA fallback chosen by the ops layer."""
