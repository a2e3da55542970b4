"""benchmarks/kernelbench_crosscheck.py on the CPU: pair selection, the report, refusals, and
the measuring loop against a stand-in KernelBench (the real one runs on the GPU machine)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import import_benchmark

ROOT = Path(__file__).resolve().parents[2]
EXPORT = ROOT / "docs" / "results" / "data" / "kernelbench_h200_evaluations.jsonl.gz"
SCRIPT = ROOT / "benchmarks" / "kernelbench_crosscheck.py"


@pytest.fixture(scope="module")
def crosscheck() -> ModuleType:
    return import_benchmark("kernelbench_crosscheck")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )


def test_selection_on_the_committed_export_is_deterministic_and_mixed(crosscheck) -> None:
    export = crosscheck.read_export(EXPORT)
    pairs = crosscheck.select_pairs(export, 30)
    assert pairs == crosscheck.select_pairs(crosscheck.read_export(EXPORT), 30)
    assert len(pairs) == 30
    assert len({(p.problem_hash, p.candidate_hash) for p in pairs}) == 30
    assert max(Counter(p.problem_hash for p in pairs).values()) <= 2
    assert set(export.evaluations) >= {(p.problem_hash, p.candidate_hash) for p in pairs}
    assert {p.kind for p in pairs} == {"triton", "compile", "other"}
    order = [(p.problem_id, p.level) for p in pairs]
    assert order == sorted(order)  # problems in (id, level) order: levels alternate
    by_problem: dict[str, list] = {}
    for pair in pairs:
        by_problem.setdefault(pair.problem_hash, []).append(pair.kind)
    for problem_hash, kinds in by_problem.items():
        available = {
            crosscheck.candidate_kind(export.candidates[c]["source"])
            for p, c in export.evaluations
            if p == problem_hash
        }
        if len(kinds) == 2 and len(available) > 1:
            assert kinds[0] != kinds[1]
    assert len(crosscheck.select_pairs(export, 31)) == 31  # more than 30 are there


def _row(problem: str, candidate: str, ours: bool, kb: bool | None, ratio: float | None) -> dict:
    speedup = 2.0 if ours else None
    kb_speedup = speedup / ratio if ratio else None
    return {
        "problem": problem,
        "level": 1,
        "problem_id": 1,
        "problem_name": problem,
        "problem_hash": f"p-{problem}",
        "candidate_hash": candidate,
        "kind": "compile",
        "transformation": "compile",
        "ours": {
            "correct": ours,
            "failure_kind": None if ours else "wrong_values",
            "failure_message": "" if ours else "max abs diff 3e-3",
            "ref_ms": 4.0,
            "cand_ms": 2.0 if ours else None,
            "speedup": speedup,
        },
        "kb_correct": kb,
        "kb_ref_ms": 4.1,
        "kb_cand_ms": 2.05 if kb else None,
        "kb_speedup": kb_speedup,
        "speedup_ratio": ratio,
        "agree": None if kb is None else kb == ours,
        "why": "" if ours and kb else "KernelBench: correctness_issue: Output | mismatch",
        "kernelbench_commit": "423217d9fda91e0c2d67e4a43bf62f96f6d104f1",
        "gpu": "NVIDIA H200",
        "torch": "2.11.0+cu130",
        "triton": "3.6.0",
        "command": "python benchmarks/kernelbench_crosscheck.py --pairs 30",
        "selection": "the rule",
        "kb_notes": ["openai (inert stand-in)"],
    }


def test_report_table_counts_and_section_replaced_not_duplicated(tmp_path: Path) -> None:
    rows = [
        _row("L1/1_A", "c1", True, True, 1.02),
        _row("L1/1_A", "c2", True, True, 0.98),
        _row("L2/1_B", "c3", True, True, 1.10),
        _row("L2/1_B", "c4", True, False, None),
        _row("L1/4_C", "c5", False, False, None),
        _row("L1/4_C", "c6", False, None, None),
    ]
    rows_path = tmp_path / "rows.jsonl"
    rows_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = tmp_path / "evaluator.md"
    page.write_text("# Evaluator\n\nIntro.\n\n## Summary\n\n- kept\n\n## Reading\n\n- also kept\n")
    for _ in range(2):
        done = _run("--report", str(rows_path), "--markdown", str(page))
        assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert text.count("## Cross-check with KernelBench") == 1
    assert "## Summary\n\n- kept" in text and "## Reading\n\n- also kept" in text
    assert text.index("## Reading") < text.index("## Cross-check with KernelBench")
    assert "verdicts agree: 4/5 pairs judged by both (1 not judged by KernelBench)" in text
    assert "median 1.020 over 3 pairs" in text and "goal within 5%: met" in text
    assert "2/3 pairs within 5%" in text
    assert "423217d9fda91e0c2d67e4a43bf62f96f6d104f1" in text
    assert "NVIDIA H200, torch 2.11.0+cu130" in text
    assert "`python benchmarks/kernelbench_crosscheck.py --pairs 30`" in text
    table = [line for line in text.splitlines() if line.startswith("| L")]
    assert len(table) == 6 + 2  # every pair, then the disagreement and the unjudged pair
    assert any("| `c4` |" in line and "Output \\| mismatch" in line for line in table)

    # The section in the middle of the page is replaced where it stands.
    middle = text.replace("## Reading\n\n- also kept\n", "")
    page.write_text(middle + "\n## Reading\n\n- also kept\n")
    rows_path.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    assert _run("--report", str(rows_path), "--markdown", str(page)).returncode == 0
    text = page.read_text()
    assert text.count("## Cross-check with KernelBench") == 1
    assert "verdicts agree: 3/3 pairs judged by both\n" in text
    assert text.rstrip().endswith("## Reading\n\n- also kept")


def test_the_report_names_verdicts_changed_since_the_export(crosscheck) -> None:
    same = _row("L1/1_A", "c1", True, True, 1.0)
    same["recorded"] = {"correct": True, "failure_kind": None, "speedup": 2.2,
                        "evaluator_version": "1"}  # fmt: skip
    changed = _row("L1/4_C", "c5", False, False, None)
    changed["recorded"] = {"correct": True, "failure_kind": None, "speedup": 1.5,
                           "evaluator_version": "2"}  # fmt: skip
    (line,) = crosscheck.against_recorded([same, changed, _row("L2/1_B", "c3", True, True, 1.0)])
    assert "(evaluator v1, v2): 1/2 unchanged" in line
    assert "L1/4_C `c5` correct -> fails (wrong_values)" in line
    assert "median 0.909, 0.909-0.909 over 1 pairs" in line
    assert crosscheck.against_recorded([_row("L2/1_B", "c3", True, True, 1.0)]) == []


def test_a_missing_kernelbench_checkout_is_refused_in_one_line(tmp_path: Path) -> None:
    done = _run(
        "--problems", str(tmp_path / "p.jsonl"),
        "--kernelbench", str(tmp_path / "nothing" / "src"),
        "--evaluations", str(EXPORT),
        "--out", str(tmp_path / "rows.jsonl"),
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--kernelbench" in lines[0] and "nothing" in lines[0]
    assert not (tmp_path / "rows.jsonl").exists()


STAND_IN_EVAL = textwrap.dedent(
    """
    class KernelExecResult:
        def __init__(self, **fields):
            self.compiled, self.correctness, self.metadata = True, True, {"hardware": "x"}
            self.runtime, self.runtime_stats, self.ref_runtime = 2.0, {"mean": 2.0}, 4.2
            self.ref_runtime_stats = {"mean": 4.2}
            self.__dict__.update(fields)

    def eval_kernel_against_ref(original_model_src, custom_model_src, seed_num=42,
            num_correct_trials=1, num_perf_trials=10, measure_performance=False,
            timing_method="cuda_event", verbose=False, build_dir=None, device=None,
            backend="cuda", precision=None, check_for_excessive_speedup=True):
        assert measure_performance and num_correct_trials == 5 and num_perf_trials == 100
        import os, pathlib
        calls = pathlib.Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).parent / "eval_calls.txt"
        with calls.open("a") as handle:
            print(repr(custom_model_src[:20]), file=handle)
        if "@triton.jit" in custom_model_src:
            assert backend == "triton"
            return KernelExecResult(correctness=False, runtime=-1.0,
                                    metadata={"correctness_issue": ValueError("Output mismatch")})
        return KernelExecResult()
    """
)
STAND_IN_TIMING = textwrap.dedent(
    """
    def measure_ref_program_time(ref_arch_name, ref_arch_src, num_warmup=5, num_trials=100,
            discard_first=1, timing_method="cuda_event", use_torch_compile=False,
            torch_compile_backend="inductor", torch_compile_options="default", device=None,
            verbose=False, precision="fp32"):
        import os, pathlib
        calls = pathlib.Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).parent / "ref_calls.txt"
        with calls.open("a") as handle:
            print(ref_arch_name, file=handle)
        return {"mean": 4.0, "std": 0.01, "num_trials": num_trials}
    """
)


def test_measuring_loop_records_resumes_and_reports(
    crosscheck, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = tmp_path / "kb"
    (kb / "src" / "kernelbench").mkdir(parents=True)
    (kb / "src" / "kernelbench" / "__init__.py").write_text("")
    (kb / "src" / "kernelbench" / "eval.py").write_text(STAND_IN_EVAL)
    (kb / "src" / "kernelbench" / "timing.py").write_text(STAND_IN_TIMING)
    (kb / "COMMIT").write_text("0123abcd 2026-03-05\n")
    problems = tmp_path / "problems.jsonl"
    with gzip.open(EXPORT, "rt") as handle, problems.open("w") as out:
        for line in handle:
            if line.startswith('{"problem":'):
                out.write(json.dumps(json.loads(line)["problem"]) + "\n")

    def ours(problem, source: str) -> dict:
        times = {"ref_ms": 4.0, "cand_ms": 2.0, "speedup": 2.0, "wall_s": 0.0}
        return {"correct": True, "failure_kind": None, "failure_message": "", **times}

    monkeypatch.setattr(crosscheck, "_ours", ours)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "caches" / "inductor"))
    (tmp_path / "caches").mkdir()
    out = tmp_path / "rows.jsonl"
    args = ["--problems", str(problems), "--kernelbench", str(kb / "src"),
            "--evaluations", str(EXPORT), "--pairs", "3", "--out", str(out)]  # fmt: skip
    assert crosscheck.main(args) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["compile", "other", "triton"]
    assert all(r["kernelbench_commit"] == "0123abcd" for r in rows)
    assert rows[0]["kb_correct"] is True and rows[0]["agree"] is True
    assert rows[0]["kb_speedup"] == pytest.approx(2.0) and rows[0]["speedup_ratio"] == 1.0
    assert rows[2]["kb_correct"] is False and rows[2]["agree"] is False
    assert "Output mismatch" in rows[2]["why"]
    # each row keeps the verdict the export recorded for its pair (evaluator v1 there)
    export = crosscheck.read_export(EXPORT)
    for row in rows:
        recorded = export.results[(row["problem_hash"], row["candidate_hash"])]
        assert row["recorded"]["correct"] == recorded["correct"]
        assert row["recorded"]["speedup"] == recorded["speedup"]
        assert row["recorded"]["evaluator_version"] == "1"
    assert crosscheck.main(args) == 0  # a rerun skips what is there
    assert len(out.read_text().splitlines()) == 3
    calls = tmp_path / "caches" / "eval_calls.txt"
    assert len(calls.read_text().splitlines()) == 3  # one KernelBench eval per pair
    # ... and one reference timing per problem: the two L1/1 pairs share theirs.
    referenced = (tmp_path / "caches" / "ref_calls.txt").read_text().splitlines()
    assert referenced == [rows[0]["problem"], rows[2]["problem"]]
    assert rows[1]["kb_ref"] == rows[0]["kb_ref"] and rows[1]["kb_ref_timed_per"] == "problem"
    page = tmp_path / "page.md"
    assert crosscheck.main(["--report", str(out), "--markdown", str(page)]) == 0
    assert "verdicts agree: 2/3 pairs judged by both" in page.read_text()
    assert "the export recorded for the same pairs (evaluator v1): 3/3 unchanged" in (
        page.read_text()
    )

    # --ours-again: one pair judged again by our evaluator alone, KernelBench's side kept.
    def ours_fails(problem, source: str) -> dict:
        return {"correct": False, "failure_kind": "out_of_memory", "failure_message": "m",
                "ref_ms": 4.0, "cand_ms": None, "speedup": None, "wall_s": 0.0}  # fmt: skip

    monkeypatch.setattr(crosscheck, "_ours", ours_fails)
    again = ["--evaluations", str(EXPORT), "--out", str(out), "--ours-again"]
    assert crosscheck.main([*again, rows[0]["candidate_hash"]]) == 0
    after = [json.loads(line) for line in out.read_text().splitlines()]
    assert after[1:] == rows[1:] and len(calls.read_text().splitlines()) == 3
    assert after[0]["ours"]["correct"] is False and after[0]["agree"] is False
    assert after[0]["kb"] == rows[0]["kb"] and after[0]["recorded"] == rows[0]["recorded"]
    assert after[0]["ours_again"]["before"] == rows[0]["ours"]
    assert after[0]["kernelbench_commit"] == "0123abcd"
    assert crosscheck.main([*again, "0000"]) == 2  # no such pair: one line, nothing changed
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    monkeypatch.setattr(crosscheck, "_ours", ours)

    # --warm: each pair's eval runs once more before the timed pass, in parallel workers.
    warm_out = tmp_path / "warm.jsonl"
    warm_args = [*args[:-1], str(warm_out), "--warm", "2"]
    assert crosscheck.main(warm_args) == 0
    assert len(calls.read_text().splitlines()) == 3 + 2 * 3
    warm_rows = [json.loads(line) for line in warm_out.read_text().splitlines()]
    assert [r["kb_correct"] for r in warm_rows] == [r["kb_correct"] for r in rows]

    # Without --problems, the export's own problem sources are used.
    alone = tmp_path / "alone.jsonl"
    args = [*args[2:-4], "--pairs", "1", "--out", str(alone)]
    assert crosscheck.main(args) == 0
    assert [json.loads(line)["problem"] for line in alone.read_text().splitlines()] == [
        rows[0]["problem"]
    ]


def test_compile_caches_are_shared_unless_the_caller_chose(
    crosscheck, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "")  # unset in effect; restored afterwards
    monkeypatch.setenv("TRITON_CACHE_DIR", "/chosen/triton")
    chosen = crosscheck.shared_compile_caches(tmp_path)
    assert chosen == {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
    assert os.environ["TRITON_CACHE_DIR"] == "/chosen/triton"


@pytest.mark.parametrize(
    ("card", "gpu", "median"),
    [  # sessions 35-36 on an H100; session 40 on the H200
        ("h100", "NVIDIA H100 80GB HBM3", "1.005"),
        ("h200", "NVIDIA H200", "1.000"),
    ],
)
def test_the_committed_v9_rows_are_the_pages_tables(
    crosscheck, card: str, gpu: str, median: str
) -> None:
    """Every one of the 30 pairs judged under v9 on each card, as evaluator.md shows them."""
    rows = crosscheck.read_jsonl(
        ROOT / f"docs/results/data/kernelbench_crosscheck_rows_v9_{card}.jsonl"
    )
    section = crosscheck.report_section(rows)
    page = (ROOT / "docs/results/evaluator.md").read_text()
    table = [line for line in section.splitlines() if line.startswith("| L")]
    assert len(table) == 30 and all(line in page for line in table)
    assert {row["ours"]["evaluator_version"] for row in rows} == {"9"}
    assert {row["gpu"] for row in rows} == {gpu}
    assert "verdicts agree: 30/30 pairs judged by both" in section
    assert f"median {median} over 30 pairs" in section
