"""What ``learn`` and ``bench`` learn from: the problems recorded on a device, and how their
candidates are judged (evaluations replayed when given) and rewritten."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autoprofiler.cli.console import note
from autoprofiler.cli.profiling import recorded_problems
from autoprofiler.cli.rewriting import rewrite_context
from autoprofiler.cli.stores import replay_device_for

if TYPE_CHECKING:
    from collections.abc import Sequence

    from autoprofiler.evaluate import EvalConfig
    from autoprofiler.llm.batch import BatchRequest
    from autoprofiler.problem import Problem
    from autoprofiler.profile import RecordedProfiler
    from autoprofiler.rewrite.base import RewriteContext
    from autoprofiler.store import Store

# --problems, --levels, --ids; and --evaluations, --evaluated-device.
Selection = tuple[Path | None, str | None, str | None]
Replayed = tuple[list[Path] | None, str]


@dataclass(frozen=True)
class Learning:
    """The recordings learned from, the problems they hold, and the target."""

    profiler: RecordedProfiler
    problems: list[Problem]
    eval_config: EvalConfig
    context: RewriteContext


def learning(
    db: Store, device_key: str, device: str, selection: Selection, replayed: Replayed
) -> Learning:
    """The recordings of ``device_key`` in ``db``, the selected problems recorded there, and
    candidates judged on ``device`` (or replayed); bad input is one error line."""
    from autoprofiler.evaluate import EvalConfig
    from autoprofiler.profile import RecordedProfiler

    profiler = RecordedProfiler(db, device_key)
    eval_config = EvalConfig(device=device, replay_device=replay_device_for(db, *replayed))
    return Learning(
        profiler=profiler,
        problems=recorded_problems(db, selection[0], profiler, *selection[1:]),
        eval_config=eval_config,
        context=rewrite_context(device, device_key, eval_config),
    )


def export_waiting(
    requests: Sequence[BatchRequest],
    path: Path | None,
    db: Store,
    batch_format: str,
    store_path: str,
    rerun: str = "",
) -> None:
    """Write the requests of LLM proposers waiting for replies to one batch file (``path``, or
    one named after the first request) and say how to go on."""
    from autoprofiler.llm.batch import export_requests

    path = path or Path(f"{requests[0].custom_id}.requests.jsonl")
    export_requests(requests, path, db, batch_format)
    names = ", ".join(request.configuration for request in requests)
    note(
        f"waiting for a reply to {names}: request written to {path}; answer it, `autoprofiler "
        f"replies import REPLIES --store {store_path}`, then run this command again{rerun}"
    )
