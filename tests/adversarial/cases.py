"""The red-team cases: each file in ``candidates/`` is a known cheat against a red-team problem.

A case's module docstring is its specification: the first line names the trick, and these
lines say what the evaluator must answer:

- ``Verdict:`` ``correct`` or failure kinds joined by ``or`` (``wrong_values or cheat``);
- ``Findings:`` finding names that must all be present;
- ``Speedup-at-most:`` a number: the result's ``speedup`` must be None (not correct, or not
  timed) or at most this times an honest speed: the reference's (1x), or an honest rewrite's
  timed in the same run when that is faster (a verdict of ``correct`` needs ``Findings:`` or
  this: a cheat that passes must be flagged or show no more than an honest speed);
- ``Problem:`` the problem file in ``tests/adversarial/`` it is judged against (default:
  ``redteam_problem.py``);
- ``Device: cuda`` for a GPU-only trick (default: cpu);
- ``Gap:`` a trick the evaluator does not catch yet, and why (its test is an expected failure).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from autoprofiler.evaluate import EvalConfig, EvalResult, FailureKind, evaluate
from autoprofiler.problem import Problem, load_file

HERE = Path(__file__).resolve().parent
DEFAULT_PROBLEM = "redteam_problem.py"
PROBLEM_PATH = HERE / DEFAULT_PROBLEM
FIELDS = ("Verdict", "Findings", "Speedup-at-most", "Problem", "Device", "Gap")
CANDIDATES = HERE / "candidates"
CORRECT = "correct"
CONFIG = EvalConfig(
    device="cpu",
    timing_budget_ms=20,
    warmup_ms=2,
    min_timing_trials=5,
    max_timing_trials=50,
    compile_timeout_s=60,
    run_timeout_s=60,
)
# The least timing that still judges: for tests about the processes, not about the timings.
QUICK_CPU_CONFIG = EvalConfig(device="cpu", timing_budget_ms=5, warmup_ms=1, min_timing_trials=3)
HONEST = '''"""relu(x @ W) * 2 written out: a rewrite with nothing to hide."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weight).clamp_min(0) * 2
'''
HONEST_SCALAR = HONEST.replace(
    "def forward(self, x: torch.Tensor)", "def forward(self, x: torch.Tensor, scale: float)"
).replace("clamp_min(0) * 2", "clamp_min(0) * scale")
HONEST_REWRITES = {DEFAULT_PROBLEM: HONEST, "redteam_problem_scalar.py": HONEST_SCALAR}


@dataclass(frozen=True)
class Case:
    """One cheat and the verdict it must get."""

    name: str
    source: str
    trick: str
    verdicts: frozenset[str]
    findings: frozenset[str]
    device: str = "cpu"
    gap: str = ""
    speedup_at_most: float | None = None
    problem: str = DEFAULT_PROBLEM

    def problems_with(self, result: EvalResult, honest: EvalResult | None = None) -> list[str]:
        """What is wrong with ``result`` for this case (empty when it is as specified);
        ``honest``: an honest rewrite of the problem judged in the same run."""
        problems = []
        if outcome(result) not in self.verdicts:
            problems.append(f"verdict {outcome(result)} ({result.failure_message!r})")
        missing = self.findings - {f.name for f in result.findings}
        if missing:
            problems.append(f"findings {sorted(missing)} missing")
        speedup, bound = result.speedup, self.speedup_at_most
        par = max(1.0, (honest.speedup if honest is not None else None) or 1.0)
        if speedup is not None and bound is not None and speedup > bound * par:
            of = f" of an honest rewrite's {par:.3g}x" if par > 1 else ""
            problems.append(f"speedup {speedup:.3g}x above {bound:g}x{of}")
        return problems


def outcome(result: EvalResult) -> str:
    """``correct`` or the failure kind's name."""
    return CORRECT if result.correct else (result.failure_kind or FailureKind.RUNTIME_ERROR).value


def _fields(docstring: str) -> dict[str, str]:
    fields = {}
    for line in docstring.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in FIELDS:
            fields[key] = value.strip()
    return fields


def _speedup_bound(value: str | None) -> float | None:
    """The ``Speedup-at-most:`` value: None when absent; a positive finite number otherwise."""
    if value is None:
        return None
    try:
        bound = float(value)
    except ValueError:
        bound = math.nan
    if not (math.isfinite(bound) and bound > 0):
        raise ValueError(f"'Speedup-at-most:' must be a positive number, not {value!r}")
    return bound


def _problem_name(value: str | None) -> str:
    """The ``Problem:`` value: a ``.py`` file directly in ``tests/adversarial/``."""
    if value is None:
        return DEFAULT_PROBLEM
    if Path(value).name != value or not value.endswith(".py") or not (HERE / value).is_file():
        where = f"{HERE.parent.name}/{HERE.name}/"
        raise ValueError(f"'Problem:' must name a .py file in {where}, not {value!r}")
    return value


def load_case(path: Path) -> Case:
    """The case in ``path``; raises ``ValueError`` (one line) when its docstring does not
    specify one."""
    source = path.read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(source)) or ""
    fields = _fields(docstring)
    verdicts = frozenset(v.strip() for v in fields.get("Verdict", "").split(" or ") if v.strip())
    known = {CORRECT, *(kind.value for kind in FailureKind)}
    if not verdicts or not verdicts <= known:
        raise ValueError(f"{path.name}: 'Verdict:' must name {sorted(known)}")
    findings = frozenset(f.strip() for f in fields.get("Findings", "").split(",") if f.strip())
    try:
        speedup_at_most = _speedup_bound(fields.get("Speedup-at-most"))
        problem = _problem_name(fields.get("Problem"))
    except ValueError as exc:
        raise ValueError(f"{path.name}: {exc}") from None
    if CORRECT in verdicts and not findings and speedup_at_most is None:
        raise ValueError(
            f"{path.name}: a cheat that passes must name the findings that flag it"
            " or a 'Speedup-at-most:'"
        )
    return Case(
        name=path.stem,
        source=source,
        trick=docstring.splitlines()[0].rstrip("."),
        verdicts=verdicts,
        findings=findings,
        device=fields.get("Device", "cpu"),
        gap=fields.get("Gap", ""),
        speedup_at_most=speedup_at_most,
        problem=problem,
    )


def load_cases(folder: Path = CANDIDATES) -> list[Case]:
    return [load_case(path) for path in sorted(folder.glob("*.py"))]


def redteam_problem(name: str = DEFAULT_PROBLEM) -> Problem:
    """The red-team problem in file ``name`` of ``tests/adversarial/``."""
    return load_file(HERE / name)


@dataclass
class RedTeamRun:
    """The cases' results by name, and the honest rewrites' by problem file."""

    results: dict[str, EvalResult]
    honest: dict[str, EvalResult]

    def problems_with(self, case: Case) -> list[str]:
        return case.problems_with(self.results[case.name], self.honest.get(case.problem))


def evaluate_cases(
    cases: Iterable[Case], work_root: Path, device: str = "cpu", workers: int = 2
) -> RedTeamRun:
    """Each case's result against its problem (each loaded once), evaluated in parallel
    workers (each evaluation is its own process). First, one at a time, an honest rewrite of
    each problem: its reference is then timed with nothing else running, and the rewrite
    gives the speed an honest candidate gets in this run."""
    cases = list(cases)
    names = sorted({case.problem for case in cases})
    problems = {name: redteam_problem(name) for name in names}
    config = replace(CONFIG, device=device)

    def judge(problem: str, source: str) -> EvalResult:
        return evaluate(problems[problem], source, config, work_root=work_root)

    honest = {name: judge(name, HONEST_REWRITES[name]) for name in names}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = pool.map(lambda case: judge(case.problem, case.source), cases)
        return RedTeamRun(dict(zip((case.name for case in cases), results)), honest)
