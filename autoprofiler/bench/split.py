"""The bench's train/test split: seeded and stratified by KernelBench level, or explicit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import attrgetter

from autoprofiler.learn.split import split_problems
from autoprofiler.problem import Problem


def _allocate(sizes: Sequence[int], total: int) -> list[int]:
    """Split ``total`` over strata of ``sizes`` in proportion (largest remainder first)."""
    whole = sum(sizes)
    shares = [total * size / whole for size in sizes]
    counts = [math.floor(share) for share in shares]
    by_remainder = sorted(range(len(sizes)), key=lambda i: (counts[i] - shares[i], i))
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return counts


def stratified_split(
    problems: Sequence[Problem],
    train: float | int | Sequence[str] = 0.5,
    test: Sequence[str] = (),
    seed: int = 0,
) -> tuple[list[Problem], list[Problem]]:
    """``(train, test)``, both non-empty and sorted by problem key.

    ``test`` names the test problems (the rest train); otherwise ``train`` is a fraction in
    (0, 1), a count, or the names of the training problems (the rest test). A fraction or a
    count draws the training problems at random, seeded, in proportion from each KernelBench
    level (problems without a level form one group), independent of the order of
    ``problems``. Raises ``ValueError`` (one line) on a split that leaves a side empty.
    """
    unique = sorted({p.content_hash: p for p in problems}.values(), key=attrgetter("key"))
    if test:
        named, rest = split_problems(unique, list(test), seed)
        return _checked(rest, named)
    if isinstance(train, str) or not isinstance(train, (int, float)):
        return _checked(*split_problems(unique, list(train), seed))
    if isinstance(train, float):
        if not 0 < train < 1:
            raise ValueError(f"a training fraction must be in (0, 1), not {train}")
        count = round(train * len(unique))
    else:
        count = int(train)
    if not 1 <= count < len(unique):
        raise ValueError(f"cannot train on {count} of {len(unique)} problems and test on the rest")
    levels: dict[int | None, list[Problem]] = {}
    for problem in unique:
        levels.setdefault(problem.level, []).append(problem)
    strata = list(levels.values())
    chosen: list[Problem] = []
    for stratum, size in zip(strata, _allocate([len(s) for s in strata], count)):
        if size:
            chosen.extend(split_problems(stratum, size, seed)[0])
    picked = {p.content_hash for p in chosen}
    return _checked(chosen, [p for p in unique if p.content_hash not in picked])


def _checked(train: list[Problem], test: list[Problem]) -> tuple[list[Problem], list[Problem]]:
    if not train or not test:
        empty = "training" if not train else "test"
        raise ValueError(f"the split leaves no {empty} problems")
    return sorted(train, key=attrgetter("key")), sorted(test, key=attrgetter("key"))
