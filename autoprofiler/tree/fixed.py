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


def combined_tree(spec: str) -> ProfilingTree:
    """The single-leaf tree of ``A+B+...``: each part a fixed name or a catalogue group (with or
    without its ``ncu.`` prefix), e.g. ``SpeedOfLight+Occupancy+LaunchStats``."""
    from autoprofiler.profile.catalogue import UnknownGroupError, get_group

    groups: list[str] = []
    for part in (piece.strip() for piece in spec.split("+")):
        if part in FIXED_GROUPS:
            named = FIXED_GROUPS[part]
        else:
            try:
                named = (get_group(part).name,)
            except UnknownGroupError:
                try:
                    named = (get_group(f"ncu.{part}").name,)
                except UnknownGroupError:
                    raise TreeError(
                        f"{spec}: {part!r} is neither a fixed tree name nor a metric group"
                    ) from None
        groups.extend(group for group in named if group not in groups)
    tree = ProfilingTree(Node("n0", tuple(groups)), description=f"fixed: collect {spec}")
    return tree.validate()


def resolve_tree(spec: str | Path) -> ProfilingTree:
    """The tree in the JSON file ``spec`` or, when no such file exists, the fixed tree ``spec``
    (a name of ``FIXED_TREES``, or names joined by ``+``: :func:`combined_tree`)."""
    from autoprofiler.tree.serialize import load_tree

    path = Path(spec)
    if path.exists():
        return load_tree(path)
    if str(spec) in FIXED_TREES:
        return FIXED_TREES[str(spec)]
    if "+" in str(spec):
        return combined_tree(str(spec))
    known = ", ".join(FIXED_TREES)
    raise TreeError(
        f"{spec}: no such tree file, nor a fixed tree name (fixed: {known}; join them or metric"
        " groups with +)"
    )
