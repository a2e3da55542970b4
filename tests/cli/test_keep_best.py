"""``optimize --keep best`` end to end on committed H200 data, replayed on a CPU: the recorded
LLM reply, the rule rewriter's pick and torch.compile are judged from recorded verdicts, the
reference counts 1.0x, and the fastest that counts is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autoprofiler.cli.main import app
from autoprofiler.profile import import_recordings
from autoprofiler.store import Store

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "results" / "data"
EXAMPLES = REPO / "examples" / "problems"
RECORDINGS = DATA / "kernelbench_h200.jsonl.gz"
EVALUATIONS = [DATA / "llm_evaluations.jsonl.gz", DATA / "kernelbench_h200_evaluations.jsonl.gz"]
DEPTHWISE = "84_conv_depthwise_2D_asymmetric_input_square_kernel"
runner = CliRunner()


@pytest.fixture(scope="module")
def problems(tmp_path_factory) -> Path:
    """L1/84 as a KernelBench row, from the recordings (which hold each problem's source)."""
    path = tmp_path_factory.mktemp("kb") / "problems.jsonl"
    with Store(":memory:") as store:
        import_recordings(RECORDINGS, store)
        hashes = {h for h, *_ in store.iter_profile_records()}
        found = [p for h in hashes if (p := store.get_problem(h)) and p.name == DEPTHWISE]
    row = {"level": 1, "problem_id": 84, "name": DEPTHWISE, "source": found[0].source}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


def _optimize(problems: Path, folder: Path, *extra: str) -> tuple[dict, str]:
    out = folder / "rows.json"
    args = [
        "optimize", str(problems), "--replay", "--recordings", str(RECORDINGS),
        "--rewriter", "llm", "--llm", "recorded:anthropic:claude", "--tree", "SpeedOfLight",
        "--device", "cuda", "--profile-device", "H200", "--store", str(folder / "s.sqlite"),
        "--evaluated-device", "cuda:NVIDIA H200",  # the first verdicts, beside the rebuild's
        "--candidates-dir", str(folder / "written"), "--json", "-o", str(out), *extra,
    ]  # fmt: skip
    for path in EVALUATIONS:
        args += ["--evaluations", str(path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text(encoding="utf-8"))
    return row, (folder / "written" / f"{DEPTHWISE}.py").read_text(encoding="utf-8")


def test_keep_best_writes_the_fastest_that_counts(problems: Path, tmp_path: Path) -> None:
    row, written = _optimize(problems, tmp_path / "default")
    kept = row["kept"]
    by = {c["by"]: c for c in kept["contenders"]}
    assert set(by) >= {"llm", "compile", "reference"}
    assert row["result"]["correct"] and by["llm"]["counted"] is None  # flagged: not counted
    assert kept["by"] == "compile" and kept["speedup"] == pytest.approx(1.3195, abs=1e-3)
    assert "torch.compile" in written and "class ModelNew" in written
    asked, asked_written = _optimize(problems, tmp_path / "flagged", "--count-flagged")
    assert asked["kept"]["by"] == "llm"
    assert asked["kept"]["speedup"] == pytest.approx(4.207, abs=1e-3)
    assert asked_written.strip() == asked["candidate"]["source"].strip()


def test_keep_rewrite_judges_the_rewriters_candidate_only(problems: Path, tmp_path: Path):
    row, written = _optimize(problems, tmp_path, "--keep", "rewrite")
    assert "kept" not in row and row["result"]["speedup"] == pytest.approx(4.207, abs=1e-3)
    assert written.strip() == row["candidate"]["source"].strip()


def test_torch_compile_alone_is_judged_in_the_trusted_reference_process(tmp_path: Path) -> None:
    """``_kept_best`` asks for the trusted verdict (``judged(source, True)``) for the
    torch.compile contender only: the rewriter's candidate and the rule rewriter's pick run as
    candidates (the judge is a stand-in here; the real ones are tested in tests/evaluate)."""
    from autoprofiler.cli.optimize import _kept_best
    from autoprofiler.evaluate import EvalResult
    from autoprofiler.problem import load_problems
    from autoprofiler.profile.base import Profile
    from autoprofiler.rewrite.base import Candidate, RewriteContext, Rewriter

    problem = load_problems(EXAMPLES / "05_elementwise_chain.py").problems[0]
    own = Candidate(problem.source.replace("class Model(", "class ModelNew("), "mine", "")
    asked: list[tuple[str, bool]] = []

    def judged(source: str, compiled_reference: bool) -> EvalResult:
        asked.append((source, compiled_reference))
        return EvalResult(problem_hash=problem.content_hash, candidate_hash="c")

    class Mine(Rewriter):
        name = "mine"  # not the rule rewriter: its pick joins the contenders

        def rewrite(self, problem, profile, context) -> Candidate:
            return own

    context = RewriteContext(device="cpu")
    with Store(tmp_path / "s.sqlite") as store:
        row = _kept_best(
            problem, Profile(problem_hash=problem.content_hash), own,
            (Mine(), context, store), judged, tmp_path, False,
        )  # fmt: skip
    trusted = [source for source, compiled_reference in asked if compiled_reference]
    assert len(asked) == 3 and len(trusted) == 1 and "torch.compile" in trusted[0]
    assert row["kept"]["by"] == "reference"  # nothing judged correct: the reference stays
