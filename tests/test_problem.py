"""Problem loaders: files, folders, KernelBench checkouts and JSONL, with bad sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoprofiler.problem import ProblemError, load_problems

from .conftest import SCALE_PROBLEM

BAD_SOURCES = {
    "no_model.py": "import torch\ndef get_inputs():\n    return []\n",
    "no_inputs.py": "import torch.nn as nn\nclass Model(nn.Module):\n    pass\n",
    "syntax.py": "class Model(:\n    pass\n",
    "raises.py": "import torch.nn as nn\nraise ValueError('boom at import')\n"
    "class Model(nn.Module):\n    pass\ndef get_inputs():\n    return []\n",
}


def test_single_file(tmp_path: Path):
    path = tmp_path / "7_scale.py"
    path.write_text(SCALE_PROBLEM)
    report = load_problems(path)
    assert [p.name for p in report.problems] == ["7_scale"]
    assert report.problems[0].problem_id == 7
    assert report.problems[0].content_hash == load_problems(path).problems[0].content_hash


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("no_model.py", "missing Model"),
        ("no_inputs.py", "missing get_inputs"),
        ("syntax.py", "syntax error at line 1"),
        ("raises.py", "raises at import: ValueError: boom at import"),
    ],
)
def test_bad_file_gives_one_line_naming_it(tmp_path: Path, name: str, words: str):
    path = tmp_path / name
    path.write_text(BAD_SOURCES[name])
    report = load_problems(path)
    assert not report.problems
    (message,) = report.errors
    assert message.startswith(str(path)) and words in message and "\n" not in message


def test_folder_keeps_good_files_and_reports_bad(tmp_path: Path):
    (tmp_path / "1_good.py").write_text(SCALE_PROBLEM)
    (tmp_path / "2_also_good.py").write_text(SCALE_PROBLEM.replace("16, FEATURES", "8, FEATURES"))
    for name, text in BAD_SOURCES.items():
        (tmp_path / name).write_text(text)
    report = load_problems(tmp_path)
    assert [p.name for p in report.problems] == ["1_good", "2_also_good"]
    assert len(report.errors) == len(BAD_SOURCES)
    assert [p.name for p in load_problems(tmp_path, ids=[2]).problems] == ["2_also_good"]


def test_kernelbench_checkout_selects_levels_and_ids(tmp_path: Path):
    for level in (1, 2):
        folder = tmp_path / "KernelBench" / f"level{level}"
        folder.mkdir(parents=True)
        for number in (1, 2, 10):
            text = SCALE_PROBLEM.replace("FEATURES = 32", f"FEATURES = {level * 100 + number}")
            (folder / f"{number}_p{number}.py").write_text(text)
    everything = load_problems(tmp_path)
    assert len(everything.problems) == 6
    assert [p.key for p in everything.problems[:3]] == ["L1/1_p1", "L1/2_p2", "L1/10_p10"]
    chosen = load_problems(tmp_path, levels=[2], ids=[2, 10])
    assert [(p.level, p.problem_id) for p in chosen.problems] == [(2, 2), (2, 10)]


def test_jsonl_rows_and_bad_rows(tmp_path: Path):
    path = tmp_path / "problems.jsonl"
    rows = [
        {"level": 1, "problem_id": 1, "name": "1_a", "source": SCALE_PROBLEM},
        {"level": 2, "problem_id": 5, "name": "5_b", "source": SCALE_PROBLEM + "\n# b\n"},
        {"level": 2, "problem_id": 6, "name": "6_bad", "source": BAD_SOURCES["syntax.py"]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{not json\n")
    report = load_problems(path)
    assert [p.key for p in report.problems] == ["L1/1_a", "L2/5_b"]
    assert len(report.errors) == 2
    assert any(":3: syntax error" in e for e in report.errors)
    assert any(":4: not a problem row" in e for e in report.errors)
    assert [p.key for p in load_problems(path, levels=[2], ids=[5]).problems] == ["L2/5_b"]


def test_missing_path_and_empty_folder(tmp_path: Path):
    with pytest.raises(ProblemError, match="no such file"):
        load_problems(tmp_path / "nowhere")
    with pytest.raises(ProblemError, match=r"no \.py problem files"):
        load_problems(tmp_path)


def test_shared_kernelbench_jsonl_loads_when_present():
    path = Path(__file__).resolve().parents[2] / "shared" / "kernelbench" / "problems.jsonl"
    if not path.exists():
        pytest.skip("the shared KernelBench JSONL is not beside this checkout")
    report = load_problems(path, levels=[1], ids=[1, 23])
    assert [p.problem_id for p in report.problems] == [1, 23] and not report.errors
