"""jit/vmap XLA programs (imported as ``cuzk_jax.ops``): field, curve, NTT, MSM, R1CS evaluation, QAP."""
