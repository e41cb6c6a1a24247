"""cuzk_jax.enable_compile_cache and the one-time long-compile hint (issue 22 item 2). Cheap: nothing compiles."""

import logging
import os

import jax
import pytest

import cuzk_jax
from cuzk_jax import compile_cache as cc


@pytest.fixture
def restore_config():
    saved = (jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs)
    yield
    jax.config.update("jax_compilation_cache_dir", saved[0])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", saved[1])
    cc._reset_jax_cache_state()


def test_enable_sets_dir_and_is_idempotent(tmp_path, restore_config):
    target = tmp_path / "xla"
    got = cuzk_jax.enable_compile_cache(str(target))
    assert got == str(target) and os.path.isdir(got)
    assert jax.config.jax_compilation_cache_dir == got
    assert jax.config.jax_persistent_cache_min_compile_time_secs == cc.MIN_COMPILE_TIME_SECS
    assert cuzk_jax.enable_compile_cache(str(target)) == got
    assert jax.config.jax_compilation_cache_dir == got
    from jax._src import monitoring  # the cache comes with the compile progress (the scripts call this)
    assert cc._on_scalar in monitoring.get_scalar_listeners()


def test_env_var_and_default(tmp_path, monkeypatch, restore_config):
    monkeypatch.setenv(cc.ENV_VAR, str(tmp_path / "env"))
    assert cc.enable_compile_cache() == str(tmp_path / "env")
    monkeypatch.delenv(cc.ENV_VAR)
    assert cc.default_cache_dir() == os.path.expanduser("~/.cache/cuzk_jax/xla")


def test_cli_uses_the_same_function(tmp_path, restore_config):
    from cuzk_jax import cli

    cli.use_cache_dir(str(tmp_path / "cli"))
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "cli")


def test_import_changes_nothing():
    import subprocess
    import sys

    code = ("import jax, cuzk_jax, cuzk_jax.groth16.generator; from jax._src import monitoring; "
            "assert jax.config.jax_compilation_cache_dir is None; "
            "from cuzk_jax import compile_cache as cc; "
            "assert cc._on_duration not in monitoring.get_event_duration_listeners(); "
            "assert cc._on_scalar not in monitoring.get_scalar_listeners()")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_hint_logs_once_without_cache(caplog, monkeypatch, restore_config):
    monkeypatch.setattr(cc, "_hint_logged", False)
    jax.config.update("jax_compilation_cache_dir", None)
    assert cc.install_compile_hint() and cc.install_compile_hint()
    assert cc._on_duration in __import__("jax._src.monitoring", fromlist=["x"]).get_event_duration_listeners()
    with caplog.at_level(logging.WARNING, logger="cuzk_jax"):
        cc._on_duration(cc.BACKEND_COMPILE_EVENT, 1.0)           # short: nothing
        cc._on_duration("/jax/some/other_event", 60.0)            # other event: nothing
        assert not caplog.records
        cc._on_duration(cc.BACKEND_COMPILE_EVENT, 12.0, fun_name="jit_prove")
        cc._on_duration(cc.BACKEND_COMPILE_EVENT, 30.0)
    hints = [r for r in caplog.records if "enable_compile_cache" in r.getMessage()]
    assert len(hints) == 1 and "compiling jit_prove took 12.0 s" in hints[0].getMessage()


def test_no_hint_with_cache(tmp_path, caplog, monkeypatch, restore_config):
    monkeypatch.setattr(cc, "_hint_logged", False)
    cc.enable_compile_cache(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="cuzk_jax"):
        cc._on_duration(cc.BACKEND_COMPILE_EVENT, 60.0)
    assert not caplog.records


def test_event_name_matches_jax():
    from jax._src import dispatch

    assert dispatch.BACKEND_COMPILE_EVENT == cc.BACKEND_COMPILE_EVENT
