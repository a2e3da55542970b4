"""The SQLite store: problems, candidates, evaluations, baselines and recorded profiles.

Contract: every record is keyed by content hashes of what produced it, written once and never
changed (``INSERT OR IGNORE``), so a repeated question is answered from the store and a killed
run loses at most the record it was writing. The database runs in WAL mode; one process writes
(the driver), any number may read. Records are stored as JSON text beside their key columns.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autoprofiler.problem import Problem

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
OPEN_TIMEOUT_S = 30.0
SQLITE_MAGIC = b"SQLite format 3\x00"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS problems (
    hash TEXT PRIMARY KEY, name TEXT NOT NULL, level INTEGER, problem_id INTEGER,
    origin TEXT, source TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS candidates (
    hash TEXT PRIMARY KEY, problem_hash TEXT NOT NULL, producer TEXT NOT NULL,
    profile_hash TEXT, source TEXT NOT NULL, info TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS evaluations (
    key TEXT PRIMARY KEY, problem_hash TEXT NOT NULL, candidate_hash TEXT NOT NULL,
    device TEXT NOT NULL, config_hash TEXT NOT NULL, result TEXT NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now')));
CREATE INDEX IF NOT EXISTS evaluations_by_pair ON evaluations (problem_hash, candidate_hash);
CREATE TABLE IF NOT EXISTS baselines (
    key TEXT PRIMARY KEY, problem_hash TEXT NOT NULL, device TEXT NOT NULL,
    kind TEXT NOT NULL, result TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS profile_records (
    problem_hash TEXT NOT NULL, device TEXT NOT NULL, grp TEXT NOT NULL, profile TEXT NOT NULL,
    PRIMARY KEY (problem_hash, device, grp));
CREATE TABLE IF NOT EXISTS kv (
    space TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (space, key));
"""


def content_key(*parts: Any) -> str:
    """A stable 32-hex-digit key for any JSON-serialisable parts."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# The key-value space of the rewriter candidates the learner caches (carried by exports too).
CANDIDATE_SPACE = "learn.candidate"


def is_sqlite_file(path: str | Path) -> bool:
    """Whether ``path`` starts as an SQLite database does (raises ``OSError`` if unreadable)."""
    with Path(path).open("rb") as handle:
        return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


class StoreError(RuntimeError):
    """The store file cannot be opened or is not an autoprofiler store."""


class Store:
    """An autoprofiler SQLite store at ``path`` (``":memory:"`` for a throw-away one)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = self._connect()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable autoprofiler store: {exc}") from None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        """Open, switch to WAL, create the tables and check the schema stamp. Processes opening
        one new file at once can get "database is locked" from the switch to WAL (SQLite does
        not wait there): such an open is retried until ``OPEN_TIMEOUT_S``."""
        deadline = time.monotonic() + OPEN_TIMEOUT_S
        delay = 0.01
        while True:
            db = sqlite3.connect(self.path, timeout=OPEN_TIMEOUT_S, check_same_thread=False)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA)
                self._check_version(db)
                return db
            except sqlite3.OperationalError as exc:
                db.close()
                if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                    raise
            except BaseException:
                db.close()
                raise
            time.sleep(delay * random.uniform(1.0, 2.0))
            delay = min(delay * 2, 0.5)

    def _check_version(self, db: sqlite3.Connection) -> None:
        # A stamped store is only read. A new one is stamped with INSERT OR IGNORE and read
        # back, so that processes opening the same new file at once do not trip over each other.
        query = "SELECT value FROM meta WHERE key='schema_version'"
        row = db.execute(query).fetchone()
        if row is None:
            with db:
                db.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            row = db.execute(query).fetchone()
        if int(row[0]) != SCHEMA_VERSION:
            raise StoreError(f"{self.path}: store schema {row[0]} is not {SCHEMA_VERSION}")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, sql: str, params: tuple) -> None:
        with self._lock, self._db:
            self._db.execute(sql, params)

    def _one(self, sql: str, params: tuple) -> Any:
        with self._lock:
            row = self._db.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def integrity_ok(self) -> bool:
        """True when SQLite's integrity check passes."""
        return self._one("PRAGMA integrity_check", ()) == "ok"

    # problems -------------------------------------------------------------------------------
    def put_problem(self, problem: Problem) -> str:
        self._write(
            "INSERT OR IGNORE INTO problems VALUES (?,?,?,?,?,?)",
            (
                problem.content_hash,
                problem.name,
                problem.level,
                problem.problem_id,
                problem.origin,
                problem.source,
            ),
        )
        return problem.content_hash

    def get_problem(self, problem_hash: str) -> Problem | None:
        with self._lock:
            row = self._db.execute(
                "SELECT name, source, origin, level, problem_id FROM problems WHERE hash=?",
                (problem_hash,),
            ).fetchone()
        if row is None:
            return None
        return Problem(name=row[0], source=row[1], origin=row[2], level=row[3], problem_id=row[4])

    # candidates -----------------------------------------------------------------------------
    def put_candidate(
        self,
        candidate_hash: str,
        problem_hash: str,
        source: str,
        producer: str,
        profile_hash: str | None = None,
        info: dict | None = None,
    ) -> None:
        self._write(
            "INSERT OR IGNORE INTO candidates VALUES (?,?,?,?,?,?)",
            (
                candidate_hash,
                problem_hash,
                producer,
                profile_hash,
                source,
                json.dumps(info or {}, sort_keys=True),
            ),
        )

    def get_candidate_source(self, candidate_hash: str) -> str | None:
        return self._one("SELECT source FROM candidates WHERE hash=?", (candidate_hash,))

    def get_candidate(self, candidate_hash: str) -> dict | None:
        """The candidate row: ``problem_hash``, ``producer``, ``profile_hash``, ``source``,
        ``info``; None when unknown."""
        with self._lock:
            row = self._db.execute(
                "SELECT problem_hash, producer, profile_hash, source, info FROM candidates"
                " WHERE hash=?",
                (candidate_hash,),
            ).fetchone()
        if row is None:
            return None
        names = ("problem_hash", "producer", "profile_hash", "source")
        return {**dict(zip(names, row[:4])), "info": json.loads(row[4])}

    # evaluations ----------------------------------------------------------------------------
    def put_evaluation(
        self,
        key: str,
        problem_hash: str,
        candidate_hash: str,
        device: str,
        config_hash: str,
        result: dict,
    ) -> None:
        self._write(
            "INSERT OR REPLACE INTO evaluations (key, problem_hash, candidate_hash, device,"
            " config_hash, result) VALUES (?,?,?,?,?,?)",
            (key, problem_hash, candidate_hash, device, config_hash, json.dumps(result)),
        )

    def get_evaluation(self, key: str) -> dict | None:
        text = self._one("SELECT result FROM evaluations WHERE key=?", (key,))
        return None if text is None else json.loads(text)

    def find_evaluation(
        self, problem_hash: str, candidate_hash: str, device: str, config_hash: str
    ) -> dict | None:
        """The newest result for the pair on ``device`` under ``config_hash``, whatever the
        torch version that produced it (None when there is none)."""
        text = self._one(
            "SELECT result FROM evaluations WHERE problem_hash=? AND candidate_hash=?"
            " AND device=? AND config_hash=? ORDER BY created DESC, rowid DESC LIMIT 1",
            (problem_hash, candidate_hash, device, config_hash),
        )
        return None if text is None else json.loads(text)

    def iter_evaluations(self, device: str | None = None) -> Iterator[tuple]:
        """``(key, problem_hash, candidate_hash, device, config_hash, result)`` rows, oldest
        first (on ``device`` when given)."""
        yield from self._rows(
            "SELECT key, problem_hash, candidate_hash, device, config_hash, result"
            " FROM evaluations",
            device,
            "created, rowid",
        )

    def count(self, table: str) -> int:
        if table not in {"problems", "candidates", "evaluations", "baselines", "profile_records"}:
            raise ValueError(f"unknown table {table!r}")
        return int(self._one(f"SELECT COUNT(*) FROM {table}", ()))

    # baselines ------------------------------------------------------------------------------
    def put_baseline(self, key: str, problem_hash: str, device: str, kind: str, result: dict):
        self._write(
            "INSERT OR REPLACE INTO baselines VALUES (?,?,?,?,?)",
            (key, problem_hash, device, kind, json.dumps(result)),
        )

    def get_baseline(self, key: str) -> dict | None:
        text = self._one("SELECT result FROM baselines WHERE key=?", (key,))
        return None if text is None else json.loads(text)

    def iter_baselines(self, device: str | None = None) -> Iterator[tuple]:
        """``(key, problem_hash, device, kind, result)`` rows (on ``device`` when given)."""
        yield from self._rows(
            "SELECT key, problem_hash, device, kind, result FROM baselines", device, "key"
        )

    def _rows(self, select: str, device: str | None, order: str) -> Iterator[tuple]:
        """Rows of ``select`` (filtered by ``device``), the last column decoded from JSON."""
        sql, params = select, ()
        if device is not None:
            sql, params = f"{sql} WHERE device=?", (device,)
        with self._lock:
            rows = self._db.execute(f"{sql} ORDER BY {order}", params).fetchall()
        for *columns, text in rows:
            yield (*columns, json.loads(text))

    # recorded profiles ----------------------------------------------------------------------
    def put_profile_record(self, problem_hash: str, device: str, group: str, profile: dict):
        """Record one group's real profile of one problem on one device (kept if present)."""
        self._write(
            "INSERT OR IGNORE INTO profile_records VALUES (?,?,?,?)",
            (problem_hash, device, group, json.dumps(profile, sort_keys=True)),
        )

    def get_profile_records(self, problem_hash: str, device: str | None = None) -> dict:
        """``{group: profile dict}`` recorded for a problem (on ``device`` when given)."""
        sql = "SELECT grp, profile FROM profile_records WHERE problem_hash=?"
        params: tuple = (problem_hash,)
        if device is not None:
            sql += " AND device=?"
            params += (device,)
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        return {group: json.loads(text) for group, text in rows}

    def has_profile_record(self, problem_hash: str, device: str, group: str) -> bool:
        return (
            self._one(
                "SELECT 1 FROM profile_records WHERE problem_hash=? AND device=? AND grp=?",
                (problem_hash, device, group),
            )
            is not None
        )

    def iter_profile_records(self) -> Iterator[tuple[str, str, str, dict]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT problem_hash, device, grp, profile FROM profile_records"
                " ORDER BY problem_hash, device, grp"
            ).fetchall()
        for problem_hash, device, group, text in rows:
            yield problem_hash, device, group, json.loads(text)

    # generic content-keyed cache (LLM replies, rewriter candidates, ...) --------------------
    def put(self, space: str, key: str, value: Any) -> None:
        self._write("INSERT OR REPLACE INTO kv VALUES (?,?,?)", (space, key, json.dumps(value)))

    def get(self, space: str, key: str) -> Any | None:
        text = self._one("SELECT value FROM kv WHERE space=? AND key=?", (space, key))
        return None if text is None else json.loads(text)

    def iter_space(self, space: str) -> Iterator[tuple[str, Any]]:
        """``(key, value)`` of every entry of a key-value space, in key order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT key, value FROM kv WHERE space=? ORDER BY key", (space,)
            ).fetchall()
        for key, text in rows:
            yield key, json.loads(text)
