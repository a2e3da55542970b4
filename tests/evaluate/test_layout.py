"""The evaluator's layout: one module per role, and nothing taken from the learner."""

from __future__ import annotations

import ast
from pathlib import Path

import autoprofiler.evaluate

FOLDER = Path(autoprofiler.evaluate.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_evaluator_imports_nothing_from_the_learner() -> None:
    offenders = {
        path.name: sorted(n for n in _imports(path) if n.startswith("autoprofiler.learn"))
        for path in FOLDER.glob("*.py")
    }
    assert not {name: found for name, found in offenders.items() if found}


def test_the_trusted_side_never_imports_the_candidate_side() -> None:
    for role in ("reference.py", "verdict.py", "compare.py", "runner.py"):
        assert "autoprofiler.evaluate.candidate" not in _imports(FOLDER / role), role
