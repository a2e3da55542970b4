"""The red-team case loader: docstring fields, their checks, and what a case asserts."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoprofiler.evaluate import EvalResult, TimingStats

from .cases import DEFAULT_PROBLEM, HONEST, Case, load_case, load_cases

BODY = HONEST.split('"""', 2)[2]


def write_case(folder: Path, *fields: str, name: str = "trick") -> Path:
    path = folder / f"{name}.py"
    docstring = "\n".join(["A trick.", "", *fields])
    path.write_text(f'"""{docstring}\n"""\n{BODY}', encoding="utf-8")
    return path


def timed(reference_ms: float, candidate_ms: float) -> EvalResult:
    def stats(median_ms: float) -> TimingStats:
        return TimingStats(median_ms, median_ms, median_ms, median_ms, median_ms, median_ms, 5, "")

    result = EvalResult(problem_hash="p", candidate_hash="c", compiled=True, correct=True)
    result.reference, result.candidate = stats(reference_ms), stats(candidate_ms)
    return result


def test_loader_reads_every_candidate() -> None:
    cases = load_cases()
    assert {case.problem for case in cases} >= {DEFAULT_PROBLEM, "redteam_problem_scalar.py"}
    assert any(case.speedup_at_most is not None for case in cases)


def test_load_case_reads_speedup_and_problem(tmp_path: Path) -> None:
    path = write_case(
        tmp_path,
        "Verdict: correct or cheat",
        "Speedup-at-most: 1.5",
        "Problem: redteam_problem_scalar.py",
        "Device: cuda",
    )
    case = load_case(path)
    assert case.verdicts == {"correct", "cheat"}
    assert case.findings == frozenset()
    assert case.speedup_at_most == 1.5
    assert case.problem == "redteam_problem_scalar.py"
    assert case.device == "cuda"


def test_load_case_defaults(tmp_path: Path) -> None:
    case = load_case(write_case(tmp_path, "Verdict: wrong_values", "Findings: a, b"))
    assert case.findings == {"a", "b"}
    assert case.speedup_at_most is None and case.problem == DEFAULT_PROBLEM


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (["Verdict: correct"], "must name the findings that flag it or a 'Speedup-at-most:'"),
        (["Verdict: fast"], "'Verdict:' must name"),
        (["Verdict: correct", "Speedup-at-most: fast"], "positive number, not 'fast'"),
        (["Verdict: correct", "Speedup-at-most: 0"], "positive number, not '0'"),
        (["Verdict: correct", "Speedup-at-most: -2"], "positive number, not '-2'"),
        (["Verdict: correct", "Speedup-at-most: inf"], "positive number, not 'inf'"),
        (["Verdict: correct", "Speedup-at-most: nan"], "positive number, not 'nan'"),
        (["Verdict: cheat", "Problem: missing.py"], "in tests/adversarial/, not 'missing.py'"),
        (["Verdict: cheat", "Problem: ../conftest.py"], "not '../conftest.py'"),
        (["Verdict: cheat", "Problem: candidates"], "not 'candidates'"),
        (["Verdict: cheat", "Problem:"], "not ''"),
    ],
)
def test_load_case_rejects_bad_values(tmp_path: Path, fields: list[str], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        load_case(write_case(tmp_path, *fields))
    text = str(raised.value)
    assert text.startswith("trick.py: ") and message in text and "\n" not in text


def bare_case(**fields) -> Case:
    return Case("c", "", "a trick", frozenset({"correct"}), frozenset(), **fields)


@pytest.mark.parametrize(
    ("bound", "reference_ms", "candidate_ms", "problems"),
    [
        (3.0, 3.0, 1.0, []),  # speedup 3: at the bound
        (3.0, 1.0, 0.01, ["speedup 100x above 3x"]),
        (None, 1.0, 0.01, []),  # no bound, no assertion
    ],
)
def test_loader_speedup_at_most_bounds_the_speedup(
    bound: float | None, reference_ms: float, candidate_ms: float, problems: list[str]
) -> None:
    result = timed(reference_ms, candidate_ms)
    assert bare_case(speedup_at_most=bound).problems_with(result) == problems


def test_loader_speedup_at_most_holds_for_a_failure() -> None:
    result = timed(1.0, 0.01)
    result.correct = False  # speedup is None unless correct
    assert result.speedup is None
    assert bare_case(speedup_at_most=3.0).problems_with(result) == ["verdict runtime_error ('')"]


@pytest.mark.parametrize(
    ("honest_ms", "problems"),
    [
        (0.25, []),  # an honest rewrite runs at 40x: the cheat's 100x is within 3x of it
        (10.0, ["speedup 100x above 3x"]),  # slower than the reference: the bound is over 1x
        (0.5, ["speedup 100x above 3x of an honest rewrite's 20x"]),
    ],
)
def test_speedup_at_most_is_over_the_faster_honest_speed(
    honest_ms: float, problems: list[str]
) -> None:
    honest = timed(10.0, honest_ms)
    case = bare_case(speedup_at_most=3.0)
    assert case.problems_with(timed(10.0, 0.1), honest) == problems
    assert case.problems_with(timed(10.0, 4.0), honest) == []  # 2.5x: within 3x of any
