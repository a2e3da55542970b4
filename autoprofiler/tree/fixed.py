"""Fixed configurations: single-leaf trees that always collect the same groups (the baselines)."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from autoprofiler.tree.model import Node, ProfilingTree, TreeError

FIXED_GROUPS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType(
    {
        "none": (),
        "static": ("static",),
        "SpeedOfLight": ("ncu.SpeedOfLight",),
        "basic": ("ncu.set.basic",),
        "detailed": ("ncu.set.detailed",),
        "full": ("ncu.set.full",),
        "curated24": ("ncu.curated24",),
    }
)


def fixed_tree(name: str) -> ProfilingTree:
    """The single-leaf tree named ``name`` (one of ``FIXED_GROUPS``)."""
    if name not in FIXED_GROUPS:
        raise TreeError(f"no fixed tree {name!r} (known: {', '.join(FIXED_GROUPS)})")
    groups = FIXED_GROUPS[name]
    return ProfilingTree(
        Node("n0", groups), description=f"fixed: collect {', '.join(groups) or 'nothing'}"
    )


FIXED_TREES: MappingProxyType[str, ProfilingTree] = MappingProxyType(
    {name: fixed_tree(name) for name in FIXED_GROUPS}
)


def resolve_tree(spec: str | Path) -> ProfilingTree:
    """The tree in the JSON file ``spec`` or, when no such file exists, the fixed tree ``spec``."""
    from autoprofiler.tree.serialize import load_tree

    path = Path(spec)
    if path.exists():
        return load_tree(path)
    if str(spec) in FIXED_TREES:
        return FIXED_TREES[str(spec)]
    known = ", ".join(FIXED_TREES)
    raise TreeError(f"{spec}: no such tree file, nor a fixed tree name (fixed: {known})")
