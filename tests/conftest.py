"""Shared pytest setup: a persistent XLA compilation cache (set by the test runner, not by the library)."""

import os

import jax
import pytest

_CACHE = os.environ.get("CUZK_JAX_CACHE_DIR") or os.path.join(
    os.path.expanduser("~"), ".cache", "cuzk_jax", "xla-test"
)
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


@pytest.fixture(scope="session")
def rng():
    import random

    return random.Random(0x5EED)
