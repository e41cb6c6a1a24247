"""On-disk cache of proving keys, so a second run of a script does not redo the setup.

Keys live under ``$CUZK_JAX_KEY_DIR`` or ``~/.cache/cuzk_jax/keys`` as ``<circuit>-<preset>-<digest16>.pk``
(the proving-key format of :mod:`cuzk_jax.groth16.data_structures`) with the verifying key beside it (``.vk``).
The R1CS digest in the name and inside the file ties a key to one circuit shape; a cached file that fails to load
(corrupt, truncated, other circuit) is reported and regenerated, never used. Cached keys are loaded with every
format check, the checksum and the curve equation but without the subgroup test of the big queries
(``ProvingKey.load(subgroup_check=False)``, which explains why that is safe): with it, loading a 2^20-domain key
took 434 s on an H200 (BUILD.md).
"""

from __future__ import annotations

import logging
import os
import time

from cuzk_jax.groth16 import generator
from cuzk_jax.groth16.data_structures import KeyFormatError, ProvingKey

log = logging.getLogger(__name__)


def cache_dir() -> str:
    return os.environ.get("CUZK_JAX_KEY_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "cuzk_jax", "keys")


def key_path(circuit, r1cs, directory: str | None = None) -> str:
    return os.path.join(directory or cache_dir(), f"{circuit.name}-{circuit.preset}-{r1cs.digest()[:16]}.pk")


def load_or_setup(circuit, r1cs=None, *, directory: str | None = None, toxic=None, progress=None) -> ProvingKey:
    """The proving key for ``circuit`` from the cache, or a fresh setup saved to the cache.

    ``toxic`` (tests only) fixes the toxic waste; by default it comes from the OS CSPRNG. ``progress`` is called
    with short status strings (e.g. ``print``) for long steps.
    """
    say = progress or (lambda msg: log.info("%s", msg))
    r1cs = r1cs if r1cs is not None else circuit.r1cs()
    path = key_path(circuit, r1cs, directory)
    if os.path.exists(path):
        t0 = time.perf_counter()
        try:
            pk = ProvingKey.load(path, subgroup_check=False)
            if pk.circuit_digest != r1cs.digest():
                raise KeyFormatError("cached key belongs to another circuit shape")
            say(f"loaded proving key {path} in {time.perf_counter() - t0:.1f}s")
            return pk
        except KeyFormatError as e:
            say(f"ignoring unusable cached key {path}: {e}")
    say(f"setup for {circuit.name}/{circuit.preset} ({r1cs.num_constraints} constraints) ...")
    t0 = time.perf_counter()
    pk = generator.setup(r1cs, toxic, progress=say)
    say(f"setup done in {time.perf_counter() - t0:.1f}s; saving {path}")
    t0 = time.perf_counter()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pk.save(path)
    vk_path = path[:-3] + ".vk"
    with open(vk_path + ".tmp", "wb") as fh:
        fh.write(pk.vk.to_bytes())
    os.replace(vk_path + ".tmp", vk_path)
    say(f"saved in {time.perf_counter() - t0:.1f}s")
    return pk
