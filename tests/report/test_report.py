"""``autoprofiler report`` on the session's real bench: one self-contained page from a store or
from the results JSON, rendered by headless Chromium; its one-line errors; the plots' helpers."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from rich.console import Console

from autoprofiler.bench import BenchResult
from autoprofiler.evaluate.result import EvalResult, FailureKind, Finding, TimingStats
from autoprofiler.learn import StudyStorage
from autoprofiler.problem import Problem
from autoprofiler.profile.base import Profile
from autoprofiler.report.html import render_report
from autoprofiler.report.load import load_benches
from autoprofiler.report.plots import heatmap_data, learned_groups, pareto_front, winners
from autoprofiler.report.verdict import optimize_table, results_table, verdict_table
from autoprofiler.rewrite.base import Candidate
from autoprofiler.store import Store
from tests.bench.fixtures import BenchRun, flagged_bench, invoke
from tests.report.chromium import needs_chromium, render_in_chromium


def write(source: Path, out: Path, *extra: str) -> str:
    done = invoke(["report", str(source), "-o", str(out), *extra])
    assert done.exit_code == 0, done.output
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def page(bench_run: BenchRun, tmp_path_factory: pytest.TempPathFactory) -> str:
    return write(bench_run.store, tmp_path_factory.mktemp("report") / "report.html")


def test_the_page_holds_the_tables_plots_and_trees_and_fetches_nothing(
    bench_run: BenchRun, page: str
) -> None:
    for name in ("none", "static", "SpeedOfLight", "basic", "detailed", "full", "curated24"):
        assert f"<td>{name}</td>" in page
    assert page.count("<table>") == 3  # a table per budget, and the per-problem outcomes
    assert page.count("<th>flagged</th>") == 2 and "counted at their speedups" in page
    assert "x (flagged: same_op_as_reference)</td>" in page  # 15_max_pool's candidates
    assert "over budget (up to" in page and "12_transpose_copy" in page
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 4
    assert all(base64.b64decode(i).startswith(b"\x89PNG\r\n\x1a\n") for i in images)
    trees = learned_groups(BenchResult.from_dict(bench_run.results_data()))
    assert page.count("<svg") == len(trees) and "collect static" in page  # the learned trees
    # Self-contained: no scripts, no style sheets or images fetched, no links out.
    assert "<script" not in page and "<link" not in page
    assert not re.search(r'(src|href)="(?!data:)', page)
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}


def test_the_results_json_gives_the_same_tables(
    bench_run: BenchRun, page: str, tmp_path: Path
) -> None:
    again = write(bench_run.results, tmp_path / "from-json.html")
    tables = re.findall(r"<table>.*?</table>", page, re.S)
    assert re.findall(r"<table>.*?</table>", again, re.S) == tables


def test_a_note_goes_under_the_title_escaped_and_the_page_is_otherwise_the_same(
    bench_run: BenchRun, page: str, tmp_path: Path
) -> None:
    note = "Rebuilt: judged again by evaluator v9 on the <NVIDIA H200> & such"
    noted = write(bench_run.results, tmp_path / "noted.html", "--note", note)
    title_end = noted.index("</h1>") + len("</h1>")
    escaped = "judged again by evaluator v9 on the &lt;NVIDIA H200&gt; &amp; such"
    assert noted[title_end:].startswith(f'<p class="note">Rebuilt: {escaped}</p>')
    assert "<NVIDIA" not in noted and page.count('class="note"') + 1 == noted.count('class="note"')
    tables = re.findall(r"<table>.*?</table>", page, re.S)
    assert re.findall(r"<table>.*?</table>", noted, re.S) == tables


def test_figures_are_written_as_the_same_pngs_the_page_embeds(
    bench_run: BenchRun, page: str, tmp_path: Path
) -> None:
    write(bench_run.store, tmp_path / "r.html", "--figures", str(tmp_path / "figures"))
    files = sorted((tmp_path / "figures").glob("*.png"))
    assert [f.name.split("-")[-1] for f in files] == [
        "learning.png",
        "metrics.png",
        "pareto.png",
        "winners.png",
    ]
    embedded = {base64.b64decode(i) for i in re.findall(r'base64,([^"]+)"', page)}
    assert {f.read_bytes() for f in files} == embedded


def test_the_learning_curve_is_read_from_the_stored_study(bench_run: BenchRun) -> None:
    stored = BenchResult.from_dict(bench_run.results_data())
    (bench,) = load_benches(bench_run.store)
    with Store(bench_run.store) as store:
        trials = StudyStorage(store).trials(bench.budgets[0].study)
    assert [t.number for t in bench.budgets[0].trials] == [t.number for t in trials]
    assert bench.budgets[0].trials == stored.budgets[0].trials


@needs_chromium
def test_the_page_renders_in_headless_chromium(
    bench_run: BenchRun, page: str, tmp_path: Path
) -> None:
    dom, shot = render_in_chromium(page, tmp_path, 2400)
    trees = len(learned_groups(BenchResult.from_dict(bench_run.results_data())))
    assert f"<title>decoded 4 of 4, svg {trees}</title>" in dom, dom[:500]
    assert shot.stat().st_size > 20_000  # a page with pictures, not a blank one


def a_missing_file(folder: Path) -> Path:
    return folder / "missing.sqlite"


def a_json_file_of_something_else(folder: Path) -> Path:
    path = folder / "x.json"
    path.write_text("[1]", encoding="utf-8")
    return path


def an_empty_store(folder: Path) -> Path:
    Store(folder / "empty.sqlite").close()
    return folder / "empty.sqlite"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (a_missing_file, "no such file or folder"),
        (a_json_file_of_something_else, "not bench results"),
        (an_empty_store, "holds no bench results"),
    ],
)
def test_nothing_to_report_is_one_error_line(make, message: str, tmp_path: Path) -> None:
    done = invoke(["report", str(make(tmp_path)), "-o", str(tmp_path / "r.html")])
    assert done.exit_code == 2 and message in done.output
    assert not (tmp_path / "r.html").exists()


def test_an_unknown_bench_name_is_one_error_line(bench_run: BenchRun, tmp_path: Path) -> None:
    done = invoke(
        ["report", str(bench_run.store), "--bench", "other", "-o", str(tmp_path / "r.html")]
    )
    assert done.exit_code == 2 and "no bench named other (benches: bench)" in done.output


def test_pareto_front_and_winners() -> None:
    points = [(0.0, 1.0), (1.0, 0.9), (2.0, 1.5), (2.0, 1.2), (9.0, 1.5), (10.0, 2.0)]
    assert pareto_front(points) == [(0.0, 1.0), (2.0, 1.5), (10.0, 2.0)]
    assert winners([[1.0, 2.0, 1.995], [0.5, 0.5, 0.1]]) == [
        [False, True, True],
        [True, True, False],
    ]


def test_the_heatmap_has_a_row_per_test_problem(bench_run: BenchRun) -> None:
    bench = BenchResult.from_dict(bench_run.results_data())
    data = heatmap_data(bench)
    assert data.problems == ["12_transpose_copy", "15_max_pool"]
    trees = learned_groups(bench, same_outcomes=True)
    assert data.labels[: len(bench.fixed)] == [c.name for c in bench.fixed]
    assert data.labels[len(bench.fixed)].startswith("learned @ 5 s")
    assert len(data.labels) == len(bench.fixed) + len(trees) == 7 + len(trees)
    assert all(len(row) == len(data.labels) for row in data.speedups + data.failures)


def test_the_page_counts_and_marks_flagged_candidates() -> None:
    page = render_report([flagged_bench(count_flagged=False)])
    header = re.findall(r"<th>(.*?)</th>", page)
    row = re.findall(r"<td>(.*?)</td>", page.split('<tr class="learned">')[1].split("</tr>")[0])
    assert dict(zip(header, row))["flagged"] == "1"
    assert "<td>5.000x (flagged: side_channel)</td>" in page
    assert "counted as failures in fast_p and the geomeans" in page
    assert "counted at their speedups" in render_report([flagged_bench(count_flagged=True)])


def _timing(median_ms: float) -> TimingStats:
    return TimingStats(median_ms, median_ms, median_ms, median_ms, median_ms, median_ms, 5, "t")


def _result(candidate_ms: float | None, *findings: Finding) -> EvalResult:
    """Eager at 4 ms, the candidate at ``candidate_ms`` (None: wrong values)."""
    if candidate_ms is None:
        return EvalResult("h", "c", failure_kind=FailureKind.WRONG_VALUES, reference=_timing(4))
    return EvalResult(
        "h",
        "c",
        correct=True,
        reference=_timing(4.0),
        candidate=_timing(candidate_ms),
        findings=list(findings),
    )


def _text(table: object) -> str:
    console = Console(record=True, width=200)
    console.print(table)
    return console.export_text()


def test_verdict_tables_mark_flagged_rows_and_leave_them_out_of_the_geomean() -> None:
    side = Finding("side_channel", "work on a side stream")
    rows = [
        ("fast", _result(1.0)),  # 4x
        ("flagged", _result(0.5, side, Finding("fallback_path", "try/except"))),  # 8x
        ("wrong", _result(None, side)),  # a failure, not a flagged candidate
    ]
    shown = _text(results_table("t", rows))
    assert shown.count("8 (flagged: side_channel, fallback_path)") == 1
    assert shown.count("(flagged:") == 1
    assert "geomean speedup 1.587 (failures and 1 flagged count 1.0)" in shown  # 4^(1/3)
    shown = _text(results_table("t", rows, count_flagged=True))
    assert "geomean speedup 3.175 (failures count 1.0; 1 flagged counted" in shown  # 32^(1/3)
    assert "8 (flagged: side_channel, fallback_path)" in _text(verdict_table("p", "c", rows[1][1]))

    problem = Problem(name="p", source="# p\n", origin="<test>")
    profile = Profile(problem_hash="h", groups=["static"])
    candidate = Candidate(source="# c\n", producer="rules")
    optimized = [(problem, profile, candidate, None, r) for _, r in rows[:2]]
    shown = _text(optimize_table([*optimized, (problem, profile, candidate, None, None)]))
    assert "8 (flagged: side_channel, fallback_path)" in shown
    assert "geomean speedup over eager 1.587 (failures and 1 flagged count 1.0)" in shown
