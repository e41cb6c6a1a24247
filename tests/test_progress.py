"""generator.setup reports its phases as they start and end (issue 22 item 3)."""

import logging

import pytest

from cuzk_jax.circuits import get_circuit
from cuzk_jax.groth16 import generator


@pytest.mark.slow  # a real setup: ~25 s of compiling on a loaded 2-core CPU
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


# ---------------------------------------------------------------------------------------------------------------
# Compile progress (cuzk_jax.compile_cache): a long compile is announced while it runs
# ---------------------------------------------------------------------------------------------------------------

import time  # noqa: E402

from cuzk_jax import compile_cache as cc  # noqa: E402


class _FakeBar:
    def __init__(self, desc):
        self.desc, self.refreshes, self.closed = desc, 0, False

    def refresh(self):
        self.refreshes += 1

    def close(self):
        self.closed = True


@pytest.fixture
def progress(monkeypatch):
    """Progress on (as after install_compile_progress) with a fake spinner factory; no JAX listener involved."""
    bars = []
    monkeypatch.setattr(cc, "_progress_installed", True)
    monkeypatch.setattr(cc, "_spinner", lambda desc: bars.append(_FakeBar(desc)) or bars[-1])
    monkeypatch.setattr(cc, "_watches", {})
    return bars


def _compile(seconds, name, after, monkeypatch):
    monkeypatch.setattr(cc, "_progress_after", after)
    cc._on_scalar(cc.BACKEND_COMPILE_EVENT, time.time(), fun_name=name)
    time.sleep(seconds)
    cc._on_duration(cc.BACKEND_COMPILE_EVENT, seconds, fun_name=name)


def test_long_compile_logs_start_and_end_with_spinner(progress, caplog, monkeypatch):
    with caplog.at_level(logging.INFO, logger="cuzk_jax"):
        _compile(0.8, "jit_prove", 0.05, monkeypatch)
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == ["compiling jit_prove (XLA) ...", "compiled jit_prove in 0.8 s"]
    (bar,) = progress
    assert bar.desc == "compiling jit_prove" and bar.closed and bar.refreshes >= 1
    assert not cc._watches


def test_short_compile_is_silent(progress, caplog, monkeypatch):
    with caplog.at_level(logging.INFO, logger="cuzk_jax"):
        _compile(0.01, "jit_small", 5.0, monkeypatch)
        cc._on_scalar("/jax/core/compile/jaxpr_trace_duration", 0.0, fun_name="x")  # other events: ignored
    assert not caplog.records and not progress
    time.sleep(0.05)
    assert not caplog.records  # the timer thread saw the end and stays quiet


def test_end_without_start_event(progress, caplog, monkeypatch):
    """A JAX that reports no start event: a long compile still gets its end line."""
    monkeypatch.setattr(cc, "_progress_after", 1.0)
    with caplog.at_level(logging.INFO, logger="cuzk_jax"):
        cc._on_duration(cc.BACKEND_COMPILE_EVENT, 0.5, fun_name="jit_a")
        cc._on_duration(cc.BACKEND_COMPILE_EVENT, 4.25, fun_name="jit_b")
    assert [r.getMessage() for r in caplog.records] == ["compiled jit_b in 4.2 s"]


def test_spinner_only_on_a_terminal(monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setattr(cc, "_stderr_is_terminal", lambda: False)
    assert cc._spinner("compiling x") is None
    monkeypatch.setattr(cc, "_stderr_is_terminal", lambda: True)
    bar = cc._spinner("compiling x")
    assert bar is not None and bar.total is None
    bar.close()


def test_real_compile_is_announced(caplog, monkeypatch):
    """Through JAX's own monitoring events: a fresh jit compile, announced at once (``after_secs=0``)."""
    import jax
    import jax.numpy as jnp

    monkeypatch.setattr(cc, "_progress_after", cc._progress_after)  # restored after the test
    monkeypatch.setattr(cc, "_stderr_is_terminal", lambda: False)
    assert cc.install_compile_progress(after_secs=0)

    def _progress_probe(x):
        return x * 3 + 1

    with caplog.at_level(logging.INFO, logger="cuzk_jax"):
        jax.jit(_progress_probe)(jnp.arange(5.0)).block_until_ready()
    msgs = [r.getMessage() for r in caplog.records if "_progress_probe" in r.getMessage()]
    assert len(msgs) == 2 and msgs[0].startswith("compiling") and msgs[1].startswith("compiled"), msgs
    with pytest.raises(ValueError, match="after_secs"):
        cc.install_compile_progress(after_secs=-1)
