"""Recorded evaluations through a real store: exported, imported, and replayed without a worker
(whatever the local torch version or GPU), or a one-line ``not_recorded`` failure."""

from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from autoprofiler.evaluate import (
    EvalConfig,
    EvaluationsFileError,
    FailureKind,
    evaluate,
    evaluation_device,
    export_evaluations,
    import_evaluations,
)
from autoprofiler.evaluate.baselines import reference_as_candidate
from autoprofiler.evaluate.runner import evaluation_key
from autoprofiler.llm.cache import LLM_SPACE
from autoprofiler.problem import Problem, problem_from_source, source_hash
from autoprofiler.store import CANDIDATE_SPACE, Store
from tests.conftest import SCALE_PROBLEM

FAST = EvalConfig(
    device="cpu", correctness_trials=2, timing_budget_ms=10, warmup_ms=1, min_timing_trials=3
)
H200 = "cuda:NVIDIA H200"
RECORDINGS = Path(__file__).resolve().parents[1] / "data" / "recordings" / "examples_h200.jsonl.gz"


@pytest.fixture(scope="module")
def problem() -> Problem:
    return problem_from_source(SCALE_PROBLEM, "scale", "<test>")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, problem: Problem) -> Path:
    """A store with one real CPU evaluation, the same result as an H200 machine would file it
    (its label, under ``device="auto"``), and an entry in each cache an export carries."""
    folder = tmp_path_factory.mktemp("recorded")
    path = folder / "store.sqlite"
    source = reference_as_candidate(problem)
    with Store(path) as store:
        result = evaluate(problem, source, FAST, store=store, work_root=folder / "home")
        assert result.correct, result.failure_message
        gpu = replace(FAST, device="auto")
        row = result.to_dict() | {"device": H200, "torch_version": "2.11.0+cu130"}
        key = f"{H200}/{gpu.config_hash}"
        store.put_evaluation(
            key, problem.content_hash, source_hash(source), H200, gpu.config_hash, row
        )
        store.put(CANDIDATE_SPACE, "k1", {"source": source, "producer": "rules"})
        store.put(LLM_SPACE, "k2", {"text": "a reply"})
    return path


def test_export_and_import_carry_problems_candidates_evaluations_and_caches(
    recorded: Path, problem: Problem, tmp_path: Path
) -> None:
    everything, cpu_only = tmp_path / "all.jsonl.gz", tmp_path / "cpu.jsonl.gz"
    with Store(recorded) as store:
        assert export_evaluations(store, everything) == 2
        assert export_evaluations(store, cpu_only, device="cpu") == 1
    with Store(tmp_path / "b.sqlite") as store:
        imported = import_evaluations(everything, store)
        assert (imported.evaluations, imported.baselines, imported.cached) == (2, 1, 2)
        assert sorted(imported.devices) == ["cpu", H200]
        assert store.get_problem(problem.content_hash) == problem
        assert store.get_candidate_source(source_hash(reference_as_candidate(problem)))
        assert store.get(LLM_SPACE, "k2") == {"text": "a reply"}
        assert store.get(CANDIDATE_SPACE, "k1")["producer"] == "rules"
    with Store(tmp_path / "c.sqlite") as store:
        assert import_evaluations(cpu_only, store).devices == ("cpu",)
        assert [row[3] for row in store.iter_evaluations()] == ["cpu"]


def test_export_latest_only_leaves_out_superseded_evaluations(
    recorded: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "store.sqlite"
    shutil.copy(recorded, copy)
    with Store(copy) as store:
        key, problem_hash, candidate, device, config, result = next(store.iter_evaluations("cpu"))
        newer = result | {"torch_version": "9.9.9"}
        store.put_evaluation(key + "/again", problem_hash, candidate, device, config, newer)
        assert export_evaluations(store, tmp_path / "all.jsonl.gz") == 3
        assert export_evaluations(store, tmp_path / "latest.jsonl.gz", latest_only=True) == 2
    with Store(tmp_path / "b.sqlite") as store:
        import_evaluations(tmp_path / "latest.jsonl.gz", store)
        versions = {row[5]["torch_version"] for row in store.iter_evaluations("cpu")}
        assert versions == {"9.9.9"}


def test_an_export_cut_short_leaves_the_previous_one_whole(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot killed while exporting must not truncate the export a later slot resumes from."""
    export = tmp_path / "evals.jsonl.gz"
    with Store(recorded) as store:
        assert export_evaluations(store, export) == 2
        before = export.read_bytes()

        def cut(*args: object) -> None:
            raise KeyboardInterrupt  # as a kill in the middle of writing would leave it

        monkeypatch.setattr(store, "iter_baselines", cut)
        with pytest.raises(KeyboardInterrupt):
            export_evaluations(store, export)
    assert export.read_bytes() == before
    assert [path.name for path in tmp_path.iterdir()] == [export.name]  # no partial file left
    with Store(tmp_path / "b.sqlite") as store:
        assert import_evaluations(export, store).evaluations == 2


def test_replay_returns_the_recorded_result_whatever_the_torch_version(
    recorded: Path, problem: Problem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = reference_as_candidate(problem)
    monkeypatch.setattr(torch, "__version__", "9.9.9+elsewhere")
    replayed = replace(FAST, replay_device="cpu")
    assert replayed.config_hash == FAST.config_hash
    with Store(recorded) as store:
        # The ordinary cache is keyed by the torch version: it would evaluate again.
        assert store.get_evaluation(evaluation_key(problem, source_hash(source), FAST)) is None
        before = store.count("evaluations")
        result = evaluate(problem, source, replayed, store=store)
        assert store.count("evaluations") == before
    assert result.correct and result.from_cache and result.device == "cpu"
    assert result.speedup is not None and result.torch_version != torch.__version__
    assert not (tmp_path / "home" / "candidates").exists(), "a worker was started"


def test_a_gpu_recording_replays_on_a_machine_without_a_gpu(
    recorded: Path, problem: Problem
) -> None:
    # Recorded with device "auto" on the H200; replayed asking for "cuda" on this CPU machine,
    # where asking torch for the CUDA device's name would raise.
    config = replace(FAST, device="cuda", replay_device=H200)
    assert evaluation_device(config) == H200
    with Store(recorded) as store:
        result = evaluate(problem, reference_as_candidate(problem), config, store=store)
    assert result.correct and result.from_cache
    assert (result.device, result.torch_version) == (H200, "2.11.0+cu130")


def test_an_evaluation_not_recorded_is_a_one_line_failure(recorded: Path, problem: Problem) -> None:
    other = reference_as_candidate(problem) + "\n# another candidate\n"
    config = replace(FAST, replay_device=H200)
    with Store(recorded) as store:
        before = store.count("evaluations")
        result = evaluate(problem, other, config, store=store)
        assert store.count("evaluations") == before
        wrong_config = replace(config, correctness_trials=9)
        assert (
            evaluate(
                problem, reference_as_candidate(problem), wrong_config, store=store
            ).failure_kind
            is FailureKind.NOT_RECORDED
        )
    assert result.failure_kind is FailureKind.NOT_RECORDED and not result.correct
    assert source_hash(other) in result.failure_message and H200 in result.failure_message
    assert "\n" not in result.failure_message
    assert evaluate(problem, other, config).failure_kind is FailureKind.NOT_RECORDED


def test_a_file_that_is_not_an_evaluations_export_is_one_error_line(tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl.gz"
    plain.write_text("not gzip", encoding="utf-8")
    truncated = tmp_path / "truncated.jsonl.gz"
    with gzip.open(truncated, "wt", encoding="utf-8") as out:
        out.write(json.dumps({"kind": "autoprofiler.evaluations", "version": 1}) + "\n")
        out.write('{"evaluation": "k", "problem_hash"\n')
    with Store(tmp_path / "s.sqlite") as store:
        for path, words in (
            (RECORDINGS, "not an autoprofiler evaluations file"),
            (plain, "cannot read recorded evaluations"),
            (truncated, "cannot read recorded evaluations"),
            (tmp_path / "missing.jsonl.gz", "cannot read recorded evaluations"),
        ):
            with pytest.raises(EvaluationsFileError, match=words) as caught:
                import_evaluations(path, store)
            assert "\n" not in str(caught.value)
