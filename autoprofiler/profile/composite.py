"""CompositeProfiler: one Profiler over several, each serving the groups it names.

Groups are dispatched by ``MetricGroup.profiler`` (``static``, ``torch``, ``ncu``); each
sub-profiler gets all of its groups in one call (one invocation, one start-up), and the profiles
are merged. A group whose profiler is missing is reported in ``Profile.skipped``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from autoprofiler.problem import Problem
from autoprofiler.profile.base import (
    BatchResult,
    MetricGroup,
    Profile,
    Profiler,
    ProfilerError,
    SkippedGroup,
)

log = logging.getLogger(__name__)


class CompositeProfiler(Profiler):
    """Dispatches groups to ``profilers[group.profiler]`` and merges what they return."""

    name = "composite"

    def __init__(self, profilers: Mapping[str, Profiler]) -> None:
        self.profilers = dict(profilers)

    def _by_profiler(self, groups: Sequence[MetricGroup]) -> dict[str, list[MetricGroup]]:
        split: dict[str, list[MetricGroup]] = {}
        for group in groups:
            split.setdefault(group.profiler, []).append(group)
        return split

    def _missing(self, kind: str, groups: list[MetricGroup]) -> list[SkippedGroup]:
        reason = f"no {kind} profiler here"
        return [SkippedGroup(g.name, reason) for g in groups]

    def collect(
        self, problem: Problem, groups: Sequence[MetricGroup], limit_s: float | None = None
    ) -> Profile:
        """Each profiler's groups in one call of it; with ``limit_s``, each call is limited to
        what the calls before it left."""
        profile = Profile(problem_hash=problem.content_hash)
        for kind, mine in self._by_profiler(groups).items():
            profiler = self.profilers.get(kind)
            if profiler is None:
                profile.skipped.extend(self._missing(kind, mine))
                continue
            left_s = None if limit_s is None else max(limit_s - profile.cost_s, 0.0)
            profile = profile.merge(profiler.collect(problem, mine, limit_s=left_s))
        return profile

    def release(self) -> None:
        for profiler in self.profilers.values():
            profiler.release()

    def shown(self, problem: Problem, groups: Sequence[MetricGroup], collected: Profile) -> Profile:
        """``collected`` cut down to ``groups``, with one start-up of each profiler they need."""
        kinds = [kind for kind in self._by_profiler(groups) if kind in self.profilers]
        startup = sum(self.profilers[kind].estimated_startup_s() for kind in kinds)
        return collected.restricted(groups, startup)

    def collect_many(
        self, problems: Sequence[Problem], groups: Sequence[MetricGroup]
    ) -> BatchResult:
        """One ``collect_many`` per sub-profiler; profiles of one problem are merged."""
        result = BatchResult()
        for kind, mine in self._by_profiler(groups).items():
            profiler = self.profilers.get(kind)
            if profiler is None:
                raise ProfilerError(
                    f"no {kind} profiler here for {', '.join(g.name for g in mine)}"
                )
            part = profiler.collect_many(problems, mine)
            for key, profile in part.profiles.items():
                known = result.profiles.get(key)
                result.profiles[key] = profile if known is None else known.merge(profile)
            result.failures |= part.failures
            result.not_run += [k for k in part.not_run if k not in result.not_run]
            result.wall_s += part.wall_s
            result.startup_s += part.startup_s
            result.device = result.device or part.device
        for key in [*result.failures, *result.not_run]:
            result.profiles.pop(key, None)
        return result

    def estimate_cost_s(self, problem: Problem, groups: Sequence[MetricGroup]) -> float:
        return sum(
            self.profilers[kind].estimate_cost_s(problem, mine)
            for kind, mine in self._by_profiler(groups).items()
            if kind in self.profilers
        )

    def estimated_startup_s(self) -> float:
        return max((p.estimated_startup_s() for p in self.profilers.values()), default=0.0)


HARDWARE_ENV = "AUTOPROFILER_HARDWARE"
HARDWARE_CHOICES = ("auto", "cupti", "ncu")
CUPTI_COMPLETE_ENV = "AUTOPROFILER_CUPTI_COMPLETE"
CUPTI_REPLAY_ENV = "AUTOPROFILER_CUPTI_REPLAY"


def _choice_from_env(
    name: str, choices: Sequence[str], environ: Mapping[str, str] | None = None
) -> str:
    """The environment variable ``name``, one of ``choices`` (the first when unset);
    ``ProfilerError`` for another value."""
    import os

    text = (os.environ if environ is None else environ).get(name, "")
    choice = text.strip().lower() or choices[0]
    if choice not in choices:
        raise ProfilerError(f"{name}={text!r} is not one of {', '.join(choices)}")
    return choice


def hardware_from_env(environ: Mapping[str, str] | None = None) -> str:
    """``AUTOPROFILER_HARDWARE`` (``auto`` when unset); ``ProfilerError`` for another value."""
    return _choice_from_env(HARDWARE_ENV, HARDWARE_CHOICES, environ)


def cupti_replay_from_env(environ: Mapping[str, str] | None = None) -> str:
    """``AUTOPROFILER_CUPTI_REPLAY`` (``user`` when unset); ``ProfilerError`` for another."""
    from autoprofiler.profile.cupti_api import REPLAY_MODES

    return _choice_from_env(CUPTI_REPLAY_ENV, tuple(REPLAY_MODES), environ)


def default_profiler(device: str = "H200", hardware: str | None = None) -> CompositeProfiler:
    """Static + torch profilers, plus the hardware counters this machine can read.

    ``hardware`` (default: ``AUTOPROFILER_HARDWARE``, else ``auto``): ``cupti`` collects ncu's
    groups step by step through CUPTI in one worker per problem, with ncu for the groups CUPTI
    cannot give; ``ncu`` runs ncu for every step; ``auto`` takes CUPTI when it loads here with a
    CUDA driver, else ncu when its executable is on PATH. ``AUTOPROFILER_CUPTI_COMPLETE=1``
    takes a group with metrics CUPTI lacks to ncu instead of collecting the rest of it;
    ``AUTOPROFILER_CUPTI_REPLAY`` picks CUPTI's replay (``CuptiOptions.replay``).
    ``device`` is the target GPU of the static roofline bound; torch and ncu report the device
    they actually ran on. ncu samples launches when ``AUTOPROFILER_NCU_LAUNCHES_PER_CONFIG`` is
    set (see ``NcuOptions``).
    """
    import os

    from autoprofiler.profile.cupti import CuptiOptions, CuptiProfiler
    from autoprofiler.profile.ncu import NcuProfiler, options_from_env
    from autoprofiler.profile.static import StaticProfiler
    from autoprofiler.profile.torch_profiler import TorchProfiler

    choice = hardware_from_env() if hardware is None else hardware
    if choice not in HARDWARE_CHOICES:
        raise ProfilerError(f"hardware {choice!r} is not one of {', '.join(HARDWARE_CHOICES)}")
    profilers: dict[str, Profiler] = {"static": StaticProfiler(device), "torch": TorchProfiler()}
    ncu = NcuProfiler(options_from_env())
    fallback = ncu if ncu.available() else None
    complete = os.environ.get(CUPTI_COMPLETE_ENV, "").strip() not in ("", "0")
    options = CuptiOptions(complete=complete, replay=cupti_replay_from_env())
    cupti = CuptiProfiler(fallback=fallback, options=options)
    if choice in ("auto", "cupti") and cupti.available():
        profilers["ncu"] = cupti
    elif choice == "cupti":
        raise ProfilerError("CUPTI was asked for, but no CUPTI with a CUDA driver loads here")
    elif fallback is not None:
        profilers["ncu"] = fallback
    else:
        log.info("neither CUPTI nor ncu here: hardware-counter groups will be skipped")
    return CompositeProfiler(profilers)
