"""``autoprofiler learn``: killed with SIGKILL mid-study and resumed, in subprocesses; and its
one-line errors."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import Result
from rich.console import Console
from typer.testing import CliRunner

from autoprofiler.cli import progress
from autoprofiler.cli.main import app
from autoprofiler.learn import LearnConfig, LocalSearchProposer, StudyStorage, TreeLearner
from autoprofiler.problem import Problem
from autoprofiler.store import Store

from .conftest import RECORDINGS, ROOT, TRAIN, make_scorer
from .gated_rewriter import GatedRewriter

RUN = "from autoprofiler.cli.main import app; app()"
KILL_LIMIT_S = 90.0


def learn_args(store: Path, problems: Path, study: str) -> list[str]:
    """``autoprofiler learn`` with these arguments: a study of the gated rewriter."""
    return [
        "learn", "--store", str(store), "--study", study, "--problems", str(problems),
        "--recordings", str(RECORDINGS), "--train", "2", "--budget", "20",
        "--rewriter", "tests.learn.gated_rewriter:slow_to_rewrite", "--proposer", "search",
        "--iterations", "3", "--patience", "3", "--edits-per-round", "3", "--device", "cpu",
        "--seed", "0", "--count-flagged",  # the gated rewriter's candidates are flagged
    ]  # fmt: skip


def write_jsonl(path: Path, problems: list[Problem]) -> Path:
    rows = [{"name": p.name, "source": p.source} for p in problems]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def trial_count(store_path: Path, study: str) -> int:
    with Store(store_path) as store:
        return len(StudyStorage(store).trials(study))


def test_a_study_killed_with_sigkill_resumes_without_losing_or_repeating_a_trial(
    store_path: Path, train: list[Problem], tmp_path: Path
) -> None:
    problems = write_jsonl(tmp_path / "problems.jsonl", train)
    args = learn_args(store_path, problems, "sigkill")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    command = [sys.executable, "-c", RUN, *args]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + KILL_LIMIT_S
    while trial_count(store_path, "sigkill") < 1:
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        assert time.monotonic() < deadline, "no trial was stored in time"
        time.sleep(0.05)
    assert process.poll() is None, "the study ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed = trial_count(store_path, "sigkill")

    done = subprocess.run(
        [*command, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "learned tree:" in done.stdout and "cache hit rate" in done.stdout

    with Store(store_path) as store:
        assert store.integrity_ok()
        trials = StudyStorage(store).trials("sigkill")
        # The same study run without a kill (its candidates are cached now) takes the same path.
        proposer = LocalSearchProposer(edits_per_round=3)
        scorer = make_scorer(store, GatedRewriter(delay_s=0.5))
        learner = TreeLearner(scorer, proposer, LearnConfig(iterations=3, patience=3, seed=0))
        whole = learner.learn("sigkill-whole", sorted(train, key=lambda p: p.key))
    assert len(trials) > killed >= 1
    assert [t.number for t in trials] == list(range(len(trials)))
    assert len({(t.round, t.index) for t in trials}) == len(trials)
    path = [(t.round, t.index, t.edit, t.state) for t in trials]
    assert path == [(t.round, t.index, t.edit, t.state) for t in whole.trials]


def learn(*args: str) -> Result:
    """``autoprofiler learn ARGS`` in this process."""
    return CliRunner().invoke(app, ["learn", *args])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rewriter", "tests.learn.gated_rewriter:GATE_METRIC"], "gives a str, not a Rewriter"),
        (["--rewriter", "no_such_module:Rewriter"], "cannot import"),
        (["--train", "nothing_like_this"], "no problem named nothing_like_this"),
        (["--device", "tpu"], "'--device': must be one of auto, cuda, cpu, not 'tpu'"),
        (["--proposer", "llm"], "--proposer llm needs --llm"),
        (["--profile-device", "B200"], "no recordings of 'B200'"),
        (["--levels", "7"], "no problems with recordings on H200 with --levels 7"),
        (["--menu", "none,none"], "a menu needs at least two different configurations"),
        (["--menu", "none,NoSuchGroup"], "'NoSuchGroup' is neither a fixed tree name"),
        (["--menu", "none,static", "--routing", "ncu.Nope"], "unknown metric group 'ncu.Nope'"),
    ],
)
def test_bad_options_give_one_error_line(store_path: Path, extra: list[str], message: str) -> None:
    args = ["--store", str(store_path), "--study", "errors"]
    args += [] if "--levels" in extra else ["--train", ",".join(TRAIN)]
    result = learn(*args, *extra, "-q")
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_heavy_cost_weight_learns_a_tree_that_profiles_nothing(
    store_path: Path, train: list[Problem], tmp_path: Path
) -> None:
    """The gated rewriter needs static's milliseconds of profiling to do well; at 10000 per
    second of profiling those cost more than they buy, and the study keeps the empty tree."""
    problems = write_jsonl(tmp_path / "problems.jsonl", train)
    out = tmp_path / "tree.json"
    args = learn_args(store_path, problems, "weighted")
    args[args.index("--rewriter") + 1] = "tests.learn.gated_rewriter:GatedRewriter"
    result = CliRunner().invoke(app, [*args, "--cost-weight", "10000", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text(encoding="utf-8"))["root"]["collect"] == []
    assert "exp(-10000/s)" in " ".join(result.output.split())


def test_count_flagged_reaches_the_studys_objective(
    store_path: Path, train: list[Problem], tmp_path: Path
) -> None:
    """Every candidate of the gated rewriter is flagged (``same_op_as_reference``) on these
    problems: by default they count as failures (1.0x, where the start tree's slow candidates
    are far slower), and the summary says how many were flagged."""
    problems = write_jsonl(tmp_path / "problems.jsonl", train)
    args = learn_args(store_path, problems, "")
    args[args.index("--rewriter") + 1] = "tests.learn.gated_rewriter:GatedRewriter"
    args[args.index("--iterations") + 1] = "0"
    args.remove("--count-flagged")
    geomeans = {"strict": r"1\.000x", "counted": r"0\.\d+x"}
    for study, extra in (("strict", []), ("counted", ["--count-flagged"])):
        args[args.index("--study") + 1] = study
        result = CliRunner().invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        assert re.search(r"flagged\W+2\W+2\W", result.output), result.output
        assert re.search(rf"geomean speedup\s+│\s+{geomeans[study]}", result.output), result.output
    with Store(store_path) as store:
        strict, counted = (StudyStorage(store).get(name) for name in ("strict", "counted"))
    assert strict is not None and "count_flagged" not in strict.objective
    assert counted is not None and counted.objective["count_flagged"] is True


def test_no_cache_evaluates_again_what_the_store_holds(
    store_path: Path, train: list[Problem], tmp_path: Path
) -> None:
    """A second study over the same problems finds every candidate and evaluation in the
    store; with --no-cache it rewrites and evaluates them again."""
    problems = write_jsonl(tmp_path / "problems.jsonl", train)
    args = learn_args(store_path, problems, "")
    args[args.index("--iterations") + 1] = "0"

    def summary(study: str, *extra: str) -> str:
        args[args.index("--study") + 1] = study
        result = CliRunner().invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        return " ".join(result.stdout.split())

    summary("cached-first")
    assert "cache hit rate 100% (0 rewrites and 0 evaluations run)" in summary("cached-again")
    fresh = summary("fresh", "--no-cache")
    assert re.search(r"cache hit rate 0% \([1-9]\d* rewrites and [1-9]\d* evaluations run\)", fresh)


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
def test_the_rounds_shown_are_the_rounds_run_when_patience_stops_it(
    store_path: Path,
    train: list[Problem],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    terminal: bool,
) -> None:
    """Patience stops the study before --iterations: the progress says how many rounds ran
    (the bar stops there, not at the most asked), and each trial has its line when piped."""
    screen = io.StringIO()
    if terminal:
        console = Console(file=screen, force_terminal=True, width=200)
        monkeypatch.setattr(progress, "messages", lambda: console)
    study = f"patience-{terminal}"
    args = learn_args(store_path, write_jsonl(tmp_path / "problems.jsonl", train), study)
    args[args.index("--rewriter") + 1] = "tests.learn.gated_rewriter:GatedRewriter"
    args[args.index("--iterations") + 1] = "6"
    args[args.index("--patience") + 1] = "1"
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    with Store(store_path) as store:
        trials = StudyStorage(store).trials(study)
    rounds = len({t.round for t in trials})
    assert 1 <= rounds < 6
    shown = screen.getvalue() if terminal else result.stderr
    assert f"stopped after {rounds} of 6 rounds: no improvement for 1 rounds" in shown
    assert f"trials in {rounds} rounds" in result.stdout
    if terminal:
        assert f"{rounds}/6" in shown and "6/6" not in shown
    else:
        lines = [
            line for line in shown.splitlines() if re.match(rf"{study}: learn round \d/6 ", line)
        ]
        assert len(lines) == len(trials), shown
