"""generator.setup reports its phases as they start and end (issue 22 item 3)."""

import logging

import pytest

from cuzk_jax.circuits import get_circuit
from cuzk_jax.groth16 import generator


def test_setup_logs_phases(caplog, monkeypatch):
    r1cs = get_circuit("cube").r1cs()
    bars = []

    def bar(total, desc):  # record the bar requests; no bar (the chunked path is checked below)
        bars.append((total, desc))
        return None

    monkeypatch.setattr(generator, "_progress_bar", bar)
    lines = []
    with caplog.at_level(logging.INFO, logger="cuzk_jax.groth16.generator"):
        pk = generator.setup(r1cs, generator.insecure_toxic_waste_for_tests(7), progress=lines.append)
    msgs = [r.getMessage() for r in caplog.records]
    for phase in ("host scalars", "G1 points", "G2 points", "keys"):
        assert any(phase in m and m.endswith("...") for m in msgs), msgs
        assert any(phase in m and "done in" in m for m in msgs), msgs
        assert any(phase in ln for ln in lines), lines
    assert lines[-1].lstrip().startswith("setup:") and "total" in lines[-1]
    assert [d for _, d in bars] == ["setup G1", "setup G2"]
    assert pk.vk.ic


def test_bar_path_matches(monkeypatch):
    """With a bar, the chunks are multiplied one by one: the same points as one call."""
    pytest.importorskip("tqdm")
    import jax.numpy as jnp
    import numpy as np

    from cuzk_jax.ops import curve as C
    from cuzk_jax.ops import fixed_base

    class Bar:
        n = 0

        def update(self, k):
            Bar.n += k

        def close(self):
            pass

    monkeypatch.setattr(fixed_base, "default_chunk", lambda n=None: 2)
    scalars = [1, 2, 3, 5, 7]
    monkeypatch.setattr(generator, "_progress_bar", lambda total, desc: None)
    plain = generator._fixed_base(C.g1, scalars, "x")
    monkeypatch.setattr(generator, "_progress_bar", lambda total, desc: Bar())
    barred = generator._fixed_base(C.g1, scalars, "x")
    assert Bar.n == 3
    for a, b in zip(jnp.asarray(plain.x), jnp.asarray(barred.x)):
        np.testing.assert_array_equal(a, b)
