"""Fixed configurations, and the ``tree`` commands through typer's test runner."""

import os
import pty
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from autoprofiler.cli.main import app
from autoprofiler.tree import FIXED_TREES, TreeError, fixed_tree, resolve_tree

from .conftest import EXPERT

runner = CliRunner()


@pytest.mark.parametrize(
    ("name", "groups"),
    [
        ("none", ()),
        ("static", ("static",)),
        ("SpeedOfLight", ("ncu.SpeedOfLight",)),
        ("basic", ("ncu.set.basic",)),
        ("detailed", ("ncu.set.detailed",)),
        ("full", ("ncu.set.full",)),
        ("curated24", ("ncu.curated24",)),
    ],
)
def test_fixed_trees(name, groups):
    tree = FIXED_TREES[name]
    assert tree.validate() is tree
    assert tree.size == 1 and tree.root.is_leaf and tree.root.collect == groups
    assert fixed_tree(name) == tree


def test_fixed_tree_errors_and_resolution(tmp_path):
    assert set(FIXED_TREES) == {
        "none",
        "static",
        "SpeedOfLight",
        "basic",
        "detailed",
        "full",
        "curated24",
    }
    with pytest.raises(TreeError, match="no fixed tree 'fast'"):
        fixed_tree("fast")
    assert resolve_tree("full") == FIXED_TREES["full"]
    assert resolve_tree(EXPERT).size == 5
    with pytest.raises(TreeError, match="no such tree file, nor a fixed tree name"):
        resolve_tree(tmp_path / "missing.json")


def _run(*args: str):
    result = runner.invoke(app, ["tree", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_show():
    result = _run("show", str(EXPERT))
    assert result.exit_code == 0
    assert "|   |--- true: n3: collect ncu.ComputeWorkloadAnalysis" in result.stdout
    assert "5 nodes, depth 2, 7 groups, hash a069f7c6e8177319" in result.stdout
    result = _run("show", str(EXPERT), "--max-depth", "0")
    assert "4 more nodes (truncated at depth 0)" in result.stdout
    assert "n0: collect ncu.set.full" in _run("show", "full").stdout


def test_validate():
    result = _run("validate", str(EXPERT))
    assert result.exit_code == 0
    assert result.stdout.startswith(f"ok: {EXPERT}: 5 nodes")


@pytest.mark.parametrize(
    ("fmt", "suffix", "check"),
    [
        (None, ".svg", lambda text: ET.fromstring(text.encode()).tag.endswith("svg")),
        ("svg", ".out", lambda text: text.startswith("<?xml")),
        (None, ".mmd", lambda text: text.startswith("flowchart TD")),
        ("mermaid", ".md", lambda text: text.startswith("flowchart TD")),
        ("text", ".svg", lambda text: text.startswith("n0: collect static")),
        (None, ".txt", lambda text: text.startswith("n0: collect static")),
    ],
)
def test_render(tmp_path, fmt, suffix, check):
    out = tmp_path / f"expert{suffix}"
    args = ["render", str(EXPERT), "-o", str(out)] + (["--format", fmt] if fmt else [])
    result = _run(*args)
    assert result.exit_code == 0, result.output
    assert check(out.read_text())
    assert result.stdout.startswith(f"wrote {out}")


def _bad_tree(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"schema": "autoprofiler.tree", "version": 1, "root": {"id": "n0", "op": 1}}')
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (lambda tmp: ["validate", str(_bad_tree(tmp))], "root: unknown field 'op'"),
        (lambda tmp: ["show", str(_bad_tree(tmp))], "root: unknown field 'op'"),
        (lambda tmp: ["validate", str(tmp / "nope.json")], "no such tree file"),
        (
            lambda tmp: ["render", str(EXPERT), "-o", str(tmp / "no" / "dir" / "x.svg")],
            "cannot write",
        ),
    ],
)
def test_errors_are_one_red_line(tmp_path, args, message):
    result = _run(*args(tmp_path))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_errors_are_red(tmp_path):
    result = runner.invoke(
        app, ["tree", "validate", str(tmp_path / "x.json")], env={"FORCE_COLOR": "1"}
    )
    assert result.exit_code == 2
    assert "\x1b[31m" in result.stderr


def test_combined_fixed_trees():
    tree = resolve_tree("SpeedOfLight+Occupancy+ncu.LaunchStats")
    assert tree.root.collect == ("ncu.SpeedOfLight", "ncu.Occupancy", "ncu.LaunchStats")
    assert resolve_tree("static+full+static").root.collect == ("static", "ncu.set.full")
    with pytest.raises(TreeError, match="'Foo' is neither a fixed tree name nor a metric group"):
        resolve_tree("SpeedOfLight+Foo")


@pytest.mark.parametrize(
    ("args", "signature"),
    [
        (["-o", "tree.png"], b"\x89PNG\r\n\x1a\n"),
        (["-o", "tree.pdf"], b"%PDF"),
        (["-o", "tree.out", "--format", "png"], b"\x89PNG\r\n\x1a\n"),
        (["-o", "tree.svg", "-f", "pdf"], b"%PDF"),
    ],
)
def test_render_draws_png_and_pdf_when_asked(tmp_path, monkeypatch, args, signature):
    monkeypatch.chdir(tmp_path)
    result = _run("render", str(EXPERT), *args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / args[1]).read_bytes().startswith(signature)
    assert result.stdout == f"wrote {args[1]} ({'png' if b'PNG' in signature else 'pdf'})\n"


@pytest.mark.parametrize(
    ("extra", "start"),
    [([], b"<?xml"), (["-f", "text"], b"n0: collect static"), (["-f", "png"], b"\x89PNG")],
)
def test_render_to_stdout_writes_no_file(tmp_path, monkeypatch, extra, start):
    monkeypatch.chdir(tmp_path)
    result = _run("render", str(EXPERT), "-o", "-", *extra)
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes.startswith(start)
    assert list(tmp_path.iterdir()) == []  # no file named "-"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "tree.gif"], "cannot tell a tree format from the suffix '.gif'"),
        (["-o", "tree.svg", "-f", "jpeg"], "unknown tree format 'jpeg'"),
    ],
)
def test_render_unknown_formats_are_one_line(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = _run("render", str(EXPERT), *args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_render_refuses_a_binary_picture_to_a_terminal(tmp_path):
    main, terminal = pty.openpty()
    command = [sys.executable, "-m", "autoprofiler", "tree", "render", str(EXPERT), "-o", "-"]
    done = subprocess.run(
        [*command, "-f", "png"], stdout=terminal, stderr=subprocess.PIPE, cwd=tmp_path, timeout=60
    )
    os.close(terminal)
    os.close(main)
    assert done.returncode == 2
    assert done.stderr.decode().startswith("error: a png picture is binary")
    assert done.stderr.count(b"\n") == 1
