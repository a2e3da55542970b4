"""The scripts behind docs/results/rewriter.md: the sweep (on the CPU here) and the table."""

from __future__ import annotations

import gzip
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from autoprofiler.problem import Problem

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "results" / "data"


def _run(script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=env,
        timeout=600,
    )


def test_sweep_evaluates_every_reachable_candidate_once_and_resumes(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "softmax.py").write_text(
        (ROOT / "examples" / "problems" / "07_row_softmax.py").read_text()
    )
    export = tmp_path / "export.jsonl.gz"
    args = ("--device", "cpu", "--store", str(tmp_path / "s.sqlite"), "--rows")
    rows_path = tmp_path / "rows.jsonl"
    first = _run("rule_sweep.py", str(problems), *args, str(rows_path), "--export", str(export))
    assert first.returncode == 0, first.stderr[-2000:]
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    # On the CPU only Triton's row kernel and torch.compile can be reached for a softmax.
    assert {r["transformation"] for r in rows} <= {"triton_row", "compile"}
    assert rows and all(r["correct"] for r in rows)
    again = _run("rule_sweep.py", str(problems), *args, str(rows_path))
    assert again.returncode == 0
    assert len(rows_path.read_text().splitlines()) == len(rows)
    assert f"{len(rows)} evaluations already done" in again.stderr
    # Rows whose verdicts neither the store nor an export holds (a run killed between its
    # verdicts and its export) are not done: a bare store would judge them all again.
    bare_store = ("--device", "cpu", "--store", str(tmp_path / "bare.sqlite"), "--rows")
    bare = _run("rule_sweep.py", str(problems), *bare_store, str(rows_path), "--deadline-s", "1")
    assert bare.returncode == 0, bare.stderr[-2000:]
    assert "0 evaluations already done" in bare.stderr
    assert len(rows_path.read_text().splitlines()) == len(rows)  # the deadline judged none

    # A row whose verdict an older evaluator made is not done: a sweep on another slot's
    # fresh store, resumed from the export, takes that verdict again from the export (this
    # version made it there), not from a new run, and appends its row.
    stale = {**rows[0], "result": {**rows[0]["result"], "evaluator_version": "1"}}
    rows_path.write_text("".join(json.dumps(r) + "\n" for r in [stale, *rows[1:]]))
    fresh = ("--device", "cpu", "--store", str(tmp_path / "fresh.sqlite"), "--rows")
    resumed = _run("rule_sweep.py", str(problems), *fresh, str(rows_path),
                   "--resume-from", str(export), str(tmp_path / "missing.jsonl.gz"))  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"{len(rows) - 1} evaluations already done" in resumed.stderr
    assert f"resumed {len(rows)} evaluations from {export}" in resumed.stderr
    added = [json.loads(line) for line in rows_path.read_text().splitlines()][len(rows) :]
    assert [r["transformation"] for r in added] == [rows[0]["transformation"]]
    assert added[0]["result"]["candidate"] == rows[0]["result"]["candidate"]  # the same trials


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_a_sweep_asked_for_a_gpu_on_a_machine_without_one_is_one_line(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "softmax.py").write_text(
        (ROOT / "examples" / "problems" / "07_row_softmax.py").read_text()
    )
    args = ("--store", str(tmp_path / "s.sqlite"), "--rows", str(tmp_path / "rows.jsonl"))
    swept = _run("rule_sweep.py", str(problems), "--device", "cuda", *args)
    assert swept.returncode == 2
    assert "Traceback" not in swept.stderr
    assert "asked for, but torch sees no CUDA GPU here" in swept.stderr.splitlines()[-1]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])  # Ctrl-C, `timeout`
def test_an_interrupted_sweep_ends_with_a_one_line_warning_and_its_export(
    tmp_path: Path, stop: signal.Signals
) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "softmax.py").write_text(
        (ROOT / "examples" / "problems" / "07_row_softmax.py").read_text()
    )
    command = [sys.executable, str(ROOT / "benchmarks" / "rule_sweep.py"), str(problems)]
    command += ["--device", "cpu", "--store", str(tmp_path / "s.sqlite")]
    command += ["--rows", str(tmp_path / "rows.jsonl"), "--export", str(tmp_path / "e.jsonl.gz")]
    # A shell that starts a job in the background has it ignore SIGINT, and Python keeps an
    # inherited SIG_IGN: give the sweep the default disposition, as a terminal would.
    sweep = subprocess.Popen(
        command,
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert sweep.stderr is not None
    for line in sweep.stderr:  # interrupt it once it is evaluating
        if "evaluations already done" in line:
            break
    time.sleep(1.0)
    sweep.send_signal(stop)
    rest = sweep.stderr.read()
    assert sweep.wait(timeout=60) == 130
    assert "Traceback" not in rest and "interrupted" in rest
    # Its one problem was not finished, and still the export was written, with every verdict
    # the rows hold (before, the export came only after a finished problem).
    rows = tmp_path / "rows.jsonl"
    lines = rows.read_text().splitlines() if rows.exists() else []  # none judged yet
    judged = {json.loads(line)["candidate_hash"] for line in lines}
    with gzip.open(tmp_path / "e.jsonl.gz", "rt") as export:
        exported = {r["candidate_hash"] for r in map(json.loads, export) if "evaluation" in r}
    assert judged <= exported


def _committed_page_device() -> str:
    """The device whose verdicts the committed rewriter.md replays (its command line says)."""
    page = (ROOT / "docs" / "results" / "rewriter.md").read_text()
    found = re.search(r"--evaluated-device (cuda:[^\n`]+)", page)
    return found[1].strip() if found else "cuda:NVIDIA H200"


def test_rewriter_table_from_the_committed_h200_data(tmp_path: Path) -> None:
    out = tmp_path / "rewriter.md"
    done = _run(
        "rewriter_table.py",
        *("--recordings", str(DATA / "kernelbench_h200.jsonl.gz")),
        *("--evaluations", str(DATA / "kernelbench_h200_evaluations.jsonl.gz")),
        *("--markdown", str(out), "--compare", "compile_max_autotune"),
        *("--evaluated-device", _committed_page_device()),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text()
    # Every transformation the rewriter can reach was evaluated: all 64 problems in both tables.
    assert "## Summary (64 problems)" in text and "Left out" not in text
    assert "Not evaluated" not in text
    assert "## The rewriter without `compile_max_autotune` (64 problems)" in text
    assert "| `--set full` alone | 30 |" in text
    summary = [line for line in text.splitlines() if line.startswith(("| none |", "| full |"))]
    assert len(summary) == 4 and all("x |" in line for line in summary)  # two tables
    assert "`compile_max_autotune` against `compile` (default mode), evaluated on 36" in text
    assert "failed where `compile` was correct on 1 (L1/87_conv_pointwise_2D)" in text
    # The committed page is what the committed data give (the command line aside).
    committed = (ROOT / "docs" / "results" / "rewriter.md").read_text()
    assert text.split("## Summary", 1)[1] == committed.split("## Summary", 1)[1]
    assert "Generated Triton kernels: 32 of 32 correct" in text


def test_rewriter_table_replays_the_verdicts_of_the_device_it_is_given(tmp_path: Path) -> None:
    """A rebuild on another GPU model adds verdicts under that model's label: the page replays
    the label it is given, and says whose verdicts they are."""
    packed = (DATA / "kernelbench_h200_evaluations.jsonl.gz").read_bytes()
    text = gzip.decompress(packed).decode("utf-8")
    device = _committed_page_device().removeprefix("cuda:")
    assert f'"device":"cuda:{device}"' in text
    relabeled = tmp_path / "evaluations.jsonl.gz"
    relabeled.write_bytes(gzip.compress(text.replace(device, "NVIDIA Other").encode()))
    out = tmp_path / "rewriter.md"
    done = _run(
        "rewriter_table.py",
        *("--recordings", str(DATA / "kernelbench_h200.jsonl.gz")),
        *("--evaluations", str(relabeled), "--markdown", str(out)),
        *("--compare", "compile_max_autotune", "--evaluated-device", "cuda:NVIDIA Other"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    page = out.read_text()
    assert page.startswith("# The rule rewriter on the Other: ")
    assert "The verdicts below were judged on the Other; the profiles" in page
    committed = (ROOT / "docs" / "results" / "rewriter.md").read_text()
    assert page.split("## Summary", 1)[1] == committed.split("## Summary", 1)[1]


def test_rewriter_table_leaves_out_a_problem_whose_pick_was_never_evaluated(
    tmp_path: Path,
) -> None:
    """Without the max-autotune evaluation of L1/84, its full-profile pick is unknown."""
    packed = (DATA / "kernelbench_h200_evaluations.jsonl.gz").read_bytes()
    rows = gzip.decompress(packed).decode("utf-8").splitlines()
    depthwise = next(
        Problem.from_dict(json.loads(r)["problem"])
        for r in rows
        if r.startswith('{"problem"') and '"84_conv_depthwise' in r
    )
    key = depthwise.content_hash
    dropped = {
        json.loads(r)["candidate"]
        for r in rows
        if r.startswith('{"candidate"')
        and f'"problem_hash":"{key}"' in r
        and '"transformation":"compile_max_autotune"' in r
    }
    assert len(dropped) == 1
    kept = [r for r in rows if not any(f'"candidate_hash":"{c}"' in r for c in dropped)]
    partial = tmp_path / "evaluations.jsonl.gz"
    with gzip.open(partial, "wt") as out:
        out.write("\n".join(kept) + "\n")
    out = tmp_path / "rewriter.md"
    done = _run(
        "rewriter_table.py",
        *("--recordings", str(DATA / "kernelbench_h200.jsonl.gz")),
        *("--evaluations", str(partial), "--markdown", str(out)),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text()
    assert "## Summary (63 problems)" in text
    assert "Left out (a pick was never evaluated): L1/84_conv_depthwise" in text


def test_learning_table_refuses_an_unknown_rewriter_before_any_study(tmp_path: Path) -> None:
    common = ("--recordings", "r.jsonl.gz", "--evaluations", "e.jsonl.gz", "--work", str(tmp_path))
    for rewriter, message in [
        ("llm", "--rewriter must be rules or rules-without-NAME, not 'llm'"),
        ("rules-without-warp_magic", "--rewriter rules-without-warp_magic:"),
    ]:
        done = _run("learning_table.py", *common, "--markdown", "x.md", "--rewriter", rewriter)
        assert done.returncode == 1 and message in done.stderr
        assert "Traceback" not in done.stderr and not (tmp_path / "learn.sqlite").exists()


def test_an_export_to_resume_from_that_is_none_is_one_line(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "softmax.py").write_text(
        (ROOT / "examples" / "problems" / "07_row_softmax.py").read_text()
    )
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"kind": "something else"}\n'))
    done = _run("rule_sweep.py", str(problems), "--device", "cpu", "--store",
                str(tmp_path / "s.sqlite"), "--rows", str(tmp_path / "rows.jsonl"),
                "--resume-from", str(broken))  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "not an autoprofiler evaluations file" in done.stderr
    assert not (tmp_path / "rows.jsonl").exists()  # nothing judged
