"""The red-team cases: each file in ``candidates/`` is a known cheat against ``redteam_problem``.

A case's module docstring is its specification: the first line names the trick, and these
lines say what the evaluator must answer:

- ``Verdict:`` ``correct`` or failure kinds joined by ``or`` (``wrong_values or cheat``);
- ``Findings:`` finding names that must all be present (required when the verdict is
  ``correct``: a cheat that passes must at least be flagged);
- ``Device: cuda`` for a GPU-only trick (default: cpu);
- ``Gap:`` a trick the evaluator does not catch yet, and why (its test is an expected failure).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from autoprofiler.evaluate import EvalConfig, EvalResult, FailureKind, evaluate
from autoprofiler.problem import Problem, load_file

HERE = Path(__file__).resolve().parent
PROBLEM_PATH = HERE / "redteam_problem.py"
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

    def problems_with(self, result: EvalResult) -> list[str]:
        """What is wrong with ``result`` for this case (empty when it is as specified)."""
        problems = []
        if outcome(result) not in self.verdicts:
            problems.append(f"verdict {outcome(result)} ({result.failure_message!r})")
        missing = self.findings - {f.name for f in result.findings}
        if missing:
            problems.append(f"findings {sorted(missing)} missing")
        return problems


def outcome(result: EvalResult) -> str:
    """``correct`` or the failure kind's name."""
    return CORRECT if result.correct else (result.failure_kind or FailureKind.RUNTIME_ERROR).value


def _fields(docstring: str) -> dict[str, str]:
    fields = {}
    for line in docstring.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("Verdict", "Findings", "Device", "Gap"):
            fields[key] = value.strip()
    return fields


def load_case(path: Path) -> Case:
    """The case in ``path``; raises ``ValueError`` when its docstring does not specify one."""
    source = path.read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(source)) or ""
    fields = _fields(docstring)
    verdicts = frozenset(v.strip() for v in fields.get("Verdict", "").split(" or ") if v.strip())
    known = {CORRECT, *(kind.value for kind in FailureKind)}
    if not verdicts or not verdicts <= known:
        raise ValueError(f"{path.name}: 'Verdict:' must name {sorted(known)}")
    findings = frozenset(f.strip() for f in fields.get("Findings", "").split(",") if f.strip())
    if CORRECT in verdicts and not findings:
        raise ValueError(f"{path.name}: a cheat that passes must name the findings that flag it")
    return Case(
        name=path.stem,
        source=source,
        trick=docstring.splitlines()[0].rstrip("."),
        verdicts=verdicts,
        findings=findings,
        device=fields.get("Device", "cpu"),
        gap=fields.get("Gap", ""),
    )


def load_cases(folder: Path = CANDIDATES) -> list[Case]:
    return [load_case(path) for path in sorted(folder.glob("*.py"))]


def redteam_problem() -> Problem:
    return load_file(PROBLEM_PATH)


def evaluate_cases(
    cases: Iterable[Case], work_root: Path, device: str = "cpu", workers: int = 2
) -> dict[str, EvalResult]:
    """Each case's result, evaluated in parallel workers (each evaluation is its own process)."""
    problem = redteam_problem()
    config = replace(CONFIG, device=device)
    cases = list(cases)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = pool.map(
            lambda case: evaluate(problem, case.source, config, work_root=work_root), cases
        )
        return {case.name: result for case, result in zip(cases, results)}
