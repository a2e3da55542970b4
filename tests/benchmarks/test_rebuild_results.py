"""benchmarks/rebuild_results.sh, tried on the CPU: the device modes resume from what an
earlier slot left, and the pages are remade only once every verdict is this evaluator's."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT, import_benchmark

llm_table = import_benchmark("llm_table")
made_by_an_older_evaluator = import_benchmark("_common").made_by_an_older_evaluator

SCRIPT = ROOT / "benchmarks" / "rebuild_results.sh"
# the steps of the pages mode that replay recorded verdicts (llm_table reads its rows' devices)
REPLAYING_VERDICTS = (
    "rewriter_table.py", "learning_table.py", "keep_best.py", "llm_learning.py",
    "autoprofiler bench",
)  # fmt: skip

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _rebuild(mode: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), mode, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
        timeout=600,
        check=False,
    )


def test_the_rule_sweep_resumes_from_the_last_slot_and_the_pages_wait(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    shutil.copy(ROOT / "examples" / "problems" / "07_row_softmax.py", problems / "softmax.py")
    first, second = tmp_path / "slot1", tmp_path / "slot2"
    first.mkdir(), second.mkdir()
    cpu = {"KB": str(problems), "SELECT": "", "EXTRA": "--device cpu", "LIMIT_S": "300"}
    done = _rebuild("rules", **cpu, OUT=str(first), PREV=str(tmp_path / "none"))
    assert done.returncode == 0, done.stderr
    rows = (first / "rules_rows.jsonl").read_text().splitlines()
    assert rows and all(json.loads(row)["result"]["evaluator_version"] for row in rows)
    assert (first / "rules-0.jsonl.gz").exists()
    assert "0 evaluations already done" in (first / "rules.log").read_text()

    done = _rebuild("rules", **cpu, OUT=str(second), PREV=str(first))
    assert done.returncode == 0, done.stderr
    log = (second / "rules.log").read_text()
    assert f"{len(rows)} evaluations already done" in log
    assert f"resumed {len(rows)} evaluations" in log
    assert (second / "rules_rows.jsonl").read_text().splitlines() == rows  # nothing judged
    assert (second / "rules-0.jsonl.gz").exists()  # the export carried on for the next slot

    # None of the pages' verdicts is this slot's, and it has no LLM export: the pages are not
    # remade, and nothing is written.
    before = {p: p.read_bytes() for p in (ROOT / "docs" / "results" / "data").glob("*.gz")}
    pages = _rebuild("pages", PREV=str(second), KB=str(problems))
    assert pages.returncode == 1
    assert "verdicts left to judge again: rules 185, llm all" in pages.stdout
    assert {p: p.read_bytes() for p in before} == before


def test_the_llm_mode_would_judge_every_reply_an_older_evaluator_judged(tmp_path: Path) -> None:
    rows = llm_table.read_rows(ROOT / "docs" / "results" / "data" / "llm_sweep_rows.jsonl.gz")
    older = sum(made_by_an_older_evaluator(row) for row in rows.values())
    done = _rebuild("llm", EXTRA="--dry-run", OUT=str(tmp_path), PREV=str(tmp_path / "none"))
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "llm.log").read_text()
    assert "resumed 240 evaluations" in log and f" {older} candidates to judge" in log
    assert "Traceback" not in log


def test_a_slot_runs_its_steps_within_its_seconds(tmp_path: Path) -> None:
    steps = {"STEPS": "llm", "EXTRA": "--dry-run", "PREV": str(tmp_path / "none")}
    ran, short = tmp_path / "ran", tmp_path / "short"
    ran.mkdir(), short.mkdir()
    done = _rebuild("slot", **steps, TOTAL_S="400", OUT=str(ran))
    assert done.returncode == 0, done.stderr
    assert "slot: llm with LIMIT_S=32" in done.stdout  # 400 s less the 75 its timeout may add
    assert "resumed 240 evaluations" in (ran / "llm.log").read_text()
    # too few seconds left for a step: it is not started
    done = _rebuild("slot", **steps, TOTAL_S="100", OUT=str(short))
    assert done.returncode == 0, done.stderr
    assert "llm not started" in done.stdout and not (short / "llm.log").exists()
    wrong = _rebuild("slot", STEPS="rules pages", OUT=str(short))
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1
    assert "unknown step pages" in wrong.stderr


def test_a_slot_on_another_gpu_model_than_the_earlier_slots_is_refused(tmp_path: Path) -> None:
    earlier, out = tmp_path / "earlier", tmp_path / "out"
    earlier.mkdir(), out.mkdir()
    (earlier / "card.txt").write_text("NVIDIA Imaginary GPU\n")  # no machine has it
    done = _rebuild("rules", KB=str(tmp_path), OUT=str(out), PREV=str(earlier))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "was judged on NVIDIA Imaginary GPU" in done.stderr
    assert not (out / "rules_rows.jsonl").exists()  # nothing started


def test_every_page_replays_the_verdicts_of_the_gpu_model_that_judged_them_again(
    tmp_path: Path,
) -> None:
    before = {p: p.read_bytes() for p in (ROOT / "docs" / "results").rglob("*") if p.is_file()}
    bare = _rebuild("pages", PREV=str(tmp_path), KB=str(tmp_path), FORCE="1")
    assert bare.returncode == 2
    assert bare.stderr.count("\n") == 1 and "holds no card.txt" in bare.stderr

    (tmp_path / "card.txt").write_text("NVIDIA Imaginary GPU\n")
    steps = _rebuild("pages", PREV=str(tmp_path), KB=str(tmp_path), FORCE="1", DRY_RUN="1")
    assert steps.returncode == 0, steps.stderr
    judged = r"--evaluated-device cuda:NVIDIA\ Imaginary\ GPU"
    replaying = [
        line
        for line in steps.stdout.splitlines()
        if any(f"{script} " in line for script in REPLAYING_VERDICTS)
    ]
    assert len(replaying) == len(REPLAYING_VERDICTS)  # rewriter_table's --command repeats it
    assert all(judged in line for line in replaying)
    assert "stamp docs/results/rewriter.md" in steps.stdout
    # another GPU than the H200 that judged first: what carried over, on the reproduction page
    (transfer,) = [line for line in steps.stdout.splitlines() if "transfer_table.py" in line]
    assert r"--from cuda:NVIDIA\ H200 --to cuda:NVIDIA\ Imaginary\ GPU" in transfer
    assert transfer.endswith("--markdown docs/results/reproduction.md")
    # both HTML reports are remade with the pages' stamp as their note, naming the card
    reports = [line for line in steps.stdout.splitlines() if "-m autoprofiler report " in line]
    notes = {line.split(" --note ", 1)[1] for line in reports}
    assert len(reports) == 2 and len(notes) == 1
    (note,) = notes
    assert note.startswith("Rebuilt\\ ") and r"NVIDIA\ Imaginary\ GPU" in note
    # a dry run writes nothing
    assert {p: p.read_bytes() for p in before} == before
    assert {p for p in (ROOT / "docs" / "results").rglob("*") if p.is_file()} == set(before)


def test_each_gpu_model_carries_a_rebuild_of_its_own_and_the_pages_name_theirs(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREV"}
    done = subprocess.run(
        ["bash", str(SCRIPT), "llm"], capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**env, "EXTRA": "--dry-run", "OUT": str(tmp_path)}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # no GPU here: this machine's folder is "cpu", which no slot has filled
    assert "resumed from: docs/results/data/rebuild/cpu" in (tmp_path / "env.txt").read_text()
    assert "resumed 240 evaluations" in (tmp_path / "llm.log").read_text()
    pages = subprocess.run(
        ["bash", str(SCRIPT), "pages"], capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**env, "KB": str(tmp_path)}, check=False,
    )  # fmt: skip
    # Two GPU models have a rebuild: the pages take neither unless PREV names it.
    assert pages.returncode == 2 and pages.stderr.count("\n") == 1
    assert "nvidia-h100-80gb-hbm3, nvidia-h200" in pages.stderr
    rebuilds = ROOT / "docs" / "results" / "data" / "rebuild"
    # The H200's first slot judged 35 of the 185 verdicts behind the rule pages (11 problems
    # and part of a 12th); the H100's slots all 185, and 18 of the 240 LLM verdicts: the pages
    # wait (a slot committed later changes these counts).
    for folder, card, left in (
        ("nvidia-h200", "NVIDIA H200", "rules 150, llm all"),
        ("nvidia-h100-80gb-hbm3", "NVIDIA H100 80GB HBM3", "rules 0, llm 222"),
    ):
        assert (rebuilds / folder / "card.txt").read_text().strip() == card
        named = _rebuild("pages", PREV=str(rebuilds / folder), KB=str(tmp_path))
        assert named.returncode == 1
        assert f"verdicts left to judge again: {left}" in named.stdout


def test_a_slot_is_kept_in_its_gpu_models_folder_and_another_models_is_refused(
    tmp_path: Path,
) -> None:
    slot, prev = tmp_path / "slot", tmp_path / "prev"
    slot.mkdir()
    (slot / "card.txt").write_text("NVIDIA H200\n")
    (slot / "rules-0.jsonl.gz").write_bytes(b"export")
    (slot / "rules.log").write_text("the first slot\n")
    (slot / "env.txt").write_text("NVIDIA H200, 580\n")
    for rows in ('{"n": 1}\n', '{"n": 1}\n{"n": 2}\n'):  # a later slot's rows hold the earlier
        (slot / "rules_rows.jsonl").write_text(rows)
        kept = _rebuild("keep", str(slot), PREV=str(prev))
        assert kept.returncode == 0, kept.stderr
    assert "rules (2 rows)" in kept.stdout
    assert (prev / "rules_rows.jsonl").read_text() == '{"n": 1}\n{"n": 2}\n'
    assert (prev / "rules-0.jsonl.gz").read_bytes() == b"export"
    assert (prev / "card.txt").read_text().strip() == "NVIDIA H200"
    assert (prev / "rules.log").read_text().count("the first slot") == 2  # appended, not lost

    (slot / "card.txt").write_text("NVIDIA Imaginary GPU\n")
    other = _rebuild("keep", str(slot), PREV=str(prev))
    assert other.returncode == 2 and other.stderr.count("\n") == 1
    assert "judged on NVIDIA H200" in other.stderr
    (slot / "card.txt").unlink()
    bare = _rebuild("keep", str(slot), PREV=str(prev))
    assert bare.returncode == 2 and "holds no card.txt" in bare.stderr


def test_a_remade_page_says_under_its_title_which_evaluator_judged_its_verdicts_again(
    tmp_path: Path,
) -> None:
    from autoprofiler.evaluate.config import EVALUATOR_VERSION

    page, prev = tmp_path / "page.md", tmp_path / "prev"
    prev.mkdir()
    (prev / "card.txt").write_text("NVIDIA H200\n")
    page.write_text("# A results page\n\nIts text.\n")
    for _ in range(2):  # a second rebuild's stamp replaces the first's
        stamped = _rebuild("stamp", str(page), PREV=str(prev))
        assert stamped.returncode == 0, stamped.stderr
    lines = page.read_text().splitlines()
    assert lines[0] == "# A results page" and lines[-1] == "Its text."
    stamps = [line for line in lines if line.startswith("> Rebuilt ")]
    assert len(stamps) == 1
    assert f"evaluator v{EVALUATOR_VERSION} on the NVIDIA H200" in stamps[0]
    assert str(prev) in stamps[0]


def test_the_rule_pages_are_remade_once_their_own_verdicts_are_in(tmp_path: Path) -> None:
    from autoprofiler.evaluate.config import EVALUATOR_VERSION

    data = ROOT / "docs" / "results" / "data" / "kernelbench_h200_evaluations.jsonl.gz"
    with gzip.open(data, "rt") as lines, gzip.open(tmp_path / "rules-0.jsonl.gz", "wt") as out:
        for row in map(json.loads, lines):  # every rule verdict behind the pages, judged again
            if "evaluation" in row:
                row["result"]["evaluator_version"] = EVALUATOR_VERSION
            out.write(json.dumps(row) + "\n")
    (tmp_path / "card.txt").write_text("NVIDIA Imaginary GPU\n")
    env = {"PREV": str(tmp_path), "KB": str(tmp_path), "DRY_RUN": "1"}

    rules = _rebuild("pages", **env, PARTS="rules")
    assert rules.returncode == 0, rules.stderr
    assert "verdicts left to judge again: rules 0, llm all" in rules.stdout
    for step in ("rewriter_table.py", "learning_table.py", "autoprofiler bench"):
        assert step in rules.stdout
    # no LLM page, nor the LLM data files (merged with the llm part only)
    for step in ("llm_table.py", "keep_best.py", "llm_learning.py", "llm_sweep_rows"):
        assert step not in rules.stdout
    stamps = [line for line in rules.stdout.splitlines() if line.startswith("stamp ")]
    assert stamps == ["stamp docs/results/rewriter.md docs/results/learning.md"]
    # the bench learns a tree per cost weight as the committed one did (its Pareto front)
    committed = json.loads(
        (ROOT / "docs" / "results" / "data" / "reproduction_h200.json").read_text()
    )
    weights = sorted({budget["cost_weight"] for budget in committed["budgets"]})
    (bench,) = [line for line in rules.stdout.splitlines() if "autoprofiler bench " in line]
    given = bench.split("--cost-weights ", 1)[1].split()[0].replace("\\,", ",")
    assert sorted(map(float, given.split(","))) == weights and len(weights) > 1

    for parts in ("rules llm", "llm"):  # the LLM pages wait for their own verdicts
        waiting = _rebuild("pages", **env, PARTS=parts)
        assert waiting.returncode == 1
        assert "not every llm verdict is this evaluator's yet" in waiting.stdout
    wrong = _rebuild("pages", **env, PARTS="rules pages")
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1
    assert "unknown part pages" in wrong.stderr
