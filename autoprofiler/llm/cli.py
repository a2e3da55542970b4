"""``autoprofiler prompts export`` and ``autoprofiler replies import``: the LLM rewriter in
batches, answered elsewhere (:mod:`autoprofiler.llm.batch`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autoprofiler.cli import (
    DEFAULT_STORE,
    IdsOption,
    LevelsOption,
    ProblemsArgument,
    RecordingsOption,
    StoreOption,
    _profiler_for,
    _profiling_tree,
    console,
    current_device_key,
    fail,
    load_or_fail,
    open_store,
    rewrite_context,
)

prompts_app = typer.Typer(help="Export the LLM rewriter's requests as a batch.")
replies_app = typer.Typer(help="Import a batch of LLM replies into the store.")
# Exporting sends nothing: no API key is needed to name the model.
NO_KEYS_NEEDED = {"OPENAI_API_KEY": "-", "ANTHROPIC_API_KEY": "-"}


@prompts_app.command("export")
def export_command(
    path: ProblemsArgument,
    llm: Annotated[
        str, typer.Option(help="The model the requests are for: openai:MODEL or anthropic:MODEL.")
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The requests file (JSONL).")],
    configs: Annotated[
        str,
        typer.Option(help="Profile configurations, comma-separated: fixed names or tree files."),
    ] = "none,static",
    budget: Annotated[
        float | None, typer.Option(help="Profiling budget in seconds per problem.")
    ] = None,
    batch_format: Annotated[
        str, typer.Option("--format", help="openai (Batch API) or anthropic (Message Batches).")
    ] = "openai",
    replay: Annotated[
        bool, typer.Option("--replay", help="Take profiles from recordings in the store.")
    ] = False,
    recordings: RecordingsOption = None,
    profile_device: Annotated[
        str, typer.Option(help="Device of the recordings / roofline (default: this GPU or H200).")
    ] = "",
    device: Annotated[str, typer.Option(help="The device the kernels are for: cuda or cpu.")] = (
        "cuda"
    ),
    levels: LevelsOption = None,
    ids: IdsOption = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Write one request per (problem, profile configuration): exactly the messages the LLM
    rewriter would send, each with a custom_id naming problem, configuration and request hash."""
    from autoprofiler.evaluate import EvalConfig
    from autoprofiler.llm import LLMConfig, LLMError, SamplingParams
    from autoprofiler.llm.batch import BatchError, BatchRequest, export_requests
    from autoprofiler.profile import ProfilerError
    from autoprofiler.rewrite.llm_rewriter import build_messages

    try:
        model_id = LLMConfig.from_spec(llm, environ=NO_KEYS_NEEDED).model_id
    except LLMError as exc:
        fail(str(exc))
    names = [name.strip() for name in configs.split(",") if name.strip()]
    if not names:
        fail("--configs names no configuration")
    trees = {name: _profiling_tree(name, []) for name in names}
    report = load_or_fail(path, levels, ids)
    context = rewrite_context(device, profile_device, EvalConfig(device=device))
    device_key = profile_device or current_device_key("H200")
    requests = []
    with open_store(store, recordings) as db:
        profiler = _profiler_for(db, device_key, replay)
        for problem in report.problems:
            for name, tree in trees.items():
                try:
                    profile = tree.run(problem, profiler, budget)
                except ProfilerError as exc:
                    fail(f"{problem.key}: {exc}")
                messages = tuple(build_messages(problem, profile, context))
                request = BatchRequest(problem.key, name, model_id, messages, SamplingParams())
                requests.append(request)
        try:
            written = export_requests(requests, output, db, batch_format)
        except BatchError as exc:
            fail(str(exc))
    console.print(
        f"{written} requests for {model_id} ({len(report.problems)} problems x {len(names)} "
        f"configurations) written to {output} ({batch_format} batch format)"
    )


@replies_app.command("import")
def import_command(
    replies: Annotated[
        Path, typer.Argument(help="A batch result file, or JSONL of {custom_id, content, model}.")
    ],
    model: Annotated[
        str, typer.Option(help="The model's name, where the file does not say it.")
    ] = "",
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Put the replies into the store's reply cache; optimize, learn and bench with
    --llm recorded:PROVIDER:MODEL then find them and call no server."""
    from autoprofiler.llm.batch import BatchError, import_replies

    if not replies.is_file():
        fail(f"{replies}: no such file")
    with open_store(store, None) as db:
        try:
            count = import_replies(replies, db, model)
        except BatchError as exc:
            fail(str(exc))
    console.print(f"{count} replies imported into {store}")
