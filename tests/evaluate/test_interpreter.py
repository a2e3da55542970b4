"""The evaluator's own processes import nothing from the folder the user runs it in: a module
planted there (by the user, or by a candidate judged earlier without the sandbox, which may
write where the user can) would otherwise replace the real one in the trusted process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autoprofiler.evaluate import evaluate, runner
from autoprofiler.evaluate.forkserver import ZygotePool
from autoprofiler.evaluate.interpreter import main_command, python_command
from autoprofiler.evaluate.reference import ReferencePool
from autoprofiler.execute import Job, LocalExecutor
from tests.adversarial.cases import HONEST, QUICK_CPU_CONFIG, redteam_problem

from ..execute.jobs import where

PLANTED = "raise ImportError('imported from the folder the evaluator was started in')\n"


@pytest.fixture
def planted_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder, holding a ``json.py`` and a ``pickle.py`` that fail on import."""
    folder = tmp_path / "start"
    folder.mkdir()
    for name in ("json", "pickle"):
        (folder / f"{name}.py").write_text(PLANTED)
    monkeypatch.chdir(folder)
    return folder


def test_a_command_imports_the_real_module_not_the_one_in_its_start_folder(
    planted_folder: Path,
) -> None:
    done = subprocess.run(
        python_command("import json\nprint(json.__file__)"),
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).parent != planted_folder
    bare = subprocess.run(
        [sys.executable, "-c", "import json"], capture_output=True, text=True, check=False
    )  # what the evaluator's processes were started with until session 36
    assert bare.returncode != 0 and "imported from the folder" in bare.stderr


def test_main_command_passes_its_arguments_and_exit_status(tmp_path: Path) -> None:
    module = tmp_path / "exits_with_argument.py"
    module.write_text("import sys\n\ndef main():\n    return int(sys.argv[-1])\n")
    done = subprocess.run(
        main_command("exits_with_argument", "3"),
        env={"PYTHONPATH": str(tmp_path)},
        check=False,
        timeout=60,
    )
    assert done.returncode == 3


def test_the_reference_process_and_the_zygote_start_beside_planted_modules(
    planted_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    references, zygotes = ReferencePool(), ZygotePool()  # started here, not reused from elsewhere
    monkeypatch.setattr(runner, "REFERENCES", references)
    monkeypatch.setattr(runner, "ZYGOTES", zygotes)
    try:
        result = evaluate(redteam_problem(), HONEST, QUICK_CPU_CONFIG, work_root=tmp_path / "work")
    finally:
        references.close()
        zygotes.close()
    assert result.correct, result.failure_message


def test_an_execute_worker_starts_beside_planted_modules(planted_folder: Path) -> None:
    with LocalExecutor(workers=1) as executor:
        (result,) = list(executor.run([Job("k", where, (7,))]))
    assert result.ok, result.error
    assert result.value[0] == 7
