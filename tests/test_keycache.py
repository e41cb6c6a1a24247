"""The key cache under concurrency and corruption (issue 21, item 1).

Two processes calling ``keycache.load_or_setup`` for one circuit on one empty key folder at once share ONE setup
(the second waits on the lock and loads the first's key): same vk bytes, one "setup for" line, no temp files. A
vk file from another setup, a torn manifest or a missing file is detected and the unit is redone, never used.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os

import pytest

from cuzk_jax import keycache
from cuzk_jax.circuits import base
from cuzk_jax.groth16 import generator


def _child(directory: str, barrier, queue) -> None:
    import jax

    # the test session's persistent XLA cache (conftest.py), so the setup's programs are loaded, not compiled
    cache = os.environ.get("CUZK_JAX_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "cuzk_jax",
                                                                  "xla-test")
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    from cuzk_jax import keycache as kc
    from cuzk_jax.circuits import base as b

    lines = []
    circuit = b.get_circuit("cube")
    barrier.wait(timeout=120)  # both processes ask at the same moment
    pk = kc.load_or_setup(circuit, directory=directory, progress=lines.append)
    queue.put((os.getpid(), pk.vk.to_bytes(), sum(ln.startswith("setup for") for ln in lines)))


@pytest.fixture(scope="module")
def cube():
    c = base.get_circuit("cube")
    return c, c.r1cs()


def _leftovers(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if ".tmp" in n)


def test_two_processes_share_one_setup(tmp_path):
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(str(tmp_path), barrier, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    (pid_a, vk_a, setups_a), (pid_b, vk_b, setups_b) = results
    assert vk_a == vk_b, "the two runs got different keys"
    assert setups_a + setups_b == 1, f"setup ran {setups_a + setups_b} times"
    assert _leftovers(tmp_path) == []
    names = sorted(os.listdir(tmp_path))
    assert [n.rsplit(".", 1)[1] for n in names] == ["lock", "manifest", "pk", "vk"]
    manifest = json.loads((tmp_path / [n for n in names if n.endswith(".manifest")][0]).read_text())
    assert manifest["pid"] in (pid_a, pid_b)
    vk_file = tmp_path / [n for n in names if n.endswith(".vk")][0]
    assert vk_file.read_bytes() == vk_a


def test_mismatched_pair_is_redone(tmp_path, cube):
    circuit, r1cs = cube
    seen = []
    pk1 = keycache.load_or_setup(circuit, r1cs, directory=str(tmp_path), progress=seen.append,
                                 toxic=generator.insecure_toxic_waste_for_tests(1))
    path = keycache.key_path(circuit, r1cs, str(tmp_path))
    paths = keycache.companion_paths(path)
    # a second load uses the cache
    seen.clear()
    assert keycache.load_or_setup(circuit, r1cs, directory=str(tmp_path), progress=seen.append).vk == pk1.vk
    assert not any(ln.startswith("setup for") for ln in seen)
    # the vk of another setup on disk (as a racing writer left it): detected, the unit is redone
    other = generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(2))
    assert other.vk != pk1.vk
    with open(paths["vk"], "wb") as fh:
        fh.write(other.vk.to_bytes())
    seen.clear()
    pk3 = keycache.load_or_setup(circuit, r1cs, directory=str(tmp_path), progress=seen.append,
                                 toxic=generator.insecure_toxic_waste_for_tests(3))
    assert any("ignoring unusable cached key" in ln and "manifest" in ln for ln in seen), seen
    assert any(ln.startswith("setup for") for ln in seen)
    assert pk3.vk not in (pk1.vk, other.vk)
    with open(paths["vk"], "rb") as fh:
        assert fh.read() == pk3.vk.to_bytes()
    # the pair is consistent again, and a missing manifest (a crash before it was written) means "absent"
    assert keycache.read_cached(path, r1cs).vk == pk3.vk
    os.unlink(paths["manifest"])
    assert keycache.read_cached(path, r1cs) is None
    assert _leftovers(tmp_path) == []


def test_manifest_binds_the_pair_even_if_both_files_are_valid(tmp_path, cube):
    """A pk and vk that are each well-formed and consistent with each other but not the manifest's are refused."""
    circuit, r1cs = cube
    keycache.load_or_setup(circuit, r1cs, directory=str(tmp_path), toxic=generator.insecure_toxic_waste_for_tests(4))
    path = keycache.key_path(circuit, r1cs, str(tmp_path))
    other = generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(5))
    other.save(path)
    with pytest.raises(keycache.KeyFormatError, match="does not match the manifest"):
        keycache.read_cached(path, r1cs)


def test_h_form_of_a_new_key_and_of_a_cached_one(tmp_path, cube):
    """``h_form`` picks a new key's H query form; a cached key of the other form is one clear error (the cache
    holds one key per circuit), not silently replaced; without ``h_form`` the cached key is used whatever its
    form."""
    from cuzk_jax.errors import BadInput

    circuit, r1cs = cube
    toxic = generator.insecure_toxic_waste_for_tests(1)
    pk = keycache.load_or_setup(circuit, r1cs, directory=str(tmp_path), toxic=toxic, h_form="coefficients")
    assert pk.h_form == "coefficients"
    assert keycache.load_or_setup(circuit, r1cs, directory=str(tmp_path)).vk == pk.vk
    with pytest.raises(BadInput, match="coefficients H query, lagrange was asked for"):
        keycache.load_or_setup(circuit, r1cs, directory=str(tmp_path), h_form="lagrange")
    with pytest.raises(BadInput, match="unknown H query form"):
        keycache.load_or_setup(circuit, r1cs, directory=str(tmp_path / "b"), h_form="evaluations")
    assert keycache.load_or_setup(circuit, r1cs, directory=str(tmp_path / "c"), toxic=toxic).h_form == "lagrange"
