"""``autoprofiler prompts export``: the LLM rewriter's requests as a batch, to be answered
elsewhere (:mod:`autoprofiler.llm.batch`); ``replies import`` takes the answers back."""

from __future__ import annotations

from typing import Annotated

import typer

from autoprofiler.cli.console import console, fail
from autoprofiler.cli.options import (
    DEFAULT_STORE,
    BatchFormatOption,
    BudgetOption,
    IdsOption,
    LevelsOption,
    OutputFileOption,
    ProblemsArgument,
    ProfileDeviceOption,
    RecordingsOption,
    ReplayOption,
    StoreOption,
    checked,
    choice,
    llm_spec,
    tree_spec,
)
from autoprofiler.cli.profiling import (
    profile_device,
    profiler_for,
    profiling_tree,
    with_recordings,
)
from autoprofiler.cli.progress import Progress
from autoprofiler.cli.rewriting import rewrite_context
from autoprofiler.cli.selection import load_or_fail
from autoprofiler.cli.stores import open_store

prompts_app = typer.Typer(help="Export the LLM rewriter's requests as a batch.")
# Exporting sends nothing: no API key is needed to name the model.
NO_KEYS_NEEDED = {"OPENAI_API_KEY": "-", "ANTHROPIC_API_KEY": "-"}


def config_names(text: str) -> list[str]:
    """The configurations of ``--configs a,b``, in order."""
    return [name.strip() for name in text.split(",") if name.strip()]


def _configs(text: str) -> None:
    names = config_names(text)
    if not names:
        raise ValueError("names no configuration")
    for name in names:
        tree_spec(name)


@prompts_app.command("export")
def export_command(
    path: ProblemsArgument,
    llm: Annotated[
        str,
        typer.Option(
            "--llm",
            callback=checked(llm_spec),
            help="The model the requests are for: openai:MODEL or anthropic:MODEL.",
        ),
    ],
    output: OutputFileOption,
    configs: Annotated[
        str,
        typer.Option(
            "--configs",
            callback=checked(_configs),
            help="Profile configurations, comma-separated: fixed names or tree files.",
        ),
    ] = "none,static",
    budget: BudgetOption = None,
    batch_format: BatchFormatOption = "openai",
    replay: ReplayOption = False,
    recordings: RecordingsOption = None,
    profile_device_name: ProfileDeviceOption = "",
    device: Annotated[
        str,
        typer.Option(
            "--device", callback=choice("cuda", "cpu"), help="The device the kernels are for."
        ),
    ] = "cuda",
    levels: LevelsOption = None,
    ids: IdsOption = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Write one request per (problem, profile configuration) to -o (JSONL): exactly the
    messages the LLM rewriter would send, each with a custom_id naming problem, configuration
    and request hash."""
    from autoprofiler.evaluate import EvalConfig
    from autoprofiler.llm import LLMConfig, SamplingParams
    from autoprofiler.llm.batch import BatchError, BatchRequest, export_requests
    from autoprofiler.profile import ProfilerError, RecordedProfiler
    from autoprofiler.rewrite.llm_rewriter import build_messages

    model_id = LLMConfig.from_spec(llm, environ=NO_KEYS_NEEDED).model_id
    names = config_names(configs)
    trees = {name: profiling_tree(name, []) for name in names}
    problems = load_or_fail(path, levels, ids).problems
    requests = []
    with open_store(store, recordings) as db:
        device_key = profile_device(db, profile_device_name, replay)
        context = rewrite_context(device, device_key, EvalConfig(device=device))
        profiler = profiler_for(db, device_key, replay)
        if isinstance(profiler, RecordedProfiler) and any(t.groups() for t in trees.values()):
            problems = with_recordings(problems, profiler)
        with Progress("prompts export", len(problems) * len(trees)) as progress:
            for problem in problems:
                for name, tree in trees.items():
                    try:
                        profile = tree.run(problem, profiler, budget)
                    except ProfilerError as exc:
                        fail(f"{problem.key}: {exc}")
                    messages = tuple(build_messages(problem, profile, context))
                    request = BatchRequest(problem.key, name, model_id, messages, SamplingParams())
                    requests.append(request)
                    collected = ", ".join(profile.groups) or "nothing"
                    progress.finished(f"{problem.key} {name}", f"profiled {collected}")
        try:
            written = export_requests(requests, output, db, batch_format)
        except BatchError as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"{output}: cannot write the requests: {exc.strerror or exc}")
    console.print(
        f"{written} requests for {model_id} ({len(problems)} problems x {len(names)} "
        f"configurations) written to {output} ({batch_format} batch format)",
        highlight=False,
    )
