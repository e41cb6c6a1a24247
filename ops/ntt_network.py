"""The constant-geometry radix-2^k butterfly network of one NTT loop iteration, shared by the XLA stage programs of
:mod:`cuzk_jax.ops.ntt` and the Pallas kernel of :mod:`cuzk_jax.ops.pallas.ntt` (below both, so neither imports the
other). Elements are limb lists; the caller supplies the field operations.
"""

from __future__ import annotations

import jax.numpy as jnp

U32 = jnp.uint32


def network(xs, q, stage, log_n: int, k: int, get_twiddles, mul_many, addsub):
    """k consecutive DIT stages (``stage .. stage+k-1``) on one group of inputs.

    ``xs[d]`` (``d < 2^k``) is the limb list of ``x[2^k q + d]``; returns ``zs`` with ``zs[C]`` the limb list of
    ``z[q + C n/2^k]``. ``q`` is the uint32 vector of group indices; ``stage`` may be traced.
    ``get_twiddles(taus)`` gathers the twiddle limb lists ``w^tau`` for a list of index vectors;
    ``mul_many(pairs)`` multiplies limb-list pairs and ``addsub(pairs, subtract)`` adds (or subtracts) them (the
    caller's field: the XLA path's stacked additions, the kernel's PTX blocks or limb lists).

    After j of the k stages, the value labelled (c_1..c_j, dd) sits at position
    ``sum_m c_m 2^(L-1-(j-m)) + q 2^(k-j) + dd``; stage j+1 pairs dd = 2t, 2t+1 (pair index = position >> 1) and
    uses the twiddle ``w^((i >> sh) << sh)``, ``sh = L-1-(stage+j)``.
    """
    L = log_n
    state = {((), d): xs[d] for d in range(1 << k)}
    for j in range(k):
        sh = (jnp.asarray(L - 1 - j, U32) - jnp.asarray(stage, U32)).astype(U32)
        keys = sorted({(cs, dd >> 1) for (cs, dd) in state})
        taus, pairs = [], []
        for cs, t in keys:
            base = 0
            for m, c in enumerate(cs, start=1):
                base += c << (L - 2 - (j - m))
            i = (q << U32(k - j - 1)) + U32(base + t)
            taus.append((i >> sh) << sh)
        tws = get_twiddles(taus)
        for (cs, t), tw in zip(keys, tws):
            pairs.append((state[(cs, 2 * t + 1)], tw))
        prods = mul_many(pairs)
        ets = [(state[(cs, 2 * t)], tprod) for (cs, t), tprod in zip(keys, prods)]
        sums = addsub(ets, subtract=False)  # stacked: one addition and one subtraction per stage
        diffs = addsub(ets, subtract=True)
        state = {}
        for (cs, t), u, v in zip(keys, sums, diffs):
            state[(cs + (0,), t)] = u
            state[(cs + (1,), t)] = v
    zs = []
    for C in range(1 << k):
        cs = tuple((C >> (m - 1)) & 1 for m in range(1, k + 1))
        zs.append(state[(cs, 0)])
    return zs
