"""The daemon's job journal: one SQLite table in WAL mode (stdlib :mod:`sqlite3`).

Invariants (what the service relies on):

* **Recorded before accepted.** :meth:`Journal.accept` commits the job (``synchronous=FULL``: on disk, not just in
  the OS cache) before it returns, and the service answers Submit only after that -- a job a client was told about
  survives ``kill -9`` and is resumed at the next start (:meth:`Journal.pending`).
* **One job per client job id.** The job id is the primary key; accepting an id again returns the existing row
  (``existing=True``) and queues nothing. The request's digest is stored, so the same id with a different request
  is detected (the service refuses it).
* **One result per job.** A job leaves ``queued`` once (:meth:`Journal.finish` updates only a queued row, in one
  transaction, and counts ``completions``), so its proof is made and stored once; every later read returns the
  same bytes. ``done_seq`` numbers completions in order. ``attempts`` counts hand-overs to an engine (1, plus one
  per restart that found the job queued).

States: ``queued`` (accepted, not finished: in the engine, or waiting for a restart), ``done`` (proof stored),
``failed`` (error and cause stored), ``cancelled``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import threading
import time

STATES = ("queued", "done", "failed", "cancelled")
TERMINAL = ("done", "failed", "cancelled")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    request_digest TEXT NOT NULL,
    circuit TEXT NOT NULL,
    preset TEXT NOT NULL,
    priority TEXT NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    finished_at REAL,
    proof BLOB,
    public_inputs TEXT,
    error TEXT,
    cause TEXT,
    done_seq INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    completions INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, submitted_at);
"""


@dataclasses.dataclass
class JobRow:
    """One journal row; ``spec`` is the JSON job description (``{"inputs": [...]}`` or ``{"sample": [seed, n]}``)
    and ``public_inputs`` a JSON list (per partition) of lists of decimal strings."""

    job_id: str
    request_digest: str
    circuit: str
    preset: str
    priority: str
    spec: str
    state: str
    submitted_at: float
    finished_at: float | None = None
    proof: bytes | None = None
    public_inputs: str | None = None
    error: str | None = None
    cause: str | None = None
    done_seq: int | None = None
    attempts: int = 0
    completions: int = 0


_COLUMNS = [f.name for f in dataclasses.fields(JobRow)]


class Journal:
    """The job journal at ``path`` (created if absent). Thread-safe: one connection, one lock."""

    def __init__(self, path: str):
        self.path = path
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._lock = threading.Lock()
        with self._lock:
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if path != ":memory:" and mode.lower() != "wal":
                raise RuntimeError(f"journal {path}: SQLite refused WAL mode (got {mode})")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _row(self, values) -> JobRow | None:
        return None if values is None else JobRow(**dict(zip(_COLUMNS, values)))

    # -- writes ----------------------------------------------------------------------------------------------------
    def accept(self, row: JobRow) -> tuple[JobRow, bool]:
        """Record ``row`` (state ``queued``, ``attempts`` 1) unless its job id exists: ``(the stored row, existed)``.
        Committed to disk before returning."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                old = self._row(self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE job_id = ?",
                                                 (row.job_id,)).fetchone())
                if old is None:
                    row = dataclasses.replace(row, state="queued", attempts=1, completions=0)
                    values = dataclasses.astuple(row)
                    self._db.execute(f"INSERT INTO jobs ({', '.join(_COLUMNS)}) VALUES "
                                     f"({', '.join('?' * len(_COLUMNS))})", values)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return (old, True) if old is not None else (row, False)

    def attempt(self, job_id: str) -> None:
        """Count one more hand-over of a queued job to an engine (a restart resuming it)."""
        with self._lock:
            self._db.execute("UPDATE jobs SET attempts = attempts + 1 WHERE job_id = ?", (job_id,))

    def finish(self, job_id: str, state: str, *, proof: bytes | None = None, public_inputs: list | None = None,
               error: str | None = None, cause: str | None = None) -> bool:
        """Move a queued job to ``state`` (done / failed / cancelled) with its result; False (nothing written) if it
        was not queued -- a job finishes once."""
        if state not in TERMINAL:
            raise ValueError(f"finish: state must be one of {TERMINAL}, got {state!r}")
        publics = None if public_inputs is None else json.dumps(public_inputs)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                seq = None
                if state == "done":
                    seq = self._db.execute("SELECT COALESCE(MAX(done_seq), 0) + 1 FROM jobs").fetchone()[0]
                cur = self._db.execute(
                    "UPDATE jobs SET state = ?, finished_at = ?, proof = ?, public_inputs = ?, error = ?, cause = ?, "
                    "done_seq = ?, completions = completions + 1 WHERE job_id = ? AND state = 'queued'",
                    (state, time.time(), proof, publics, error, cause, seq, job_id))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return cur.rowcount == 1

    # -- reads -----------------------------------------------------------------------------------------------------
    def get(self, job_id: str) -> JobRow | None:
        with self._lock:
            return self._row(self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE job_id = ?",
                                              (job_id,)).fetchone())

    def pending(self) -> list[JobRow]:
        """The queued jobs, oldest first (what a restart resumes)."""
        with self._lock:
            rows = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE state = 'queued' "
                                    f"ORDER BY submitted_at, job_id").fetchall()
        return [self._row(r) for r in rows]

    def counts(self) -> dict[str, int]:
        """``{state: number of jobs}`` for every state, and ``last_done_seq`` (the latest completion's number)."""
        with self._lock:
            got = dict(self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
            last = self._db.execute("SELECT COALESCE(MAX(done_seq), 0) FROM jobs").fetchone()[0]
        return {**{s: got.get(s, 0) for s in STATES}, "last_done_seq": last}
