"""Every option that more than one command takes, defined once, each checked as it is parsed.

A bad value stops the command before it does anything, with one line naming the option and
exit code 2 (``CommandGroup`` prints click's usage errors that way). The values keep their
plain types; a command converts them where it uses them.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from autoprofiler.cli.rewriting import DEVICES, REWRITERS, ProposerKind, check_rewriter_spec
from autoprofiler.cli.selection import number_list

DEFAULT_STORE = Path(".autoprofiler/store.sqlite")
EXECUTORS = ("local", "ray")


def checked(check: Callable[[Any], object]) -> Callable[..., Any]:
    """A typer callback that runs ``check(value)`` (``ValueError``: a bad value) and passes the
    value on; None (the option not given) is not checked."""

    def callback(ctx: typer.Context, value: Any) -> Any:
        if value is None or ctx.resilient_parsing:
            return value
        try:
            check(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        return value

    return callback


def choice(*names: str) -> Callable[..., Any]:
    """A callback accepting ``names`` only."""

    def check(value: str) -> None:
        if value not in names:
            raise ValueError(f"must be one of {', '.join(names)}, not {value!r}")

    return checked(check)


def _numbers(text: str) -> None:
    try:
        number_list(text)
    except ValueError:
        raise ValueError(f"takes numbers and ranges like 1,3,10-20, not {text!r}") from None


def must_exist(path: Path) -> None:
    """Raise ``ValueError`` unless ``path`` exists."""
    if not path.exists():
        raise ValueError(f"{path}: no such file or folder")


def _store_file(path: Path) -> None:
    from autoprofiler.store import is_sqlite_file

    if path.is_dir():
        raise ValueError(f"{path} is a folder, not a store file")
    try:
        foreign = path.is_file() and path.stat().st_size > 0 and not is_sqlite_file(path)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if foreign:
        raise ValueError(f"{path}: not a usable autoprofiler store (not an SQLite file)")


def output_file(path: Path) -> None:
    """Raise ``ValueError`` when ``path`` cannot be a file to write (a folder)."""
    if path.is_dir():
        raise ValueError(f"{path} is a folder: give the file to write")


def _exported(paths: list[Path], kind: str, what: str) -> None:
    """Each of ``paths`` is a file written by an export: ``.jsonl.gz`` with a ``kind`` header."""
    for path in paths:
        if not path.is_file():
            raise ValueError(f"{path}: no such file")
        try:
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                header = json.loads(handle.readline())
        except (OSError, EOFError, UnicodeDecodeError, ValueError):
            header = None
        if not isinstance(header, dict) or header.get("kind") != kind:
            raise ValueError(f"{path}: not an autoprofiler {what} file (.jsonl.gz)")


def _recording_files(paths: list[Path]) -> None:
    from autoprofiler.profile.recording import EXPORT_KIND

    _exported(paths, EXPORT_KIND, "recordings")


def _evaluation_files(paths: list[Path]) -> None:
    from autoprofiler.evaluate.recorded import EXPORT_KIND

    _exported(paths, EXPORT_KIND, "evaluations")


def _budget(seconds: float) -> None:
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"a budget is seconds >= 0 (inf: unlimited), not {seconds:g}")


def tree_spec(spec: str) -> None:
    """Raise ``ValueError`` unless ``spec`` is a valid tree file or fixed tree name."""
    from autoprofiler.tree import resolve_tree

    resolve_tree(spec).validate()


def menu_configurations(spec: str) -> dict[str, tuple[str, ...]]:
    """The groups of each configuration of ``--menu a,b+c`` (fixed names or groups joined by
    +), by the name given; ``ValueError`` for a bad one or fewer than two different ones."""
    from autoprofiler.tree.fixed import combined_tree

    names = [part.strip() for part in spec.split(",") if part.strip()]
    configurations: dict[str, tuple[str, ...]] = {}
    for name in names:
        groups = combined_tree(name).root.collect
        if groups not in configurations.values():
            configurations[name] = groups
    if len(configurations) < 2:
        raise ValueError("a menu needs at least two different configurations")
    return configurations


def menu_and_routing(
    menu: str | None, routing: str
) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """``--menu``'s configurations by name and ``--routing``'s groups (both empty without a
    menu)."""
    if not menu:
        return {}, ()
    return menu_configurations(menu), tuple(group_names([routing]))


def group_names_spec(spec: str) -> None:
    """Raise ``ValueError`` unless every comma-separated name is a catalogue group."""
    from autoprofiler.profile.catalogue import UnknownGroupError, get_group

    for name in group_names([spec]):
        try:
            get_group(name)
        except UnknownGroupError as exc:
            raise ValueError(str(exc)) from None
    if not group_names([spec]):
        raise ValueError("name at least one group")


def group_names(values: list[str] | None) -> list[str]:
    """The groups of ``-g a,b -g c``, in order."""
    return [g.strip() for text in values or [] for g in text.split(",") if g.strip()]


def _groups(values: list[str]) -> None:
    from autoprofiler.profile import get_group

    names = group_names(values)
    if values and not names:
        raise ValueError("names no metric group")
    for name in names:
        get_group(name)


def _train(text: str) -> None:
    spec = train_spec(text)
    if isinstance(spec, float) and not 0 < spec <= 1:
        raise ValueError(f"a training fraction must be in (0, 1], not {text}")
    if isinstance(spec, int) and spec < 1:
        raise ValueError(f"a training count must be at least 1, not {text}")
    if isinstance(spec, list) and not spec:
        raise ValueError("names no problem")


def train_spec(text: str) -> float | int | list[str]:
    """A ``--train`` value: a count (``10``), a fraction (``0.7``) or names (``a,b``)."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return [name.strip() for name in text.split(",") if name.strip()]


def llm_spec(spec: str) -> None:
    """Raise ``ValueError`` unless ``spec`` reads as ``--llm`` takes it (keys are not checked)."""
    from autoprofiler.llm import LLMError
    from autoprofiler.llm.config import parse_llm_spec

    try:
        parse_llm_spec(spec)
    except LLMError as exc:
        raise ValueError(str(exc).removeprefix(f"--llm {spec!r}: ")) from None


def _objective(name: str) -> None:
    from autoprofiler.learn.objective import Objective

    Objective(name)


# Where the problems come from and which.
ProblemsArgument = Annotated[
    Path,
    typer.Argument(
        callback=checked(must_exist),
        help="Problems: a .py file, a folder, a KernelBench checkout or a JSONL file.",
    ),
]
ProblemsOption = Annotated[
    Path | None,
    typer.Option(
        "--problems",
        callback=checked(must_exist),
        help="Problems: a .py file, a folder, a KernelBench checkout or a JSONL file "
        "(default: every problem in the recordings).",
    ),
]
LevelsOption = Annotated[
    str | None,
    typer.Option("--levels", callback=checked(_numbers), help="KernelBench levels: 1,2."),
]
IdsOption = Annotated[
    str | None,
    typer.Option("--ids", callback=checked(_numbers), help="Problem ids: 1-20,41."),
]

# The store and what is imported into it.
StoreOption = Annotated[
    Path,
    typer.Option(
        "--store",
        callback=checked(_store_file),
        help="SQLite store: recordings, caches, studies and results.",
    ),
]
RecordingsOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--recordings",
        callback=checked(_recording_files),
        help="Recorded profiles (.jsonl.gz) to import into the store; repeatable.",
    ),
]
EvaluationsOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--evaluations",
        callback=checked(_evaluation_files),
        help="Recorded evaluations (.jsonl.gz) to replay instead of evaluating; repeatable.",
    ),
]
EvaluatedDeviceOption = Annotated[
    str,
    typer.Option(
        "--evaluated-device",
        help="Replay the evaluations recorded on this device, e.g. 'cuda:NVIDIA H200' "
        "(default: the only one in --evaluations).",
    ),
]
NoCacheOption = Annotated[
    bool,
    typer.Option(
        "--no-cache", help="Compute again rather than reuse the results stored in the store."
    ),
]
RetimeReferenceOption = Annotated[
    bool,
    typer.Option(
        "--retime-reference",
        help="Time each problem's reference again (once in this run) rather than reuse the "
        "timing stored for it; the drift from the stored one is logged.",
    ),
]

# Profiling.
TreeOption = Annotated[
    str | None,
    typer.Option(
        "--tree",
        callback=checked(tree_spec),
        help="Profiling tree: a JSON file, a fixed name (none, static, SpeedOfLight, basic, "
        "detailed, full, curated24) or groups joined by + (SpeedOfLight+Occupancy).",
    ),
]
GroupsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--groups", "-g", callback=checked(_groups), help="Metric groups (repeat, or a,b)."
    ),
]
BudgetOption = Annotated[
    float | None,
    typer.Option(
        "--budget",
        callback=checked(_budget),
        help="Profiling budget in seconds per problem (inf: unlimited).",
    ),
]
ReplayOption = Annotated[
    bool,
    typer.Option("--replay", help="Take the profiles from the recordings (never profile)."),
]
ProfileDeviceOption = Annotated[
    str,
    typer.Option(
        "--profile-device",
        help="The device whose profiles are recorded or replayed, e.g. H200 (default: this "
        "GPU; replaying, the only device recorded).",
    ),
]

# Evaluation.
DeviceOption = Annotated[
    str,
    typer.Option("--device", callback=choice(*DEVICES), help="Evaluate on auto, cuda or cpu."),
]
AtolOption = Annotated[
    float | None, typer.Option("--atol", min=0.0, help="Absolute tolerance (default per dtype).")
]
RtolOption = Annotated[
    float | None, typer.Option("--rtol", min=0.0, help="Relative tolerance (default per dtype).")
]
CompileBaselineOption = Annotated[
    bool,
    typer.Option("--compile-baseline", help="Also time torch.compile of the reference."),
]
CountFlaggedOption = Annotated[
    bool,
    typer.Option(
        "--count-flagged",
        help="Count a flagged candidate (correct, with a flag finding such as side_channel) "
        "at its speedup; by default it counts as a failure.",
    ),
]
ExecutorOption = Annotated[
    str,
    typer.Option(
        "--executor",
        callback=choice(*EXECUTORS),
        help="Where evaluations run: local (a worker per GPU) or ray (a cluster).",
    ),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=1,
        help="Workers (default: one per visible GPU, else one CPU worker); with ray, the most "
        "jobs at once.",
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Ray cluster to join: auto, HOST:PORT or ray://HOST:PORT (default: a local one).",
    ),
]

# Rewriting and learning.
RewriterOption = Annotated[
    str,
    typer.Option(
        "--rewriter",
        callback=checked(check_rewriter_spec),
        help=f"{REWRITERS} (a Rewriter of your own).",
    ),
]
LLMOption = Annotated[
    str | None,
    typer.Option(
        "--llm",
        callback=checked(llm_spec),
        help="openai:MODEL, anthropic:MODEL or recorded:PROVIDER:MODEL, for the llm choices.",
    ),
]
BaseURLOption = Annotated[
    str | None, typer.Option("--base-url", help="OpenAI-compatible server URL (vLLM, Ollama, ...).")
]
ProposerOption = Annotated[
    ProposerKind, typer.Option("--proposer", help="search (offline local search) or llm.")
]
EditsPerRoundOption = Annotated[
    int, typer.Option("--edits-per-round", min=1, help="Edits asked of the proposer a round.")
]
ObjectiveOption = Annotated[
    str,
    typer.Option(
        "--objective",
        callback=checked(_objective),
        help="geomean_speedup, fast_1 or correct_rate.",
    ),
]
TrainOption = Annotated[
    str,
    typer.Option(
        "--train",
        callback=checked(_train),
        help="Training problems: a fraction (0.7) or a count (10) drawn at random, or names "
        "(a,b); the rest are held out.",
    ),
]
IterationsOption = Annotated[
    int, typer.Option("--iterations", min=0, help="Learning rounds (each a set of edits).")
]
PatienceOption = Annotated[
    int, typer.Option("--patience", min=1, help="Stop after K rounds without an accepted edit.")
]
TimeLimitOption = Annotated[
    float | None, typer.Option("--time-limit", min=0.0, help="Stop learning after S seconds.")
]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the split and the proposer.")]
MenuOption = Annotated[
    str | None,
    typer.Option(
        "--menu",
        callback=checked(menu_configurations),
        help="Configurations a leaf may show, comma-separated (fixed names or groups joined "
        "by +): trees show the rewriter their leaf's configuration only (show: leaf), and the "
        "proposers keep every leaf on this menu.",
    ),
]
RoutingOption = Annotated[
    str,
    typer.Option(
        "--routing",
        callback=checked(group_names_spec),
        help="With --menu: the groups a condition node may collect to route on.",
    ),
]
RequestsOutOption = Annotated[
    Path | None,
    typer.Option(
        "--requests-out",
        help="With --proposer llm --llm recorded:...: where a round waiting for its reply "
        "writes the request (default: named after the request).",
    ),
]

BATCH_FORMATS = ("openai", "anthropic")
BatchFormatOption = Annotated[
    str,
    typer.Option(
        "--format",
        callback=choice(*BATCH_FORMATS),
        help="Batch format of exported requests: openai (Batch API) or anthropic (Message "
        "Batches).",
    ),
]

# Results.
JsonOption = Annotated[bool, typer.Option("--json", help="Print the results as JSON.")]
OutputFileOption = Annotated[
    Path,
    typer.Option(
        "--output", "-o", callback=checked(output_file), help="The file to write (see above)."
    ),
]
OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        callback=checked(output_file),
        help="Also write the results to this file (JSON).",
    ),
]
