"""Studies and trials, kept in the store so that a study can be killed and resumed.

A study is named; its ``StudySpec`` (what it learns from and how) is written once when it is
created. Each trial (one proposed edit, scored or not, accepted or not, and why) is one record,
written once as it completes and never changed. The trial log is the study's whole state: the
current tree is the start tree with the accepted edits applied in order, so a run killed at any
point (SIGKILL included) loses at most the trial it was working on, and a resumed run carries on
after the last completed one.

Storage contract: records live in the store's key-value space (``learn.study``: the spec under
the study name; ``learn.trial``: trial ``n`` under ``"<study>/<n, 6 digits>"``). Each record is
written in one SQLite transaction. One process drives a study at a time; ``add_trial`` refuses
to overwrite a trial, which is what a second process on the same study would try.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from autoprofiler.learn.objective import TreeScore
from autoprofiler.store import Store

log = logging.getLogger(__name__)

STUDY_SPACE = "learn.study"
TRIAL_SPACE = "learn.trial"
STUDY_VERSION = 1
# Fields of a spec that may differ when a study is resumed.
_MAY_CHANGE = frozenset({"name", "created"})


class StudyError(RuntimeError):
    """A study that cannot be created, resumed or extended; the message is one line."""


class TrialState(str, Enum):
    """How a trial ended: its tree replaced the incumbent, did not, or was never scored."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    INVALID = "invalid"


@dataclass(frozen=True)
class StudySpec:
    """What a study learns from and how; everything here must match when it is resumed.

    ``train`` and ``validation`` are problem content hashes; ``start_tree`` the start tree's
    JSON document; ``evaluation`` the evaluation device label and configuration hash.
    """

    name: str
    start_tree: dict[str, Any]
    train: tuple[str, ...]
    validation: tuple[str, ...]
    budget_s: float | None
    objective: dict[str, Any]
    rewriter: str
    proposer: str
    recorded_device: str
    evaluation: dict[str, Any]
    seed: int
    version: int = STUDY_VERSION
    created: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["train"] = list(self.train)
        data["validation"] = list(self.validation)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StudySpec:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["train"] = tuple(known["train"])
        known["validation"] = tuple(known["validation"])
        return cls(**known)

    def mismatch(self, other: StudySpec) -> str | None:
        """The first setting in which ``other`` differs from this spec (None when none)."""
        mine, theirs = self.to_dict(), other.to_dict()
        for key in mine:
            if key not in _MAY_CHANGE and mine[key] != theirs.get(key):
                return key
        return None


@dataclass(frozen=True)
class Trial:
    """One proposed edit and what became of it.

    ``round`` is the proposer call it came from, ``index`` its place in that round's
    ``round_size`` proposals. ``edit`` is the edit's JSON (None when the proposal could not be
    read; ``proposed`` then holds what was proposed). ``score`` is the edited tree's score on
    the training problems (None when it was not scored), ``incumbent`` the objective value it
    was compared with, ``margin`` the relative noise margin applied, and ``validation`` the
    held-out score, computed for accepted trees only.
    """

    number: int
    round: int
    index: int
    round_size: int
    state: TrialState
    reason: str
    edit: dict[str, Any] | None
    parent_hash: str
    tree_hash: str = ""
    proposed: Any = None
    score: TreeScore | None = None
    incumbent: float | None = None
    margin: float | None = None
    validation: TreeScore | None = None
    duration_s: float = 0.0

    @property
    def accepted(self) -> bool:
        return self.state is TrialState.ACCEPTED

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        data["score"] = None if self.score is None else self.score.to_dict()
        data["validation"] = None if self.validation is None else self.validation.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trial:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["state"] = TrialState(known["state"])
        for name in ("score", "validation"):
            if known.get(name) is not None:
                known[name] = TreeScore.from_dict(known[name])
        return cls(**known)


def _trial_key(study: str, number: int) -> str:
    return f"{study}/{number:06d}"


class StudyStorage:
    """Studies and their trials in ``store`` (see the module docstring for the contract)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, name: str) -> StudySpec | None:
        """The spec of study ``name``, or None when there is no such study."""
        data = self.store.get(STUDY_SPACE, name)
        return None if data is None else StudySpec.from_dict(data)

    def open(self, spec: StudySpec, resume: bool) -> StudySpec:
        """Create the study ``spec.name``, or (``resume``) check that it matches ``spec``.

        Resuming a study that does not exist yet starts it (a run killed before it wrote its
        spec wrote no trial either, so nothing is lost). Raises ``StudyError`` when creating a
        study that exists or resuming one with different settings.
        """
        stored = self.get(spec.name)
        if stored is None:
            if resume:
                log.info("no study %r in %s yet: starting it", spec.name, self.store.path)
            self.store.put(STUDY_SPACE, spec.name, spec.to_dict())
            return spec
        if not resume:
            raise StudyError(f"study {spec.name!r} exists: resume it, or choose another name")
        changed = stored.mismatch(spec)
        if changed is not None:
            raise StudyError(
                f"study {spec.name!r} was started with a different {changed}: "
                "resume it with the same settings, or start a new study"
            )
        return stored

    def trials(self, name: str) -> list[Trial]:
        """The completed trials of study ``name``, in order."""
        trials = []
        while (data := self.store.get(TRIAL_SPACE, _trial_key(name, len(trials)))) is not None:
            trials.append(Trial.from_dict(data))
        return trials

    def add_trial(self, name: str, trial: Trial) -> None:
        """Record ``trial`` as trial ``trial.number`` of study ``name`` (never overwrites)."""
        key = _trial_key(name, trial.number)
        if self.store.get(TRIAL_SPACE, key) is not None:
            raise StudyError(
                f"study {name!r} already has trial {trial.number}: is another process running it?"
            )
        self.store.put(TRIAL_SPACE, key, trial.to_dict())
