"""The rewriting plug-in point: a problem and its profile in, one candidate out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from autoprofiler.problem import source_hash

if TYPE_CHECKING:
    from autoprofiler.evaluate.config import EvalConfig
    from autoprofiler.problem import Problem
    from autoprofiler.profile.base import Profile
    from autoprofiler.store import Store


@dataclass(frozen=True)
class RewriteContext:
    """What the rewriter may assume about the target: device, tolerance, dtype policy."""

    device: str = "cuda"
    device_name: str = ""
    atol: float = 1e-4
    rtol: float = 1e-4

    @classmethod
    def for_target(cls, device: str, profile_device: str, config: EvalConfig) -> RewriteContext:
        """What the rewriter is told of the target: the device the candidates run on
        (``auto`` resolved here, so that a CPU-only machine is offered only what runs on a
        CPU), the GPU's name for a CUDA target, and the float32 tolerance. Every command
        builds it this way, so that an exported request is the one ``optimize`` would send."""
        target = resolve_device(device)
        atol, rtol = config.tolerance_for("float32")
        name = profile_device if target == "cuda" else ""
        return cls(device=target, device_name=name, atol=atol, rtol=rtol)


def resolve_device(device: str) -> str:
    """``cuda`` or ``cpu``: what ``auto`` means on this machine."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class Candidate:
    """A ``ModelNew`` source, who produced it, and from which profile.

    ``source`` is empty when the rewriter produced nothing usable; ``failure`` then says why,
    and the candidate is recorded as a failed one rather than raised.
    """

    source: str
    producer: str
    profile_hash: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    failure: str = ""

    @property
    def content_hash(self) -> str:
        return source_hash(self.source)

    @property
    def usable(self) -> bool:
        return bool(self.source) and not self.failure

    def save(self, store: Store, problem_hash: str) -> None:
        """Keep this candidate's source in ``store`` (under its content hash), with who made it
        and from which profile, so that its evaluations name a source that can be read."""
        store.put_candidate(
            self.content_hash, problem_hash, self.source, self.producer, self.profile_hash,
            self.info,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def profile_hash(profile: Profile | None) -> str:
    """The hash a candidate records for the profile it was written from ("" for none)."""
    return "" if profile is None else profile.content_hash


class Rewriter(ABC):
    """Turns a problem and its profile into one candidate, with exactly one attempt.

    ``builtin``: autoprofiler wrote this rewriter's code generation itself, so the evaluator's
    flags on its candidates (suspicions of a reward hack, such as building the reference
    ``Model`` as torch.compile does) are no suspicion and do not discount them."""

    name: str = "rewriter"
    builtin: bool = False

    @abstractmethod
    def rewrite(
        self, problem: Problem, profile: Profile | None, context: RewriteContext
    ) -> Candidate:
        """Return one candidate; a failure to produce code is a candidate with ``failure`` set."""
