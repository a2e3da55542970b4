"""The SQLite store: round trips, write-once records, a bad file, many openers of a new one."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from autoprofiler.store import Store, StoreError, content_key


def test_round_trips_and_survives_reopen(tmp_path: Path, scale_problem):
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.put_problem(scale_problem)
        store.put_candidate("c1", scale_problem.content_hash, "src", "rules", "p1", {"why": "x"})
        store.put_evaluation(
            "k1", scale_problem.content_hash, "c1", "cpu", "cfg", {"correct": True}
        )
        store.put_profile_record(scale_problem.content_hash, "cpu", "static", {"cost_s": 0.1})
        store.put_profile_record(scale_problem.content_hash, "cpu", "static", {"cost_s": 9.9})
        store.put("llm", "key", {"reply": "hi"})
    with Store(path) as store:
        assert store.get_problem(scale_problem.content_hash) == scale_problem
        assert store.get_candidate_source("c1") == "src"
        assert store.get_evaluation("k1") == {"correct": True}
        assert store.get_profile_records(scale_problem.content_hash) == {"static": {"cost_s": 0.1}}
        assert store.has_profile_record(scale_problem.content_hash, "cpu", "static")
        assert not store.has_profile_record(scale_problem.content_hash, "cuda", "static")
        assert store.get("llm", "key") == {"reply": "hi"} and store.get("llm", "other") is None
        assert store.integrity_ok()
        assert store.count("problems") == 1


def test_wal_mode(tmp_path: Path):
    with Store(tmp_path / "s.sqlite") as store:
        assert store._one("PRAGMA journal_mode", ()) == "wal"


def test_not_a_store(tmp_path: Path):
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="not a usable autoprofiler store"):
        Store(path)


def test_content_key_is_stable_and_order_sensitive():
    assert content_key("a", 1, {"x": 1, "y": 2}) == content_key("a", 1, {"y": 2, "x": 1})
    assert content_key("a", "b") != content_key("b", "a")


def _open_after(barrier, path: str, errors) -> None:
    barrier.wait()
    try:
        Store(path).close()
    except StoreError as exc:
        errors.put(str(exc))


def test_processes_opening_one_new_store_at_once_all_succeed(tmp_path: Path):
    """Processes may open a store that does not exist yet at the same moment: SQLite answers
    "database is locked" to the switch to WAL without waiting, and both may stamp the schema."""
    context = multiprocessing.get_context("spawn")
    processes = 10
    for attempt in range(5):
        path = str(tmp_path / f"fresh-{attempt}.sqlite")
        barrier, errors = context.Barrier(processes), context.Queue()
        started = [
            context.Process(target=_open_after, args=(barrier, path, errors))
            for _ in range(processes)
        ]
        for process in started:
            process.start()
        for process in started:
            process.join(60)
        assert all(p.exitcode == 0 for p in started)
        assert errors.empty(), errors.get()
        with Store(path) as store:
            assert store.integrity_ok()
