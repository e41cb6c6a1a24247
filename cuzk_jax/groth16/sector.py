"""Proving whole sectors: synthesis of every partition, one batched proof, verification, files.

A *sector* is ``partitions`` instances of one circuit (PoRep C2: 10 partitions, 192-byte proofs, 1920 bytes).
Inputs of partition ``p`` of sector ``k`` come from ``circuit.sample_inputs(p, seed=k)``; all partitions of a
sector are proved in ONE device batch (cuzk's batch-all-partitions).

Files written by :func:`write_sector` (consumed by ``scripts/verify.py``)::

    <out>/sector-<k>.proofs        partitions x 192 bytes (A | B | C, bellperson compressed encodings)
    <out>/sector-<k>.public.json   {"circuit", "preset", "sector", "public_inputs": [[decimal strings]...]}
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from cuzk_jax.encoding import parse_field_element
from cuzk_jax.errors import FormatError

from . import prover, verifier
from cuzk_jax.fileio import atomic_write, load_json

from .data_structures import Proof, proofs_from_bytes, proofs_to_bytes


@dataclasses.dataclass
class SectorResult:
    sector: int
    proofs: list
    public_inputs: list
    timings: prover.Timings
    synthesis_s: float
    verified: bool | None = None

    def proof_bytes(self) -> bytes:
        return proofs_to_bytes(self.proofs)


def synthesize(circuit, partitions: int, sector: int, workers: int | None = 1):
    """Witnesses and public inputs of every partition of ``sector`` (host).

    porep_like (its own synthesis, not a subclass override) takes the batched path: every partition and challenge
    in one run of the gadgets over numpy arrays (:func:`cuzk_jax.circuits.porep_like.sector_witnesses`; ``workers``
    > 1 splits the partitions over that many worker processes, each sampling its own, None = one per CPU), giving
    :class:`~cuzk_jax.circuits.r1cs.PackedWitness` objects equal wire for wire to the builder's. Header-and-blocks
    circuits (WinningPoSt, WindowPoSt, SnapDeals) take :func:`cuzk_jax.circuits.block_witness.witness_batch`
    (canonical limbs, ``workers`` processes) and give canonical ``PackedWitness`` objects; other circuits use
    ``circuit.witness`` per partition."""
    from cuzk_jax.circuits import block_witness
    from cuzk_jax.circuits.porep_like import PorepLike, sector_witnesses
    from cuzk_jax.circuits.r1cs import PackedWitness

    if isinstance(circuit, PorepLike) and type(circuit).synthesize is PorepLike.synthesize:
        return sector_witnesses(circuit, partitions, sector, workers)
    if block_witness.supports(circuit):
        r1cs = circuit.r1cs()
        z, publics = block_witness.witness_batch(circuit, partitions, sector, workers=workers, num_vars=r1cs.num_vars)
        return [PackedWitness(z[:, p, :], r1cs.num_inputs, r1cs.num_constraints, montgomery=False)
                for p in range(partitions)], publics
    inputs = [circuit.sample_inputs(p, seed=sector) for p in range(partitions)]
    return [circuit.witness(x) for x in inputs], [circuit.public_inputs(x) for x in inputs]


def prove_sector(circuit, pk, partitions: int, sector: int, *, verify: bool = True, randomness=None,
                 config=None) -> SectorResult:
    """Synthesize, prove (one batch) and optionally verify (arkworks pairing, batched) one sector. ``pk``: a
    ``ProvingKey`` or a resident key; ``config``: :class:`~cuzk_jax.groth16.pipeline.ProverConfig` (or its text)."""
    r1cs = circuit.r1cs()
    t0 = time.perf_counter()
    witnesses, publics = synthesize(circuit, partitions, sector)
    synth = time.perf_counter() - t0
    proofs, timings = prover.prove(pk, r1cs, witnesses, randomness=randomness, config=config)
    timings.phases = {"synthesis": synth, **timings.phases}
    result = SectorResult(sector, proofs, publics, timings, synth)
    if verify:
        result.verified = verifier.verify_batch(pk.vk, publics, proofs)
    return result


def write_sector(out_dir: str, circuit, result: SectorResult) -> tuple[str, str]:
    os.makedirs(out_dir, exist_ok=True)
    proof_path = os.path.join(out_dir, f"sector-{result.sector}.proofs")
    pub_path = os.path.join(out_dir, f"sector-{result.sector}.public.json")
    atomic_write(proof_path, result.proof_bytes())
    doc = {"circuit": circuit.name, "preset": circuit.preset, "sector": result.sector,
           "public_inputs": [[str(x) for x in xs] for xs in result.public_inputs]}
    atomic_write(pub_path, json.dumps(doc, indent=1).encode())
    return proof_path, pub_path


def read_sector(proof_path: str, public_path: str) -> tuple[list[Proof], list[list[int]]]:
    """Proofs and public inputs written by :func:`write_sector`.

    Public inputs must be canonical decimal strings of field elements in ``[0, r)``
    (:func:`cuzk_jax.encoding.parse_field_element`: no floats, booleans, JSON numbers, signs, underscores or
    spaces). Malformed files raise :class:`~cuzk_jax.errors.FormatError` (a ``ValueError``) naming the file, the
    field and the index."""
    try:
        with open(proof_path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise FormatError(f"{proof_path}: cannot read file ({e.strerror or e})") from None
    try:
        proofs = proofs_from_bytes(data)
    except ValueError as e:
        raise FormatError(f"{proof_path}: {e}") from None
    try:
        with open(public_path, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        raise FormatError(f"{public_path}: cannot read file ({e.strerror or e})") from None
    doc = load_json(raw, public_path, FormatError)  # depth-bounded: hostile nesting cannot crash the process
    if not isinstance(doc, dict) or "public_inputs" not in doc:
        raise FormatError(f"{public_path}: malformed public-input file (expected an object with 'public_inputs')")
    rows = doc["public_inputs"]
    if not isinstance(rows, list) or not all(isinstance(xs, list) for xs in rows):
        raise FormatError(f"{public_path}: public_inputs must be a list of lists of decimal strings")
    publics = [[parse_field_element(x, f"{public_path}: public_inputs[{k}][{i}]", allow_int=False, error=FormatError)
                for i, x in enumerate(xs)] for k, xs in enumerate(rows)]
    if len(publics) != len(proofs):
        raise FormatError(f"{len(proofs)} proofs in {proof_path} but {len(publics)} public-input vectors")
    return proofs, publics
