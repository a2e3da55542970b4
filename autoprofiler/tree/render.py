"""One entry point for every picture of a tree: the format named or read from a file's suffix,
the picture as bytes (text formats UTF-8), ready for a file or stdout.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from enum import Enum
from pathlib import PurePath

from autoprofiler.tree.export import export_mermaid, export_svg, export_text
from autoprofiler.tree.model import ProfilingTree, TreeError

logger = logging.getLogger(__name__)

STDOUT = "-"


class TreeFormat(str, Enum):
    """A picture format of a tree; ``png`` and ``pdf`` are binary and need matplotlib."""

    svg = "svg"
    png = "png"
    pdf = "pdf"
    mermaid = "mermaid"
    text = "text"

    @property
    def binary(self) -> bool:
        return self in (TreeFormat.png, TreeFormat.pdf)


DEFAULT_FORMAT = TreeFormat.svg
SUFFIXES = {
    ".svg": TreeFormat.svg,
    ".png": TreeFormat.png,
    ".pdf": TreeFormat.pdf,
    ".mmd": TreeFormat.mermaid,
    ".mermaid": TreeFormat.mermaid,
    ".txt": TreeFormat.text,
}
_TEXT_EXPORTERS: dict[TreeFormat, Callable[[ProfilingTree], str]] = {
    TreeFormat.svg: export_svg,
    TreeFormat.mermaid: export_mermaid,
    TreeFormat.text: export_text,
}


def parse_format(name: str | TreeFormat) -> TreeFormat:
    """The format called ``name`` (any case); ``TreeError`` when there is none."""
    try:
        return TreeFormat(name.lower())
    except ValueError:
        known = ", ".join(f.value for f in TreeFormat)
        raise TreeError(f"unknown tree format {name!r} (expected one of {known})") from None


def format_for_path(
    path: str | os.PathLike[str] | None, explicit_fmt: str | TreeFormat | None = None
) -> TreeFormat:
    """The format to write ``path`` in: ``explicit_fmt`` when given, else from the suffix.

    A path with no suffix, ``-`` (stdout) or no path means svg; an unknown suffix or format
    name is a ``TreeError`` with a one-line message.
    """
    suffix = "" if path is None or str(path) == STDOUT else PurePath(path).suffix.lower()
    if explicit_fmt is not None:
        chosen = parse_format(explicit_fmt)
        if SUFFIXES.get(suffix, chosen) is not chosen:
            logger.warning("writing %s to %s, as asked, despite its suffix", chosen.value, path)
        return chosen
    if not suffix:
        return DEFAULT_FORMAT
    if suffix not in SUFFIXES:
        known = ", ".join(SUFFIXES)
        raise TreeError(
            f"cannot tell a tree format from the suffix {suffix!r} of {path} "
            f"(known: {known}); name the format"
        )
    return SUFFIXES[suffix]


def render_tree(tree: ProfilingTree, fmt: str | TreeFormat) -> bytes:
    """``tree`` drawn in ``fmt``, as the bytes of the file (svg, mermaid and text in UTF-8).

    ``TreeError`` for an unknown format, or for png/pdf when matplotlib is not installed.
    """
    chosen = parse_format(fmt)
    if not chosen.binary:
        return _TEXT_EXPORTERS[chosen](tree).encode("utf-8")
    try:
        from autoprofiler.tree.image import draw_image
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "matplotlib":
            raise
        raise TreeError(
            f"a {chosen.value} picture needs matplotlib, which is not installed: "
            "pip install 'autoprofiler[report]' (or write svg)"
        ) from exc
    return draw_image(tree, chosen.value)
