"""The opt-in bubblewrap sandbox: writes outside the work folder and the network are blocked.

Tests that run a sandboxed worker skip, with the reason, where bwrap is missing or cannot
create namespaces on this machine; the one-line error for a missing bwrap is tested anywhere.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from autoprofiler.evaluate import FailureKind, evaluate
from autoprofiler.evaluate.sandbox import SandboxError, sandbox_command
from tests.adversarial.cases import CONFIG, HONEST, redteam_problem

from .test_faults import FAULTS

SANDBOXED = replace(CONFIG, sandbox="bwrap")


def _bwrap_unusable() -> str:
    """Why a sandboxed worker cannot run here ("" when it can)."""
    try:
        command = sandbox_command("bwrap", Path.cwd())
    except SandboxError as exc:
        return str(exc)
    probe = subprocess.run([*command, "true"], capture_output=True, text=True, check=False)
    if probe.returncode:
        return f"bwrap cannot create its namespaces here: {probe.stderr.strip()}"
    return ""


needs_bwrap = pytest.mark.skipif(bool(_bwrap_unusable()), reason=_bwrap_unusable() or "usable")


@contextlib.contextmanager
def listener(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A TCP listener on the loopback; its port is in ``REDTEAM_PORT`` for the worker."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        monkeypatch.setenv("REDTEAM_PORT", str(server.getsockname()[1]))
        server.settimeout(0.5)
        yield server


def _connected(server: socket.socket) -> bool:
    try:
        connection, _ = server.accept()
    except TimeoutError:
        return False
    connection.close()
    return True


def test_a_missing_bwrap_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError) as raised:
        evaluate(redteam_problem(), HONEST, SANDBOXED, work_root=tmp_path)
    message = str(raised.value)
    assert "\n" not in message and "apt-get install bubblewrap" in message


def test_an_unknown_sandbox_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="unknown sandbox 'jail'"):
        evaluate(redteam_problem(), HONEST, replace(CONFIG, sandbox="jail"), work_root=tmp_path)


@needs_bwrap
def test_a_sandboxed_candidate_is_judged_as_usual(tmp_path: Path) -> None:
    result = evaluate(redteam_problem(), HONEST, SANDBOXED, work_root=tmp_path)
    assert result.correct, result.failure_message


@needs_bwrap
def test_the_sandbox_blocks_writes_outside_the_work_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "escaped.txt"
    monkeypatch.setenv("REDTEAM_ESCAPE_PATH", str(target))
    source = FAULTS["write_outside"].source
    result = evaluate(redteam_problem(), source, SANDBOXED, work_root=tmp_path / "home")
    assert result.failure_kind is FailureKind.RUNTIME_ERROR
    assert "Read-only file system" in result.failure_message
    assert not target.exists()


@pytest.mark.parametrize(
    ("sandbox", "reaches_the_listener"),
    [(None, True), pytest.param("bwrap", False, marks=needs_bwrap)],
    ids=["plain", "bwrap"],
)
def test_network_use_is_flagged_and_blocked_in_the_sandbox(
    sandbox: str | None,
    reaches_the_listener: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = FAULTS["network_probe"].source
    with listener(monkeypatch) as server:
        config = replace(CONFIG, sandbox=sandbox)
        result = evaluate(redteam_problem(), source, config, work_root=tmp_path)
        assert _connected(server) is reaches_the_listener
    assert result.correct, result.failure_message
    assert any(f.name == "network_access" for f in result.findings)


@needs_bwrap
def test_sandboxed_candidates_read_bytecode_that_only_trusted_code_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox shows the candidates' bytecode folder read-only; a trusted process (the
    evaluator's, importing no candidate code) fills it, and a sandboxed interpreter then
    loads its modules from there rather than compiling them."""
    import sys
    import tempfile

    from autoprofiler.evaluate import runner

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the user's folder: this test's
    monkeypatch.setattr(runner, "SANDBOX_BYTECODE_MODULES", ("autoprofiler.evaluate.sandbox",))
    monkeypatch.setattr(runner, "_FILLERS", {})
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    env, roots = runner.worker_env(tmp_path / "work", SANDBOXED)
    folder = Path(env["PYTHONPYCACHEPREFIX"])
    assert folder.parent == tmp_path and str(folder) in roots
    filler = runner._FILLERS[str(folder)]
    assert filler.wait(timeout=120) == 0
    source = Path(runner.__file__).with_name("sandbox.py").resolve()
    kept = (
        folder
        / source.parent.relative_to(source.anchor)
        / (f"sandbox.{sys.implementation.cache_tag}.pyc")
    )
    assert kept.is_file()
    assert runner.worker_env(tmp_path / "again", SANDBOXED)[0]["PYTHONPYCACHEPREFIX"] == str(folder)
    assert {str(folder): filler} == runner._FILLERS  # filled once per process

    boxed = subprocess.run(
        [*sandbox_command("bwrap", tmp_path / "work"), sys.executable, "-v", "-c",
         "import autoprofiler.evaluate.sandbox"],
        env=env, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert f"code object from '{kept}'" in boxed.stderr
