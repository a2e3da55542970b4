"""The ``autoprofiler tree`` commands: show, validate and render a profiling tree.

TREE is a JSON tree file, the name of a fixed tree (none, static, SpeedOfLight, ...) or groups
joined by +; it is checked as it is parsed (a bad one is one error line, exit code 2).
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated

import typer

from autoprofiler.cli.console import fail
from autoprofiler.cli.options import JsonOption, OutputFileOption, checked, tree_spec
from autoprofiler.tree import ProfilingTree, resolve_tree
from autoprofiler.tree.export import export_mermaid, export_svg, export_text

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


class Format(str, Enum):
    svg = "svg"
    mermaid = "mermaid"
    text = "text"


_EXPORTERS = {Format.svg: export_svg, Format.mermaid: export_mermaid, Format.text: export_text}
_FORMAT_BY_SUFFIX = {".svg": Format.svg, ".mmd": Format.mermaid, ".txt": Format.text}


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
    output: OutputFileOption,
    fmt: Annotated[
        Format | None,
        typer.Option("--format", "-f", help="Picture format (default: from the suffix, svg)."),
    ] = None,
) -> None:
    """Draw the tree as SVG, Mermaid or text into -o."""
    loaded = _load(tree)
    chosen = fmt or _FORMAT_BY_SUFFIX.get(output.suffix.lower(), Format.svg)
    try:
        output.write_text(_EXPORTERS[chosen](loaded), encoding="utf-8")
    except OSError as exc:
        fail(f"{output}: cannot write: {exc.strerror or exc}")
    typer.echo(f"wrote {output} ({chosen.value})")
