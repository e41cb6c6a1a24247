"""JAX's persistent compilation cache for library users, and a one-time hint when it is off.

Compiling the prover's XLA programs costs tens of seconds per new process on a CPU (75-100 s for a 3-constraint
proof through the library API, issue 22); with the persistent cache a second process loads them from disk.

* :func:`enable_compile_cache` (``cuzk_jax.enable_compile_cache``): turn the cache on for this process at ``path``,
  else ``$CUZK_JAX_CACHE_DIR``, else ``~/.cache/cuzk_jax/xla`` (the folder the scripts use: ``cuzk_jax.cli``'s
  ``--cache_dir`` calls this). Never called at import: importing ``cuzk_jax`` changes no global JAX configuration.
* :func:`install_compile_hint`: called by the library's entry points (``generator.setup``, ``prover.prove``,
  ``cuzk_jax.msm``, ``cuzk_jax.ntt``) on first use, not at import; registers a :mod:`jax.monitoring` listener on the backend-compile
  event (``/jax/core/compile/backend_compile_duration`` in JAX 0.10) that logs one warning the first time a compile
  takes longer than :data:`HINT_AFTER_SECS` while no cache directory is configured. It also installs the compile
  progress (:func:`install_compile_progress`).
* :func:`install_compile_progress` (installed by both functions above): a compile that runs longer than
  :data:`PROGRESS_AFTER_SECS` is announced while it runs -- a ``compiling <name> ...`` log line (``cuzk_jax``
  logger, INFO; the scripts show INFO with ``--verbosity=0``) and, when stderr is a terminal, a tqdm spinner with
  the elapsed time -- and a ``compiled <name> in <t> s`` line when it ends. JAX reports a backend compile's start as a :mod:`jax.monitoring` scalar event (its start time) and its end
  as a duration event, both named :data:`BACKEND_COMPILE_EVENT` and carrying ``fun_name``; a timer thread decides
  when a compile has run long enough to be announced, so short compiles print nothing. Where a JAX version reports
  no start event, only the end line is logged.
* :func:`compile_in_threads`: run compile thunks side by side, one thread each (the setup's programs and the
  prover's precompile use it).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import sys
import threading
import time

ENV_VAR = "CUZK_JAX_CACHE_DIR"
DEFAULT_DIR = os.path.join("~", ".cache", "cuzk_jax", "xla")
# Programs that compile faster than this are not written to the cache (JAX's default is 1 s; the prover has many
# programs of 0.3-1 s on a CPU, which add up in a new process).
MIN_COMPILE_TIME_SECS = 0.3
HINT_AFTER_SECS = 5.0
#: A compile running longer than this is announced (log line, spinner on a terminal) while it runs.
PROGRESS_AFTER_SECS = 3.0
# the backend-compile event of jax._src.dispatch.BACKEND_COMPILE_EVENT (JAX 0.10 / 0.11)
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

logger = logging.getLogger("cuzk_jax")

_lock = threading.Lock()
_hint_installed = False
_hint_logged = False
_progress_installed = False
_duration_registered = False
_progress_after = PROGRESS_AFTER_SECS
_watches: dict = {}  # thread id -> the _Watch of the compile running in that thread


def default_cache_dir() -> str:
    """``$CUZK_JAX_CACHE_DIR`` when set and non-empty, else ``~/.cache/cuzk_jax/xla`` (``~`` expanded)."""
    return os.path.expanduser(os.environ.get(ENV_VAR) or DEFAULT_DIR)


def compile_in_threads(jobs: dict, prefix: str, seconds: dict | None = None,
                       workers: int | None = None) -> dict:
    """Start each compile thunk of ``jobs`` (name -> callable) in a thread of a pool named ``prefix`` and return
    name -> future at once. XLA releases the GIL while it compiles, so the programs compile together while the
    caller goes on (e.g. keeps the device busy). ``workers``: the pool's threads (default one per job, so a long
    compile never queues a short one behind it). ``seconds``: filled with each job's wall seconds as it ends (a
    compile's own time when the job only compiles). The futures raise what their thunk raised."""
    if not jobs:
        return {}

    def timed(name, job):
        t0 = time.perf_counter()
        job()
        if seconds is not None:
            seconds[name] = round(time.perf_counter() - t0, 3)
            logger.info("%s: compiled %s in %.2fs", prefix, name, seconds[name])

    pool = concurrent.futures.ThreadPoolExecutor(max(1, workers or len(jobs)), thread_name_prefix=prefix)
    futures = {name: pool.submit(timed, name, job) for name, job in jobs.items()}
    pool.shutdown(wait=False)  # the threads end with their jobs; the caller awaits the futures it needs
    return futures


def enable_compile_cache(path: str | os.PathLike | None = None,
                         min_compile_time_secs: float = MIN_COMPILE_TIME_SECS) -> str:
    """Turn on JAX's persistent compilation cache for this process; returns the (absolute) cache directory.

    ``path``: the cache folder (``~`` expanded, created if missing); ``None``: :func:`default_cache_dir`.
    Programs compiling in at least ``min_compile_time_secs`` are stored. Idempotent: calling it again with the same
    folder changes nothing; a different folder switches the cache to it (JAX's cache state is reset so that the new
    folder is used even after earlier compiles). Also installs the compile progress
    (:func:`install_compile_progress`), so the scripts, which call this, announce long compiles.
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
    install_compile_progress()
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


def _on_duration(event: str, duration_secs: float, **kwargs) -> None:
    """jax.monitoring duration listener: ends the compile's progress, and the one-time hint for a long compile
    with no cache configured."""
    global _hint_logged
    if event != BACKEND_COMPILE_EVENT:
        return
    if _progress_installed:
        _end_watch(duration_secs, kwargs.get("fun_name"))
    if not _hint_installed or _hint_logged or duration_secs < HINT_AFTER_SECS:
        return
    if cache_configured():
        return
    _hint_logged = True
    logger.warning(
        "cuzk_jax: compiling %s took %.1f s and JAX's persistent compilation cache is off; call "
        "cuzk_jax.enable_compile_cache() (folder: $%s or %s) so the next process loads compiled programs from disk",
        kwargs.get("fun_name") or "an XLA program", duration_secs, ENV_VAR, DEFAULT_DIR)


def install_compile_hint() -> bool:
    """Register the long-compile hint listener once per process (cheap after the first call). Returns whether a
    listener is installed (False when this JAX has no ``jax.monitoring`` duration listeners)."""
    global _hint_installed
    if _hint_installed:
        return True
    with _lock:
        if _hint_installed:
            return True
        if not _register_duration():  # pragma: no cover
            return False
        _hint_installed = True
    install_compile_progress()
    return True


def _register_duration() -> bool:
    """Register :func:`_on_duration` once (callers hold ``_lock``); False when this JAX has no such listeners."""
    global _duration_registered
    if not _duration_registered:
        try:
            from jax import monitoring

            monitoring.register_event_duration_secs_listener(_on_duration)
        except (ImportError, AttributeError):  # pragma: no cover
            return False
        _duration_registered = True
    return True


# ---------------------------------------------------------------------------------------------------------------
# Compile progress
# ---------------------------------------------------------------------------------------------------------------


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced stderr
        return False


def _spinner(desc: str):
    """A tqdm spinner (no total: elapsed time only) on stderr, or None when stderr is not a terminal or tqdm is
    missing."""
    if not _stderr_is_terminal():
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency; the spinner is optional all the same
        return None
    return tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}", leave=False, file=sys.stderr)


class _Watch:
    """One running compile: announced after ``_progress_after`` seconds by a timer thread (or at once when that is
    0), then refreshed twice a second until :meth:`end`."""

    def __init__(self, name: str, start: float):
        self.name, self.start = name, start
        self.shown = False
        self.bar = None
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.thread = None

    def arm(self, after: float) -> None:
        if after <= 0:
            self._show()
            return
        self.thread = threading.Thread(target=self._wait, args=(after,), name="cuzk_jax-compile-progress",
                                       daemon=True)
        self.thread.start()

    def _wait(self, after: float) -> None:
        if self.done.wait(after):
            return
        self._show()
        while self.bar is not None and not self.done.wait(0.5):
            with self.lock:
                if self.bar is not None:
                    self.bar.refresh()

    def _show(self) -> None:
        with self.lock:
            if self.done.is_set():
                return
            self.shown = True
            logger.info("compiling %s (XLA) ...", self.name)
            self.bar = _spinner(f"compiling {self.name}")

    def end(self, duration: float) -> None:
        self.done.set()
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None
            if self.shown:
                logger.info("compiled %s in %.1f s", self.name, duration)


def _on_scalar(event: str, value: float, **kwargs) -> None:
    """jax.monitoring scalar listener: a backend compile starts (``value`` is its start time)."""
    if event != BACKEND_COMPILE_EVENT:
        return
    watch = _Watch(str(kwargs.get("fun_name") or "an XLA program"), time.time())
    with _lock:
        old = _watches.pop(threading.get_ident(), None)
        _watches[threading.get_ident()] = watch
    if old is not None:  # a start without an end (an exception in the compile): close it quietly
        old.done.set()
    watch.arm(_progress_after)


def _end_watch(duration: float, name: str | None) -> None:
    with _lock:
        watch = _watches.pop(threading.get_ident(), None)
    if watch is not None:
        watch.end(duration)
    elif duration >= _progress_after:  # no start event from this JAX: the end line alone
        logger.info("compiled %s in %.1f s", name or "an XLA program", duration)


def install_compile_progress(after_secs: float | None = None) -> bool:
    """Announce compiles that run longer than ``after_secs`` (default :data:`PROGRESS_AFTER_SECS`; 0: every
    compile, at its start) with log lines and, on a terminal, a tqdm spinner (module docstring). Registers the
    :mod:`jax.monitoring` listeners once per process; a later call only changes ``after_secs``. Returns whether
    the listeners are installed. Never called at import (:func:`install_compile_hint` calls it)."""
    global _progress_installed, _progress_after
    if after_secs is not None:
        if not isinstance(after_secs, (int, float)) or after_secs < 0:
            raise ValueError(f"after_secs must be a non-negative number, got {after_secs!r}")
        _progress_after = float(after_secs)
    if _progress_installed:
        return True
    with _lock:
        if _progress_installed:
            return True
        try:
            from jax import monitoring

            monitoring.register_scalar_listener(_on_scalar)
        except (ImportError, AttributeError):  # pragma: no cover
            return False
        if not _register_duration():  # pragma: no cover
            return False
        _progress_installed = True
    return True
