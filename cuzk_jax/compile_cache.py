"""JAX's persistent compilation cache for library users, and a one-time hint when it is off.

Compiling the prover's XLA programs costs tens of seconds per new process on a CPU (75-100 s for a 3-constraint
proof through the library API, issue 22); with the persistent cache a second process loads them from disk.

* :func:`enable_compile_cache` (``cuzk_jax.enable_compile_cache``): turn the cache on for this process at ``path``,
  else ``$CUZK_JAX_CACHE_DIR``, else ``~/.cache/cuzk_jax/xla`` (the folder the scripts use: ``cuzk_jax.cli``'s
  ``--cache_dir`` calls this). Never called at import: importing ``cuzk_jax`` changes no global JAX configuration.
* :func:`install_compile_hint`: called by the library's entry points (``generator.setup``, ``cuzk_jax.msm``,
  ``cuzk_jax.ntt``) on first use, not at import; registers a :mod:`jax.monitoring` listener on the backend-compile
  event (``/jax/core/compile/backend_compile_duration`` in JAX 0.10) that logs one warning the first time a compile
  takes longer than :data:`HINT_AFTER_SECS` while no cache directory is configured.
"""

from __future__ import annotations

import logging
import os
import threading

ENV_VAR = "CUZK_JAX_CACHE_DIR"
DEFAULT_DIR = os.path.join("~", ".cache", "cuzk_jax", "xla")
# Programs that compile faster than this are not written to the cache (JAX's default is 1 s; the prover has many
# programs of 0.3-1 s on a CPU, which add up in a new process).
MIN_COMPILE_TIME_SECS = 0.3
HINT_AFTER_SECS = 5.0
# the backend-compile event of jax._src.dispatch.BACKEND_COMPILE_EVENT (JAX 0.10 / 0.11)
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

logger = logging.getLogger("cuzk_jax")

_lock = threading.Lock()
_hint_installed = False
_hint_logged = False


def default_cache_dir() -> str:
    """``$CUZK_JAX_CACHE_DIR`` when set and non-empty, else ``~/.cache/cuzk_jax/xla`` (``~`` expanded)."""
    return os.path.expanduser(os.environ.get(ENV_VAR) or DEFAULT_DIR)


def enable_compile_cache(path: str | os.PathLike | None = None,
                         min_compile_time_secs: float = MIN_COMPILE_TIME_SECS) -> str:
    """Turn on JAX's persistent compilation cache for this process; returns the (absolute) cache directory.

    ``path``: the cache folder (``~`` expanded, created if missing); ``None``: :func:`default_cache_dir`.
    Programs compiling in at least ``min_compile_time_secs`` are stored. Idempotent: calling it again with the same
    folder changes nothing; a different folder switches the cache to it (JAX's cache state is reset so that the new
    folder is used even after earlier compiles).
    """
    import jax

    target = os.path.abspath(os.path.expanduser(os.fspath(path)) if path is not None else default_cache_dir())
    os.makedirs(target, exist_ok=True)
    with _lock:
        if jax.config.jax_compilation_cache_dir != target:
            jax.config.update("jax_compilation_cache_dir", target)
            _reset_jax_cache_state()
        if jax.config.jax_persistent_cache_min_compile_time_secs != min_compile_time_secs:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
    return target


def _reset_jax_cache_state() -> None:
    # JAX decides once per process whether the cache is used (at the first compile); reset that decision so a
    # folder configured after some compiles still takes effect.
    try:
        from jax.experimental.compilation_cache import compilation_cache as cc

        cc.reset_cache()
    except (ImportError, AttributeError):  # pragma: no cover - older/newer JAX without it
        pass


def cache_configured() -> bool:
    import jax

    return bool(jax.config.jax_compilation_cache_dir)


def _on_duration(event: str, duration_secs: float, **_kwargs) -> None:
    """jax.monitoring duration listener: the one-time hint for a long compile with no cache configured."""
    global _hint_logged
    if _hint_logged or event != BACKEND_COMPILE_EVENT or duration_secs < HINT_AFTER_SECS:
        return
    if cache_configured():
        return
    _hint_logged = True
    logger.warning(
        "cuzk_jax: compiling an XLA program took %.1f s and JAX's persistent compilation cache is off; call "
        "cuzk_jax.enable_compile_cache() (folder: $%s or %s) so the next process loads compiled programs from disk",
        duration_secs, ENV_VAR, DEFAULT_DIR)


def install_compile_hint() -> bool:
    """Register the long-compile hint listener once per process (cheap after the first call). Returns whether a
    listener is installed (False when this JAX has no ``jax.monitoring`` duration listeners)."""
    global _hint_installed
    if _hint_installed:
        return True
    with _lock:
        if _hint_installed:
            return True
        try:
            from jax import monitoring

            monitoring.register_event_duration_secs_listener(_on_duration)
        except (ImportError, AttributeError):  # pragma: no cover
            return False
        _hint_installed = True
        return True
