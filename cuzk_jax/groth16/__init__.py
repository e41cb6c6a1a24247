"""Groth16 over BLS12-381 (layer 4: imports the base layer, :mod:`cuzk_jax.ops` and :mod:`cuzk_jax.circuits`).

Submodules (loaded on first access, e.g. ``cuzk_jax.groth16.prover``; this package imports none of them, so
``import cuzk_jax.groth16`` is cheap):

* :mod:`.data_structures` -- proving / verifying keys, proofs, their byte formats;
* :mod:`.generator` -- setup (keys from an R1CS and toxic waste);
* :mod:`.prover` -- :func:`~cuzk_jax.groth16.prover.prove` for a batch of partitions sharing one key;
* :mod:`.pipeline` -- the one prove pipeline (stage -> evaluate -> H -> MSMs -> finish);
* :mod:`.verifier` -- pairing check;
* :mod:`.host_curve` -- host-side curve helpers; :mod:`.sector` -- sector files of partition proofs;
* :mod:`.sharding` -- the partition axis over several local devices.
"""

from cuzk_jax import lazy

__all__ = ["data_structures", "generator", "host_curve", "pipeline", "prover", "sector", "sharding", "verifier"]

__getattr__, __dir__ = lazy.submodules(__name__, __all__)
