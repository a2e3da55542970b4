"""Splitting problems into training and held-out validation sets, seeded and repeatable."""

from __future__ import annotations

import random
from collections.abc import Sequence
from operator import attrgetter

from autoprofiler.problem import Problem
from autoprofiler.store import content_key


def split_problems(
    problems: Sequence[Problem], train: float | int | Sequence[str], seed: int = 0
) -> tuple[list[Problem], list[Problem]]:
    """``(train, validation)``: the rest of ``problems`` validate.

    ``train`` is a fraction in (0, 1], a count, or problem names (``name`` or ``key``). A
    fraction or count draws the training problems at random, seeded by ``seed`` and
    independent of the order of ``problems``. Both lists come back sorted by problem key.
    """
    unique = sorted({p.content_hash: p for p in problems}.values(), key=lambda p: p.content_hash)
    if isinstance(train, str) or not isinstance(train, (int, float)):
        names = set(train)
        chosen = [p for p in unique if p.name in names or p.key in names]
        unknown = names - {p.name for p in chosen} - {p.key for p in chosen}
        if unknown:
            raise ValueError(f"no problem named {', '.join(sorted(unknown))}")
    else:
        if isinstance(train, float) and not 0 < train <= 1:
            raise ValueError(f"a training fraction must be in (0, 1], not {train}")
        count = round(train * len(unique)) if isinstance(train, float) else int(train)
        if not 1 <= count <= len(unique):
            raise ValueError(f"cannot train on {count} of {len(unique)} problems")
        shuffled = list(unique)
        random.Random(content_key("split", seed)).shuffle(shuffled)
        chosen = shuffled[:count]
    picked = {p.content_hash for p in chosen}
    validation = [p for p in unique if p.content_hash not in picked]
    return sorted(chosen, key=attrgetter("key")), sorted(validation, key=attrgetter("key"))
