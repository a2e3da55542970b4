"""The CLI package's shape: the app module mounts the commands; a command module imports the
shared modules only (never the app, never another command); no import cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import autoprofiler.cli

PACKAGE = Path(autoprofiler.cli.__file__).parent


def cli_imports(path: Path) -> set[str]:
    """The ``autoprofiler.cli`` modules that ``path`` imports (anywhere in it)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "autoprofiler.cli":
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "autoprofiler.cli."
        ):
            found.add(node.module.removeprefix("autoprofiler.cli."))
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("autoprofiler.cli.")
                for a in node.names
                if a.name.startswith("autoprofiler.cli.")
            )
    return found


def test_commands_import_shared_modules_only_and_nothing_imports_in_a_circle() -> None:
    graph = {p.stem: cli_imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    commands = graph["main"] - {"command_group", "console"}
    assert {"problems", "evaluation", "profile", "optimize", "learn", "bench"} <= commands
    for name, imported in graph.items():
        if name != "main":
            assert "main" not in imported, f"{name} imports the app module"
            assert not imported & commands, f"{name} imports the command {imported & commands}"
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle: {exc.args[1]}") from None


def test_the_cli_lives_in_one_package() -> None:
    root = PACKAGE.parent
    assert sorted(str(p.relative_to(root)) for p in root.rglob("cli.py")) == []


def run_in_a_fresh_python(probe: str) -> None:
    """Run ``probe`` in a new interpreter (so that nothing is imported yet); it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_the_app_loads_without_torch_so_help_answers_at_once() -> None:
    """Loading the CLI (what ``--help`` does) must not import torch, which costs seconds; the
    profilers that need it load on first use, and still load by their package name."""
    probe = (
        "import sys, autoprofiler.cli.main, autoprofiler.profile as p\n"
        "assert 'torch' not in sys.modules, 'torch loaded with the CLI'\n"
        "assert p.StaticProfiler.__name__ == 'StaticProfiler' and 'torch' in sys.modules\n"
        "try:\n"
        "    p.NoSuchProfiler\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('unknown names must raise AttributeError')\n"
    )
    run_in_a_fresh_python(probe)


def test_tree_commands_answer_without_torch(tmp_path: Path) -> None:
    """``tree show/validate/render`` read a JSON file only; running one must not import torch
    (the group's "no CUDA GPU" handling used to import the evaluator, and torch with it, for
    every command)."""
    tree = str(PACKAGE.parents[1] / "examples" / "trees" / "expert.json")
    calls = [["show", tree], ["validate", tree], ["render", tree, "-o", str(tmp_path / "t.svg")]]
    probe = (
        "import sys\n"
        "from autoprofiler.cli.main import app\n"
        f"for args in {calls!r}:\n"
        "    try:\n"
        "        app(['tree', *args], prog_name='autoprofiler')\n"
        "    except SystemExit as done:\n"
        "        assert not done.code, f'tree {args[0]} left with {done.code}'\n"
        "    assert 'torch' not in sys.modules, f'tree {args[0]} imported torch'\n"
    )
    run_in_a_fresh_python(probe)
    assert (tmp_path / "t.svg").read_text().startswith("<")
