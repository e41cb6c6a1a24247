pragma circom 2.0.0;

// Test circuit for tests/test_snarkjs.py: a Poseidon hash plus a product chain, with one public input, two
// public outputs and two private inputs. Compiled with circom2's default --O1, so it keeps linear constraints
// (rows with empty A and B), which exercise the "C is not stored in the zkey" path of the prover.
// circomlib's Poseidon constants are for bn128; they are below the BLS12-381 scalar order, so the circuit
// compiles for --prime bls12381 (a valid circuit, not a standard Poseidon instance for this field).
// Size: ~440 constraints + 3 public < 2^9, so the ceremony needs a power-9 powers of tau.
include "circomlib/circuits/poseidon.circom";

template PoseidonChain(nMul) {
    signal input seed;        // public
    signal input x[2];        // private
    signal output digest;     // public output
    signal output prod;       // public output

    component h = Poseidon(1);
    h.inputs[0] <== seed + 3 * x[0] - x[1];
    digest <== h.out;

    signal m[nMul + 1];
    m[0] <== x[0] + seed;
    for (var j = 0; j < nMul; j++) {
        m[j + 1] <== m[j] * (x[1] + j);
    }
    prod <== m[nMul] * digest;
}

component main {public [seed]} = PoseidonChain(8);
