"""Warm candidate processes: one zygote serves candidate after candidate, each in a fresh child."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autoprofiler.evaluate import evaluate
from autoprofiler.problem import source_hash
from tests.adversarial.cases import HONEST, QUICK_CPU_CONFIG, redteam_problem

WRITES_ITS_PIDS = "import os\nopen('pids', 'w').write(f'{os.getpid()} {os.getppid()}')\n"


def _pids(tmp_path: Path, index: int) -> tuple[int, int]:
    source = WRITES_ITS_PIDS + HONEST + f"\n# candidate {index}\n"
    result = evaluate(redteam_problem(), source, QUICK_CPU_CONFIG, work_root=tmp_path)
    assert result.correct, result.failure_message
    pid, parent = (tmp_path / "candidates" / source_hash(source) / "pids").read_text().split()
    return int(pid), int(parent)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")
def test_one_zygote_forks_a_fresh_child_per_candidate(tmp_path: Path) -> None:
    first, second = _pids(tmp_path, 1), _pids(tmp_path, 2)
    assert first[0] != second[0], "two candidates ran in one process"
    assert first[1] == second[1], "each candidate had a zygote of its own: nothing was warm"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")
def test_a_forked_candidate_finds_what_torch_imports_lazily_imported_already(
    tmp_path: Path,
) -> None:
    # imported already, the import is a lookup; afresh, sympy takes a third of a second or more
    source = (
        "import time\nbegan = time.perf_counter()\nimport torch.fx.experimental.symbolic_shapes\n"
        "open('took', 'w').write(str(time.perf_counter() - began))\n" + HONEST
    )
    result = evaluate(redteam_problem(), source, QUICK_CPU_CONFIG, work_root=tmp_path)
    assert result.correct, result.failure_message
    took = float((tmp_path / "candidates" / source_hash(source) / "took").read_text())
    assert took < 0.05, f"importing sympy in the candidate took {took:.2f} s"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")
def test_without_the_fork_server_each_candidate_has_a_supervisor_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOPROFILER_FORKSERVER", "0")
    first, second = _pids(tmp_path, 3), _pids(tmp_path, 4)
    assert first[0] != second[0] and first[1] != second[1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")
def test_a_harness_failure_in_a_forked_child_leaves_its_traceback_in_the_log(
    tmp_path: Path,
) -> None:
    import os

    from autoprofiler.evaluate.runner import ZYGOTES

    log_path = tmp_path / "worker.log"
    read_fd, write_fd = os.pipe()
    with open(log_path, "wb") as log_file:
        child = ZYGOTES.start(
            tmp_path / "no-such-job.json", tmp_path, dict(os.environ), log_file.fileno(), write_fd
        )
    os.close(write_fd)
    try:
        assert child.wait(timeout=60) == 70
    finally:
        os.close(read_fd)
    assert "FileNotFoundError" in log_path.read_text(), log_path.read_text()


OPENS_A_STAND_IN_FOR_THE_GPU = """
import os
from autoprofiler.evaluate import forkserver
forkserver.GPU_DEVICE_FILES = os.path.join(os.path.dirname(__file__), "gpu-stand-in")
held = open(forkserver.GPU_DEVICE_FILES, "w")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")
def test_a_zygote_whose_imports_opened_the_gpu_refuses_and_none_of_its_kind_is_tried_again(
    tmp_path: Path,
) -> None:
    import os
    import time

    from autoprofiler.evaluate.forkserver import ZygotePool, ZygoteRefused

    (tmp_path / "sitecustomize.py").write_text(OPENS_A_STAND_IN_FOR_THE_GPU)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    pool = ZygotePool()
    try:
        with pytest.raises(ZygoteRefused, match=r"imports opened .*gpu-stand-in"):
            pool.start(tmp_path / "job.json", tmp_path, env, 1, 2)
        began = time.perf_counter()
        with pytest.raises(ZygoteRefused):
            pool.start(tmp_path / "job.json", tmp_path, env, 1, 2)
        assert time.perf_counter() - began < 1.0  # no second zygote was started
    finally:
        pool.close()


def test_the_gpu_files_a_process_holds_are_found(tmp_path: Path, monkeypatch) -> None:
    from autoprofiler.evaluate import forkserver

    monkeypatch.setattr(forkserver, "GPU_DEVICE_FILES", str(tmp_path / "nvidia"))
    assert forkserver.opened_gpu_files() == []
    with open(tmp_path / "nvidiactl", "w"):
        assert forkserver.opened_gpu_files() == [str(tmp_path / "nvidiactl")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")
def test_when_the_zygote_refuses_candidates_start_afresh_and_the_user_is_told_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import os

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(OPENS_A_STAND_IN_FOR_THE_GPU)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    with caplog.at_level("WARNING", logger="autoprofiler.evaluate.runner"):
        first, second = _pids(tmp_path, 5), _pids(tmp_path, 6)
    assert first[1] != second[1], "forked from one zygote, though it refused"
    refusals = [r for r in caplog.records if "refused to serve" in r.getMessage()]
    assert len(refusals) == 1, [r.getMessage() for r in caplog.records]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")
def test_a_forked_candidate_finds_the_zygotes_objects_frozen_out_of_its_collections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # frozen, the candidate's gc.collect() neither walks torch's objects nor copies their pages
    source = "import gc\nopen('frozen', 'w').write(str(gc.get_freeze_count()))\n" + HONEST

    def frozen(index: int) -> int:
        numbered = source + f"\n# candidate {index}\n"
        result = evaluate(redteam_problem(), numbered, QUICK_CPU_CONFIG, work_root=tmp_path)
        assert result.correct, result.failure_message
        return int((tmp_path / "candidates" / source_hash(numbered) / "frozen").read_text())

    assert frozen(1) > 10_000
    monkeypatch.setenv("AUTOPROFILER_FORKSERVER", "0")  # a fresh interpreter: nothing frozen
    assert frozen(2) == 0
