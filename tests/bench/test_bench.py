"""``autoprofiler bench`` on the session's real bench (``fixtures.py``): the tables, a rerun that
skips finished work, the same tables rebuilt from exported evaluations without evaluating
anything, ``learn`` and ``optimize`` replaying them, and one-line errors."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from autoprofiler.bench import BenchResult, budget_label
from autoprofiler.evaluate import EvalConfig, export_evaluations
from autoprofiler.learn import StudyStorage
from autoprofiler.store import Store

from .fixtures import RECORDINGS, REWRITER, ROOT, TEST, BenchRun, bench_args, invoke

H200 = "cuda:NVIDIA H200"
FIXED = ("none", "static", "SpeedOfLight", "basic", "detailed", "full", "curated24")


def tables(result: BenchResult) -> dict[str, list[tuple]]:
    """Each budget's rows as (name, fits, summary)."""
    return {
        budget_label(b.budget_s): [(r.name, r.fits, r.summary) for r in result.table(b)]
        for b in result.budgets
    }


def test_every_configuration_is_scored_on_the_test_problems_per_budget(
    bench_run: BenchRun,
) -> None:
    result = BenchResult.from_dict(bench_run.results_data())
    names = [result.names[h] for h in result.test]
    assert names == list(TEST) and len(result.train) == 2
    assert [b.budget_s for b in result.budgets] == [5.0, 20.0]
    rows = tables(result)
    for label, table in rows.items():
        assert [name for name, *_ in table] == [*FIXED, "learned"], label
        summaries = {name: summary for name, _, summary in table}
        # Only a profile with static.flops makes the gated rewriter return the reference.
        assert summaries["static"].geomean_speedup > 0.6 > 0.25 > summaries["none"].geomean_speedup
        assert summaries["learned"].geomean_speedup == summaries["static"].geomean_speedup
        assert all(s.correct_rate == 1.0 for s in summaries.values())
        assert all(s.vs_compile is not None for s in summaries.values())
        # Every group is recorded for these problems, ncu.set.detailed included.
        assert summaries["detailed"].incomplete == 0 and summaries["static"].incomplete == 0
        assert summaries["detailed"].mean_metrics > summaries["SpeedOfLight"].mean_metrics
    fits = {label: {name: fit for name, fit, _ in table} for label, table in rows.items()}
    # SpeedOfLight costs ncu's start-up (about 8.4 s on the H200) plus its own seconds.
    assert fits["5 s"]["SpeedOfLight"] is False and fits["20 s"]["SpeedOfLight"] is True
    for budget in result.budgets:
        assert "static" in json.dumps(budget.learned.tree["root"]["collect"])
        assert budget.train_score.value > budget.start_train_score.value
        assert any(t.accepted for t in budget.trials)
        assert len(budget.learned.score.outcomes) == 2
    assert {b.correct for b in result.compile_baselines.values()} == {True}
    assert (
        "over budget (up to" in bench_run.output
        and "torch.compile baselines run" in bench_run.output
    )
    with Store(bench_run.store) as store:
        assert StudyStorage(store).get("bench/budget=5") is not None
    # The rule for flagged candidates is recorded: this bench counts them (15_max_pool's
    # candidates run the reference's own op, flagged same_op_as_reference; on a loaded CPU the
    # wall-clock check may flag another, timing_contradicted: only a flag on the CPU).
    data = bench_run.results_data()
    assert data["count_flagged"] is True and data["spec"]["objective"]["count_flagged"] is True
    for budget in result.budgets:
        for row in result.table(budget):
            outcomes = row.config.score.outcomes
            assert sum("same_op_as_reference" in o.flagged for o in outcomes) == 1, row.config.name
            assert row.summary.flagged == sum(bool(o.flagged) for o in outcomes)
    assert "counted at their speedups" in " ".join(bench_run.output.split())


def test_without_count_flagged_flagged_candidates_count_as_failures(
    bench_run: BenchRun, tmp_path: Path
) -> None:
    store = Path(shutil.copy(bench_run.store, tmp_path / "store.sqlite"))
    strict = [a for a in bench_args(store, bench_run.problems) if a != "--count-flagged"]
    done = invoke(strict)
    assert done.exit_code == 2
    assert "bench 'bench' was run with a different objective" in " ".join(done.output.split())
    out = tmp_path / "strict.json"
    done = invoke([*strict, "--name", "strict", "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert "counted as failures" in " ".join(done.output.split())
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["count_flagged"] is False and "count_flagged" not in data["spec"]["objective"]
    counted = tables(BenchResult.from_dict(bench_run.results_data()))["5 s"]
    result = BenchResult.from_dict(data)
    for (name, _, summary), (_, _, before) in zip(tables(result)["5 s"][:-1], counted):
        config = next(c for c in result.fixed if c.name == name)
        # The flagged 15_max_pool counts 1.0x; 12_transpose_copy its own speedup, unless a
        # loaded CPU flagged its timing too (then it counts 1.0x as well).
        (other,) = [o for o in config.score.outcomes if "same_op_as_reference" not in o.flagged]
        plain = 1.0 if other.flagged else other.speedup
        assert summary.flagged == 1 + bool(other.flagged), name
        assert summary.correct_rate == before.correct_rate == 1.0
        assert summary.geomean_speedup == pytest.approx(math.sqrt(plain)), name
        assert summary.fast_1 == (0.5 if plain > 1 else 0.0), name


def test_a_rerun_skips_finished_work_and_adds_a_budget(bench_run: BenchRun, tmp_path: Path) -> None:
    store = Path(shutil.copy(bench_run.store, tmp_path / "store.sqlite"))
    done = invoke(bench_args(store, bench_run.problems, "--budgets", "5,inf"))
    assert done.exit_code == 0, done.output
    assert "0 rewrites and 0 evaluations run" in done.output
    assert "0 torch.compile baselines run" in done.output
    assert "budget unlimited" in done.output


def test_a_menu_benches_its_configurations_and_learns_on_it(
    bench_run: BenchRun, tmp_path: Path
) -> None:
    """With --menu the fixed rows are the menu's configurations (each showing its leaf), each
    study starts from the one best on the training problems, and the learned trees keep every
    leaf on the menu."""
    store = Path(shutil.copy(bench_run.store, tmp_path / "store.sqlite"))
    menu = ["--menu", "none,static,SpeedOfLight", "--routing", "static", "--name", "menu"]
    done = invoke(bench_args(store, bench_run.problems, *menu, "--json"))
    assert done.exit_code == 0, done.output
    result = BenchResult.from_dict(json.loads(done.stdout))
    assert [row.name for row in result.fixed] == ["none", "static", "SpeedOfLight"]
    assert all(row.tree["show"] == "leaf" for row in result.fixed)
    allowed = [[], ["static"], ["ncu.SpeedOfLight"]]
    for budget in result.budgets:
        assert budget.learned.tree["show"] == "leaf"
        with Store(store) as db:
            spec = StudyStorage(db).get(budget.study)
            trials = StudyStorage(db).trials(budget.study)
        assert spec.start_tree["show"] == "leaf"
        assert spec.start_tree["root"].get("collect", []) in allowed
        assert "menu=-;static;ncu.SpeedOfLight,routing=static" in spec.proposer
        # The menu's edits are valid ones: trees were scored, not refused as unknown groups.
        assert any(t.score is not None for t in trials), [t.reason for t in trials]
        leaves = _leaves(budget.learned.tree["root"])
        assert all(leaf.get("collect", []) in allowed for leaf in leaves)


def test_a_bench_with_a_batch_answered_proposer_writes_what_it_waits_for(
    bench_run: BenchRun, tmp_path: Path
) -> None:
    store = Path(shutil.copy(bench_run.store, tmp_path / "store.sqlite"))
    requests = tmp_path / "waiting.jsonl"
    extra = [
        "--name", "batch", "--budgets", "20", "--proposer", "llm",
        "--llm", "recorded:anthropic:frontier", "--requests-out", str(requests),
    ]  # fmt: skip
    done = invoke(bench_args(store, bench_run.problems, *extra))
    assert done.exit_code == 0, done.output
    assert "waiting for a reply to propose-round1" in " ".join(done.output.split())
    (line,) = [json.loads(x) for x in requests.read_text().splitlines()]
    assert line["custom_id"].startswith("batch_budget_20-propose-round1-")


def _leaves(node: dict) -> list[dict]:
    children = [node[b] for b in ("on_true", "on_false", "on_missing") if b in node]
    return [node] if not children else [leaf for c in children for leaf in _leaves(c)]


def test_no_cache_rewrites_and_evaluates_again(bench_run: BenchRun, tmp_path: Path) -> None:
    """A rerun reuses the stored rows, candidates and evaluations; with --no-cache it makes
    them again (the study's trials, records of what was tried, are kept)."""
    store = Path(shutil.copy(bench_run.store, tmp_path / "store.sqlite"))
    # one budget and one round of the session's bench (a later option overrides the earlier)
    args = bench_args(store, bench_run.problems, "--json", "--no-cache")
    done = invoke([*args, "--budgets", "5", "--iterations", "1"])
    assert done.exit_code == 0, done.output
    stats = json.loads(done.stdout)["stats"]
    assert stats["rewrites_run"] == stats["rewrites"] > 0
    assert stats["evaluations_run"] == stats["evaluations"] > 0
    assert stats["compile_baselines_run"] == len(TEST)


def test_cost_weights_learn_cheaper_trees_and_print_the_pareto_front(
    bench_run: BenchRun, tmp_path: Path
) -> None:
    store = Path(shutil.copy(bench_run.store, tmp_path / "store.sqlite"))
    out = tmp_path / "weighted.json"
    done = invoke(
        bench_args(store, bench_run.problems, "--cost-weights", "0,10000", "--output", str(out))
    )
    assert done.exit_code == 0, done.output
    result = BenchResult.from_dict(json.loads(out.read_text(encoding="utf-8")))
    by_weight = {(b.budget_s, b.cost_weight): b for b in result.budgets}
    assert sorted(by_weight, key=str) == sorted(
        [(5.0, 0.0), (5.0, 1e4), (20.0, 0.0), (20.0, 1e4)], key=str
    )
    # static costs milliseconds; at 10000 per second even those cost more than they buy.
    for budget_s in (5.0, 20.0):
        assert "static" in json.dumps(by_weight[(budget_s, 0.0)].learned.tree["root"]["collect"])
        assert by_weight[(budget_s, 1e4)].learned.tree["root"]["collect"] == []
        assert by_weight[(budget_s, 1e4)].study == f"bench/budget={budget_s:g}/cost_weight=10000"
    front = result.pareto_front()
    assert [b.learned.score.mean_cost_s > 0 for b in front] == [False, True]
    assert "Pareto front of the learned trees" in done.output
    assert "budget 5 s, cost weight 10000" in done.output


def test_exported_evaluations_rebuild_the_tables_without_evaluating(
    bench_run: BenchRun, tmp_path: Path
) -> None:
    exported = tmp_path / "evaluations.jsonl.gz"
    store = Path(shutil.copy(bench_run.store, tmp_path / "store.sqlite"))
    done = invoke(bench_args(store, bench_run.problems, "--export-evaluations", str(exported)))
    assert done.exit_code == 0 and f"evaluations on cpu to {exported}" in done.output
    replay = tmp_path / "replay.sqlite"
    home = tmp_path / "home"
    done = invoke(
        bench_args(
            replay,
            bench_run.problems,
            "--evaluations",
            str(exported),
            "-o",
            str(tmp_path / "r.json"),
        ),
        home,
    )
    assert done.exit_code == 0, done.output
    assert "evaluations replayed from cpu" in done.output
    assert "0 rewrites and 0 evaluations run" in done.output
    assert "0 torch.compile baselines run" in done.output
    assert not (home / "candidates").exists(), "a worker was started"
    original = BenchResult.from_dict(bench_run.results_data())
    rebuilt = BenchResult.from_dict(json.loads((tmp_path / "r.json").read_text()))
    assert tables(rebuilt) == tables(original)
    assert rebuilt.spec == original.spec


def relabel(exported: Path, relabelled: Path, label: str, config: EvalConfig) -> None:
    """``exported`` with its evaluations filed as a machine with device ``label`` files them
    under ``config`` (the CPU's verdicts stand in for a GPU's: this tests the lookup)."""
    with (
        gzip.open(exported, "rt", encoding="utf-8") as rows,
        gzip.open(relabelled, "wt", encoding="utf-8") as out,
    ):
        for line in rows:
            row = json.loads(line)
            if "evaluation" in row:
                row |= {"device": label, "config_hash": config.config_hash}
                row["result"]["device"] = label
            out.write(json.dumps(row) + "\n")


def test_a_gpu_bench_replays_on_this_machine_without_a_gpu(
    bench_run: BenchRun, tmp_path: Path
) -> None:
    exported, relabelled = tmp_path / "cpu.jsonl.gz", tmp_path / "h200.jsonl.gz"
    with Store(bench_run.store) as store:
        export_evaluations(store, exported, device="cpu")
    relabel(exported, relabelled, H200, EvalConfig(device="cuda"))
    args = bench_args(
        tmp_path / "replay.sqlite", bench_run.problems, "--evaluations", str(relabelled)
    )
    # --device cuda on a machine where torch cannot name a CUDA device
    done = invoke([*args, "--device", "cuda", "-o", str(tmp_path / "r.json")], tmp_path / "home")
    assert done.exit_code == 0, done.output
    assert f"evaluations replayed from {H200}" in done.output
    assert "0 evaluations run" in done.output
    original = BenchResult.from_dict(bench_run.results_data())
    rebuilt = BenchResult.from_dict(json.loads((tmp_path / "r.json").read_text()))
    assert tables(rebuilt) == tables(original)
    assert rebuilt.spec["evaluation"]["device"] == H200


def test_learn_and_optimize_replay_recorded_evaluations(
    bench_run: BenchRun, tmp_path: Path
) -> None:
    exported = tmp_path / "evaluations.jsonl.gz"
    with Store(bench_run.store) as store:
        export_evaluations(store, exported)
    learn = [
        "learn", "--store", str(tmp_path / "learn.sqlite"), "--study", "replayed",
        "--problems", str(bench_run.problems), "--recordings", str(RECORDINGS),
        "--evaluations", str(exported), "--train", "05_elementwise_chain,09_reduction",
        "--budget", "5", "--rewriter", REWRITER, "--iterations", "2", "--edits-per-round", "3",
        "--device", "cpu", "--count-flagged",
    ]  # fmt: skip
    done = invoke(learn, tmp_path / "home")
    assert done.exit_code == 0, done.output
    assert "0 evaluations run" in " ".join(done.output.split())
    with Store(tmp_path / "learn.sqlite") as store:
        trials = StudyStorage(store).trials("replayed")
    with Store(bench_run.store) as store:
        recorded = StudyStorage(store).trials("bench/budget=5")
    assert [(t.edit, t.state) for t in trials] == [(t.edit, t.state) for t in recorded]

    # The rule rewriter's candidate was never evaluated in the bench: not recorded, no worker.
    optimize = [
        "optimize", str(ROOT / "examples" / "problems" / "12_transpose_copy.py"), "--replay",
        "--profile-device", "H200", "--store", str(tmp_path / "learn.sqlite"), "--device", "cpu",
        "--evaluated-device", "cpu", "--candidates-dir", str(tmp_path / "candidates"),
        "-o", str(tmp_path / "optimized.json"),
    ]  # fmt: skip
    done = invoke(optimize, tmp_path / "home")
    assert done.exit_code == 0, done.output
    (row,) = json.loads((tmp_path / "optimized.json").read_text())
    assert row["result"]["failure_kind"] == "not_recorded"
    assert not (tmp_path / "home" / "candidates").exists(), "a worker was started"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--budgets", "5,x"], "bad budget 'x' in '5,x'"),
        (["--budgets", "-1"], "bad budget '-1'"),
        (["--test", "nothing_like_this"], "no problem named nothing_like_this"),
        (["--train", "1.5", "--test", ""], "a training fraction must be in (0, 1], not 1.5"),
        (["--train", "1.0", "--test", ""], "a training fraction must be in (0, 1), not 1.0"),
        (["--profile-device", "B200"], "no recordings of 'B200'"),
        (["--evaluations", "/no/such/file.jsonl.gz"], "/no/such/file.jsonl.gz: no such file"),
        (["--evaluated-device", "cuda:B200"], "no evaluations recorded on 'cuda:B200'"),
        (["--seed", "7"], "bench 'bench' was run with a different seed"),
        (["--device", "tpu"], "'--device': must be one of auto, cuda, cpu, not 'tpu'"),
    ],
)
def test_bad_input_is_one_error_line(bench_run: BenchRun, extra: list[str], message: str) -> None:
    done = invoke(bench_args(bench_run.store, bench_run.problems, *extra))
    assert done.exit_code == 2
    assert message in " ".join(done.output.split())


def test_without_recordings_or_problems_it_says_what_is_missing(tmp_path: Path) -> None:
    done = invoke(["bench", "--store", str(tmp_path / "s.sqlite"), "--replay"])
    assert done.exit_code == 2 and "the store holds no recorded profiles: pass --recordings" in (
        done.output
    )
    done = invoke(["bench", "--store", str(tmp_path / "s.sqlite")])
    assert done.exit_code == 2 and "--problems is needed" in done.output
