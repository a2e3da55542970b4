"""The ``autoprofiler tree`` commands: show, validate and render a profiling tree.

TREE is a JSON tree file or the name of a fixed tree (none, static, SpeedOfLight, ...).
Errors print one red line and exit with code 2.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from autoprofiler.tree.export import export_mermaid, export_svg, export_text
from autoprofiler.tree.fixed import resolve_tree
from autoprofiler.tree.model import ProfilingTree, TreeError

tree_app = typer.Typer(
    help="Show, check and draw profiling trees (a JSON file or a fixed tree name).",
    no_args_is_help=True,
)

TreeArg = Annotated[str, typer.Argument(help="A tree JSON file, or a fixed tree name.")]


class Format(str, Enum):
    svg = "svg"
    mermaid = "mermaid"
    text = "text"


_EXPORTERS = {Format.svg: export_svg, Format.mermaid: export_mermaid, Format.text: export_text}
_FORMAT_BY_SUFFIX = {".svg": Format.svg, ".mmd": Format.mermaid, ".txt": Format.text}


def _fail(message: str) -> NoReturn:
    Console(stderr=True, soft_wrap=True).print(Text(f"error: {message}", style="red"))
    raise typer.Exit(2)


def _load(spec: str) -> ProfilingTree:
    try:
        return resolve_tree(spec).validate()
    except TreeError as exc:
        _fail(str(exc))


def _summary(tree: ProfilingTree) -> str:
    return (
        f"{tree.size} nodes, depth {tree.depth}, {len(tree.groups())} groups, "
        f"hash {tree.content_hash}"
    )


@tree_app.command()
def show(
    tree: TreeArg,
    max_depth: Annotated[
        int | None, typer.Option("--max-depth", min=0, help="Stop drawing below this depth.")
    ] = None,
) -> None:
    """Print the tree as indented text."""
    loaded = _load(tree)
    if loaded.description:
        typer.echo(loaded.description)
    typer.echo(export_text(loaded, max_depth), nl=False)
    typer.echo(_summary(loaded))


@tree_app.command()
def validate(tree: TreeArg) -> None:
    """Check the tree against the metric-group catalogue."""
    typer.echo(f"ok: {tree}: {_summary(_load(tree))}")


@tree_app.command()
def render(
    tree: TreeArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="File to write.")],
    fmt: Annotated[
        Format | None,
        typer.Option("--format", "-f", help="Picture format (default: from OUT's suffix, svg)."),
    ] = None,
) -> None:
    """Draw the tree as SVG, Mermaid or text."""
    loaded = _load(tree)
    chosen = fmt or _FORMAT_BY_SUFFIX.get(out.suffix.lower(), Format.svg)
    try:
        out.write_text(_EXPORTERS[chosen](loaded), encoding="utf-8")
    except OSError as exc:
        _fail(f"{out}: cannot write: {exc.strerror or exc}")
    typer.echo(f"wrote {out} ({chosen.value})")
