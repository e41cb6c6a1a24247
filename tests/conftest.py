"""Shared pytest setup: a persistent XLA compilation cache (set by the test runner, not by the library)."""

import gc
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


@pytest.fixture(scope="session")
def cube_key():
    """``(circuit, r1cs, pk)`` of the cube circuit with test_groth16's known toxic waste (its compiled prover is
    shared): the engine tests' key."""
    from cuzk_jax.circuits import base
    from cuzk_jax.groth16 import generator

    circuit = base.get_circuit("cube")
    r1cs = circuit.r1cs()
    return circuit, r1cs, generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(11))


@pytest.fixture
def shm(tmp_path, monkeypatch):
    """The engine's shared witness files go to a directory of their own (so leftovers can be counted)."""
    d = tmp_path / "shm"
    d.mkdir()
    monkeypatch.setenv("CUZK_JAX_SHM_DIR", str(d))
    return d


@pytest.fixture
def no_persistent_cache():
    """Compile without writing the persistent cache. Twice in a full CPU run (jax/jaxlib 0.10.2), serializing the
    executable of the NTT's interpreted Pallas pass for the cache crashed the process (a segfault inside
    ``LoadedExecutable.serialize``) -- the same test alone, with or without the cache, passes; CI starts with an
    empty cache anyway, so nothing is lost there."""
    # JAX decides once per process whether the cache is used; what it checks before every write is the minimum
    # compile time, so a huge one skips the serialization
    old = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1e9)
    try:
        yield
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", old)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop every compiled program after each test module. Each XLA:CPU executable keeps its own memory mappings;
    a full run accumulated tens of thousands of them, reached the kernel's limit (vm.max_map_count, 65530) and
    XLA segfaulted in a later compile or cache write. Programs a later module needs come back from the persistent
    cache."""
    yield
    jax.clear_caches()
    gc.collect()

