"""Split MSM, streamed MSM and the device-memory estimate (ops/msm_split.py) against py_arkworks_bls12381's multiexp
and the plain MSM (ops/msm.py).

Compile time is the budget: every MSM here runs through a few module-level jitted programs of fixed shapes (G1: 4
partitions x 256 points, capacity 64; G2: 2 x 64, capacity 32) -- the streamed tests reuse the same programs, one
chunk at a time.
"""

from __future__ import annotations

import dataclasses
import random

import jax
import jax.numpy as jnp
import numpy as np
import py_arkworks_bls12381 as pa
import pytest

from cuzk_jax import encoding as enc
from cuzk_jax.errors import BadInput
from cuzk_jax.groth16 import host_curve
from cuzk_jax.ops import curve as cv
from cuzk_jax.ops import msm as M
from cuzk_jax.ops import msm_split as S
from cuzk_jax.ops.config import MsmConfig
from cuzk_jax.reference.constants import R

ARK = {"g1": pa.G1Point, "g2": pa.G2Point}
XLA = MsmConfig("xla")
N1, P1, CAP1 = 256, 4, 64  # G1 shapes
N2, P2, CAP2 = 64, 2, 32  # G2 shapes
SPLIT = {"g1": S.msm_split_jit("g1", XLA, capacity=CAP1), "g2": S.msm_split_jit("g2", XLA, capacity=CAP2)}
PLAIN_G1 = M.msm_jit("g1", XLA)
# values with high bits set, single full limbs, the top of the range
EDGE = [R - 1, R - 2, 2, 3, 1 << 254, (1 << 254) + 12345, (1 << 32) - 1, 1 << 64, (1 << 128) - 1, R >> 1]


def ark_scalar(v: int):
    return pa.Scalar.from_le_bytes(v.to_bytes(32, "little"))


class Case:
    """Random bases (``n`` points ``k_i G``; base 1 = -base 0, base 3 = base 2, base 5 at infinity) with their
    arkworks twins, and scalar rows; ``expected()`` is arkworks' multiexp per partition."""

    def __init__(self, group: str, n: int, seed: int):
        rng = random.Random(seed)
        self.group, self.n, self.rng = group, n, rng
        ks = [rng.randrange(1, R) for _ in range(n)]
        ks[1] = R - ks[0]  # negated point
        ks[3] = ks[2]  # repeated point
        self.ark = [ARK[group]() * ark_scalar(k) for k in ks]
        refs = [_xy(group, p) for p in self.ark]
        self.inf = np.zeros(n, bool)
        self.inf[5] = True
        b = _device_affine(group, refs)
        self.bases = cv.Affine(b.x, b.y, jnp.asarray(self.inf))
        self.host_bases = cv.Affine(np.asarray(b.x), np.asarray(b.y), self.inf.copy())

    def porep_row(self, edges=True) -> list[int]:
        """52 % zero, 47 % one, 1 % other (at least a few), with the edge scalars and the P+(-P) / P+P pairs."""
        rng = self.rng
        row = [0 if (u := rng.random()) < 0.52 else 1 if u < 0.99 else rng.randrange(2, R) for _ in range(self.n)]
        row[0] = row[1] = row[2] = row[3] = 1  # P + (-P), P + P among the ones
        row[5] = rng.randrange(R)  # base at infinity: ignored
        if edges:
            for i, v in enumerate(EDGE[: self.n // 8]):
                row[8 + 3 * i] = v
        return row

    def dense_row(self) -> list[int]:
        return [self.rng.randrange(R) for _ in range(self.n)]

    def scalars(self, rows) -> np.ndarray:
        return np.stack([enc.ints_to_limbs(r, "fr") for r in rows], axis=1).astype(np.uint32)

    def expected(self, rows) -> list:
        out = []
        for row in rows:
            live = [i for i in range(self.n) if row[i] and not self.inf[i]]
            if not live:
                out.append(None)
                continue
            p = ARK[self.group].multiexp_unchecked([self.ark[i] for i in live], [ark_scalar(row[i]) for i in live])
            out.append(_xy(self.group, p))
        return out


def _xy(group, p):
    if p == ARK[group].identity():
        return None
    b = p.to_xy_bytes_le()
    v = [int.from_bytes(b[48 * i : 48 * i + 48], "little") for i in range(len(b) // 48)]
    return (v[0], v[1]) if group == "g1" else ((v[0], v[1]), (v[2], v[3]))


def _device_affine(group, refs):
    from cuzk_jax.bench import msm as bmsm

    pts = [p if p is not None else ((0, 0) if group == "g1" else ((0, 0), (0, 0))) for p in refs]
    return bmsm.device_affine(group, pts)


def got(group, jac) -> list:
    return host_curve.from_device(cv.CURVES[group], jac)


@pytest.fixture(scope="module")
def g1case():
    return Case("g1", N1, 19)


# ---------------------------------------------------------------------------------------------------------------
# classification and sizing
# ---------------------------------------------------------------------------------------------------------------


def test_classify_counts_fractions_capacity(g1case):
    rows = [g1case.porep_row(), [0] * N1, [1] * N1, g1case.dense_row()]
    sc = g1case.scalars(rows)
    counts = np.asarray(S.classify(jnp.asarray(sc), jnp.asarray(g1case.inf)))
    assert counts.shape == (3, P1) and counts.dtype == np.int32
    for p, row in enumerate(rows):
        kinds = [0 if (v == 0 or g1case.inf[i]) else 1 if v == 1 else 2 for i, v in enumerate(row)]
        assert counts[:, p].tolist() == [kinds.count(k) for k in range(3)]
    no_inf = np.asarray(S.classify(jnp.asarray(sc)))
    assert no_inf[0, 2] == 0 and no_inf[1, 2] == N1  # without the mask the infinity column counts as a one
    assert np.asarray(S.classify(jnp.asarray(sc[:, 0]))).shape == (3,)
    fr = S.fractions(counts)
    assert fr["n"] == N1 and fr["partitions"] == P1
    assert abs(fr["zero"] + fr["one"] + fr["other"] - 1) < 1e-12
    assert fr["per_partition"][1] == [1.0, 0.0, 0.0]
    assert S.capacity_for(counts) == 256  # the dense row: 255 others -> next power of two
    assert S.capacity_for(counts[:, :3]) == 64  # few others: the minimum
    assert S.capacity_for(np.stack([counts[:, :3], counts[:, :3] * 3])) == 64
    assert S.capacity_for([[0], [0], [65]]) == 128
    with pytest.raises(BadInput):
        S.classify(jnp.zeros((7, 4), jnp.uint32))
    with pytest.raises(BadInput):
        S.classify(jnp.zeros((8, 4), jnp.int32))
    with pytest.raises(BadInput):
        S.capacity_for(np.zeros((4, 2)))


# ---------------------------------------------------------------------------------------------------------------
# split MSM
# ---------------------------------------------------------------------------------------------------------------


def test_split_g1_porep_like_zero_one_and_edges(g1case):
    """PoRep-like rows (with edge scalars, P+(-P) and P+P among the ones, a base at infinity), all-zero, all-one;
    equal to arkworks and to the plain MSM; the auto entry picks capacity 64 (one round) and the same program."""
    rows = [g1case.porep_row(), [0] * N1, [1] * N1, g1case.porep_row(edges=False)]
    sc = jnp.asarray(g1case.scalars(rows))
    want = g1case.expected(rows)
    assert want[1] is None and want[2] is not None
    res = SPLIT["g1"](g1case.bases, sc)
    assert got("g1", res) == want
    assert got("g1", PLAIN_G1(g1case.bases, sc)) == want
    res2, fr = S.msm_split_auto(g1case.bases, sc, "g1", config=XLA)
    assert got("g1", res2) == want and fr["per_partition"][2] == [1 / N1, 1 - 1 / N1, 0.0] and 0.4 < fr["one"] < 0.6


def test_split_g1_dense_needs_rounds(g1case):
    """More "other" scalars than the capacity (dense rows: 4 rounds of 64) still give the exact sum."""
    rows = [g1case.dense_row(), [EDGE[i % len(EDGE)] for i in range(N1)], [1] * N1, g1case.porep_row()]
    sc = jnp.asarray(g1case.scalars(rows))
    assert got("g1", SPLIT["g1"](g1case.bases, sc)) == g1case.expected(rows)


def test_msm_auto_picks_the_path(g1case):
    """Mostly 0/1 scalars take the split program, dense ones the plain program (both compiled above)."""
    sparse = [g1case.porep_row(), [0] * N1, [1] * N1, g1case.porep_row(edges=False)]
    dense = [g1case.dense_row(), g1case.dense_row(), [1] * N1, g1case.dense_row()]
    for rows, path in ((sparse, "split"), (dense, "plain")):
        res, fr = S.msm_auto(g1case.bases, jnp.asarray(g1case.scalars(rows)), "g1", config=XLA)
        assert fr["path"] == path and got("g1", res) == g1case.expected(rows)
    assert fr["capacity"] is None


def test_split_g1_chunked_passes(g1case):
    """A ``max_pairs`` too small for one pass: four chunks of 64 points (fori_loop), each with its own rounds."""
    assert S.split_chunk(P1, N1, CAP1, 16700) == (64, 64, 4)
    fn = S.msm_split_jit("g1", XLA, capacity=CAP1, max_pairs=16700)
    rows = [g1case.dense_row(), g1case.porep_row(), [1] * N1, [0] * N1]
    assert got("g1", fn(g1case.bases, jnp.asarray(g1case.scalars(rows)))) == g1case.expected(rows)
    # the same bound given by the config (MsmConfig.max_pairs, what the prover's --prover=msm=...:max_pairs= sets)
    by_config = S.msm_split_jit("g1", dataclasses.replace(XLA, max_pairs=16700), capacity=CAP1)
    assert got("g1", by_config(g1case.bases, jnp.asarray(g1case.scalars(rows)))) == g1case.expected(rows)


@pytest.mark.slow
def test_split_g2_vs_arkworks():
    case = Case("g2", N2, 7)
    rows = [case.porep_row(), case.dense_row()]  # dense: 63 others > capacity 32 -> 2 rounds
    sc = jnp.asarray(case.scalars(rows))
    assert got("g2", SPLIT["g2"](case.bases, sc)) == case.expected(rows)


@pytest.mark.slow
def test_split_pallas_interpret_g1(g1case):
    """The Pallas kernels (under the interpreter, small blocks so runs cross lanes) take the merged list too."""
    cfg = MsmConfig("pallas_interpret", block=8, seg=8, acc_seg=8)
    n = 64
    rows = [g1case.porep_row()[:n], [EDGE[i % len(EDGE)] for i in range(n)]]
    bases = cv.Affine(g1case.bases.x[:, :n], g1case.bases.y[:, :n], g1case.bases.inf[:n])
    res = S.msm_split_jit("g1", cfg, capacity=8)(bases, jnp.asarray(g1case.scalars(rows)))
    want = [g1case.expected([r + [0] * (N1 - n)])[0] for r in rows]
    assert got("g1", res) == want


def test_split_empty_and_errors(g1case):
    rows = [g1case.porep_row()]
    sc = g1case.scalars(rows)
    empty = S.msm_split(cv.Affine(g1case.bases.x[:, :0], g1case.bases.y[:, :0], g1case.bases.inf[:0]),
                        jnp.zeros((8, 2, 0), jnp.uint32), "g1", config=XLA, capacity=CAP1)
    assert got("g1", empty) == [None, None]
    with pytest.raises(BadInput, match="capacity"):
        S.msm_split(g1case.bases, jnp.asarray(sc), "g1", config=XLA, capacity=0)
    with pytest.raises(BadInput, match="does not match"):
        S.msm_split(g1case.bases, jnp.zeros((8, 1, N1 - 1), jnp.uint32), "g1", config=XLA)
    with pytest.raises(BadInput, match="scalars"):
        S.msm_split(g1case.bases, jnp.zeros((8, 1, N1), jnp.int32), "g1", config=XLA)


# ---------------------------------------------------------------------------------------------------------------
# streamed MSM
# ---------------------------------------------------------------------------------------------------------------


def test_stream_chunks_plan():
    assert S.stream_chunks(600, 256) == (256, [(0, 0), (256, 0), (344, 168)])
    assert S.stream_chunks(512, 200) == (256, [(0, 0), (256, 0)])
    assert S.stream_chunks(10, 256) == (256, [(0, 0)])
    with pytest.raises(BadInput):
        S.stream_chunks(10, 0)


@pytest.mark.parametrize("split,device_scalars", [(False, False), (True, True)])
def test_streamed_equals_resident(g1case, split, device_scalars, monkeypatch):
    """600 points in chunks of 256 (the last chunk overlaps the previous one and masks the overlap); the chunks run
    the same compiled programs as the resident tests above; at most two chunks of bases are live on the device
    whenever a copy is issued (double buffering, counted with ``jax.live_arrays``)."""
    rng = random.Random(3)
    extra = [ARK["g1"]() * ark_scalar(rng.randrange(1, R)) for _ in range(600 - N1 - 88)]
    ark = g1case.ark + g1case.ark[:88] + extra  # repeats of bases across chunks
    dev = _device_affine("g1", [_xy("g1", p) for p in ark])
    inf = np.zeros(600, bool)
    inf[[5, 300, 599]] = True
    hb = cv.Affine(np.asarray(dev.x), np.asarray(dev.y), inf)
    rows = [[0 if (u := rng.random()) < 0.52 else 1 if u < 0.99 else rng.randrange(R) for _ in range(600)]
            for _ in range(P1)]
    rows[1] = [0] * 600
    rows[2][590:] = EDGE  # in the overlap of the last chunk
    sc = np.stack([enc.ints_to_limbs(r, "fr") for r in rows], axis=1).astype(np.uint32)
    want = []
    for row in rows:
        live = [i for i in range(600) if row[i] and not inf[i]]
        p = ARK["g1"].multiexp_unchecked([ark[i] for i in live], [ark_scalar(row[i]) for i in live]) if live else None
        want.append(None if p is None else _xy("g1", p))
    def live_chunks():
        return sum(a.shape == (12, N1) and a.dtype == jnp.uint32 for a in jax.live_arrays()) // 2

    base = live_chunks()  # the fixture's bases have the chunk's shape too
    seen = []
    put = jax.device_put

    def counting_put(x, *a, **k):
        seen.append(live_chunks() - base)
        return put(x, *a, **k)

    monkeypatch.setattr(jax, "device_put", counting_put)
    res = S.msm_streamed(hb, jnp.asarray(sc) if device_scalars else sc, "g1", config=XLA, chunk=N1, split=split,
                         capacity=CAP1 if split else None)
    monkeypatch.undo()
    assert got("g1", res) == want
    assert len(seen) == 3 and seen[0] == 0 and max(seen) <= 1, seen  # one chunk live when the next is issued


def test_streamed_errors(g1case):
    sc = np.zeros((8, 1, N1), np.uint32)
    with pytest.raises(BadInput, match="host_bases"):
        S.msm_streamed((1, 2, 3), sc, "g1", chunk=64)
    with pytest.raises(BadInput, match="bases"):
        S.msm_streamed(g1case.host_bases, np.zeros((8, 1, N1 + 1), np.uint32), "g1", chunk=64)
    with pytest.raises(BadInput, match="chunk"):
        S.msm_streamed(g1case.host_bases, sc, "g1", chunk=0)
    bad = cv.Affine(g1case.host_bases.x.astype(np.int64), g1case.host_bases.y, g1case.host_bases.inf)
    with pytest.raises(BadInput, match="uint32"):
        S.msm_streamed(bad, sc, "g1", chunk=64)


# ---------------------------------------------------------------------------------------------------------------
# device memory estimate
# ---------------------------------------------------------------------------------------------------------------


def test_device_bytes_monotone_and_consistent():
    for group in ("g1", "g2"):
        for path in S.PATHS:
            kw = {"chunk": 1 << 12} if path.startswith("streamed") else {}
            by_n = [S.msm_device_bytes(1 << k, 2, group, path, **kw) for k in range(12, 23, 2)]
            assert all(a <= b for a, b in zip(by_n, by_n[1:])), (group, path, by_n)
            by_p = [S.msm_device_bytes(1 << 16, p, group, path, **kw) for p in (1, 2, 5, 10)]
            assert all(a < b for a, b in zip(by_p, by_p[1:])), (group, path, by_p)
        # streaming bounds the footprint by the chunk; resident paths grow with n
        n = 1 << 22
        assert S.msm_device_bytes(n, 10, group, "streamed", chunk=1 << 16) == \
            S.msm_device_bytes(n << 2, 10, group, "streamed", chunk=1 << 16)
        by_chunk = [S.msm_device_bytes(n, 10, group, "streamed_split", chunk=1 << k) for k in (12, 14, 16, 18)]
        assert all(a < b for a, b in zip(by_chunk, by_chunk[1:]))
        assert S.msm_device_bytes(n, 10, group, "streamed_split", chunk=1 << 16) < \
            S.msm_device_bytes(n, 10, group, "streamed_split_device_scalars", chunk=1 << 16) < \
            S.msm_device_bytes(n, 10, group, "split")
        assert S.msm_device_bytes(n, 10, group, "split") < S.msm_device_bytes(n, 10, group, "plain")
        assert S.msm_device_bytes(0, 1, group) == 0
        assert S.msm_device_bytes(1 << 20, 1, group, "plain", config="pallas") > S.base_bytes(1 << 20, group)
    assert S.base_bytes(10, "g1") == 970 and S.base_bytes(10, "g2") == 1930
    for bad in (dict(path="nope"), dict(path="streamed"), dict(p=0)):
        args = dict(n=64, p=1, group="g1") | bad
        with pytest.raises(BadInput):
            S.msm_device_bytes(**args)


def _measured(fn, *args) -> int:
    ma = fn.lower(*args).compile().memory_analysis()
    return ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes - ma.alias_size_in_bytes


@pytest.mark.parametrize("path,group", [("plain", "g1"), ("split", "g1"), ("split", "g2")])
def test_device_bytes_against_xla_buffer_assignment(path, group):
    """The estimate bounds XLA's own buffer assignment (arguments + outputs + temporaries) of the compiled program
    from above, within 1.6x (CPU, the test module's shapes: the programs are compiled already)."""
    n, p, cap = (N1, P1, CAP1) if group == "g1" else (N2, P2, CAP2)
    lead = (12,) if group == "g1" else (2, 12)
    u32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.uint32)  # noqa: E731
    bases = cv.Affine(u32(*lead, n), u32(*lead, n), jax.ShapeDtypeStruct((n,), jnp.bool_))
    fn = PLAIN_G1 if path == "plain" else SPLIT[group]
    measured = _measured(fn, bases, u32(8, p, n))
    est = S.msm_device_bytes(n, p, group, path, capacity=cap, config=XLA)
    assert measured <= est <= 1.6 * measured, (measured, est)
    # a streamed MSM runs this very program per chunk, plus one chunk of bases and scalars in flight
    streamed = "streamed_split" if path == "split" else "streamed"
    assert S.msm_device_bytes(10 * n, p, group, streamed, n, capacity=cap, config=XLA) == \
        est + S.base_bytes(n, group) + 32 * p * n


def test_bench_variant_grammar():
    from cuzk_jax.bench import msm as bmsm

    v = bmsm.parse_variant("split:pallas:seg=64:dist=porep:c=16")
    assert v["kind"] == "split" and v["dist"] == "porep" and v["window"] == 16 and v["plain"] == "pallas:seg=64:c=16"
    assert v["config"] == MsmConfig("pallas", seg=64)
    v = bmsm.parse_variant("stream_split:xla:chunk=20:host_scalars=1")
    assert (v["kind"], v["chunk"], v["host_scalars"], v["dist"], v["plain"]) == ("stream_split", 20, True, "dense",
                                                                                  "xla")
    assert bmsm.parse_variant("xla")["kind"] == "plain"
    assert bmsm.expand_specs(["split-ab"], on_gpu=False)[:2] == ["xla", "split:xla"]
    assert "stream_split:pallas:dist=porep" in bmsm.expand_specs(["split-ab"], on_gpu=True)
    for bad in ("split:xla:dist=sparse", "stream:xla:chunk=x", "split:nope"):
        with pytest.raises(ValueError):
            bmsm.parse_variant(bad)
