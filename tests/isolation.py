"""Run a test in a fresh Python process (``@isolated``).

XLA:CPU (jaxlib 0.10.2) crashed with a segfault three times while compiling the NTT's interpreted Pallas pass
programs late in a full test run -- once inside the compile itself, twice while serializing the result for the
persistent cache -- although the same tests pass alone every time. A crash there would end the whole suite, so
those tests run in a child pytest process: the test still runs and must pass, and a crash fails only that test,
with the child's output in the report.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MARK = "CUZK_TEST_ISOLATED"


def isolated(fn):
    """Decorator: in the parent run, re-run this test node in a child ``pytest`` and require it to pass; in the
    child, run the test body."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if os.environ.get(_MARK):
            return fn(*args, **kwargs)
        node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
        env = dict(os.environ, **{_MARK: "1"})
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", node],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
        assert run.returncode == 0, f"{node} failed in its own process (exit {run.returncode}):\n" \
                                    f"{run.stdout[-4000:]}\n{run.stderr[-3000:]}"
        assert " passed" in run.stdout, run.stdout[-2000:]  # the node ran (not deselected, not skipped)

    return wrapper
