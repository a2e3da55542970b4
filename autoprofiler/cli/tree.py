"""The ``autoprofiler tree`` commands: show, validate and render a profiling tree.

TREE is a JSON tree file, the name of a fixed tree (none, static, SpeedOfLight, ...) or groups
joined by +; it is checked as it is parsed (a bad one is one error line, exit code 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from autoprofiler.cli.console import fail
from autoprofiler.cli.options import JsonOption, checked, output_file, tree_spec
from autoprofiler.tree import ProfilingTree, TreeError, resolve_tree
from autoprofiler.tree.export import export_text
from autoprofiler.tree.render import (
    STDOUT,
    SUFFIXES,
    TreeFormat,
    format_for_path,
    parse_format,
    render_tree,
)

tree_app = typer.Typer(
    help="Show, check and draw profiling trees (a JSON file or a fixed tree name).",
    no_args_is_help=True,
)

TreeArgument = Annotated[
    str,
    typer.Argument(
        callback=checked(tree_spec), help="A tree JSON file, a fixed tree name, or groups a+b."
    ),
]


def _load(spec: str) -> ProfilingTree:
    return resolve_tree(spec).validate()


def _summary(tree: ProfilingTree) -> str:
    return (
        f"{tree.size} nodes, depth {tree.depth}, {len(tree.groups())} groups, "
        f"hash {tree.content_hash}"
    )


@tree_app.command()
def show(
    tree: TreeArgument,
    max_depth: Annotated[
        int | None, typer.Option("--max-depth", min=0, help="Stop drawing below this depth.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Print the tree as indented text (or its JSON document)."""
    loaded = _load(tree)
    if as_json:
        typer.echo(json.dumps(loaded.to_dict(), indent=1))
        return
    if loaded.description:
        typer.echo(loaded.description)
    typer.echo(export_text(loaded, max_depth), nl=False)
    typer.echo(_summary(loaded))


@tree_app.command()
def validate(tree: TreeArgument) -> None:
    """Check the tree against the metric-group catalogue."""
    typer.echo(f"ok: {tree}: {_summary(_load(tree))}")


@tree_app.command()
def render(
    tree: TreeArgument,
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            callback=checked(output_file),
            help=f"The picture file ({', '.join(SUFFIXES)}), or - for stdout.",
        ),
    ],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            callback=checked(parse_format),
            help=f"{', '.join(f.value for f in TreeFormat)} (default: from the suffix of -o; "
            "svg for - or no suffix).",
        ),
    ] = None,
) -> None:
    """Draw the tree into -o: SVG, PNG or PDF (the last two need matplotlib), Mermaid or text;
    -o - writes it to stdout (a binary picture only when stdout is not a terminal)."""
    loaded = _load(tree)
    try:
        chosen = format_for_path(output, fmt)
        picture = render_tree(loaded, chosen)
    except TreeError as exc:
        fail(str(exc))
    if str(output) == STDOUT:
        if chosen.binary and sys.stdout.isatty():
            fail(f"a {chosen.value} picture is binary: redirect stdout, or give -o FILE")
        stream = typer.get_binary_stream("stdout")
        stream.write(picture)
        stream.flush()
        return
    try:
        output.write_bytes(picture)
    except OSError as exc:
        fail(f"{output}: cannot write: {exc.strerror or exc}")
    typer.echo(f"wrote {output} ({chosen.value})")
