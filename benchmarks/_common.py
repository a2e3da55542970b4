"""Shared set-up for the benchmark scripts: run from a checkout without installing."""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import math
import signal
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def run_main(main, log: logging.Logger) -> None:
    """Exit with ``main()``'s status; Ctrl-C or a slot's end (SIGINT, or the SIGTERM that
    ``timeout`` sends: a background job of a script ignores SIGINT) keeps the rows written so
    far, which are the result, and exits 130; a GPU asked for on a machine without one is one
    line and status 2."""
    from autoprofiler.evaluate.runner import NoGPUError

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        sys.exit(main())
    except NoGPUError as exc:
        log.error("%s", exc)
        sys.exit(2)
    except KeyboardInterrupt:
        log.warning("interrupted: the evaluation under way is lost, the rows written are kept")
        sys.exit(130)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def log_progress() -> None:
    """Progress lines on stderr, each with the time of day (long device runs read them)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")


def add_problem_arguments(parser) -> None:
    """The positional problems path and the ``--levels``/``--ids`` selection."""
    parser.add_argument("problems", help=".py file, folder, KernelBench checkout or JSONL")
    parser.add_argument("--levels", type=int, nargs="*", help="KernelBench levels to keep")
    parser.add_argument("--ids", type=int, nargs="*", help="KernelBench problem ids to keep")


def in_id_order(problems: list, wanted_ids: list[int] | None) -> list:
    """Problems in the order of ``wanted_ids``, levels alternating within an id, so that a
    run cut short by a deadline has covered the levels evenly."""
    if not wanted_ids:
        return problems
    rank = {pid: i for i, pid in enumerate(wanted_ids)}
    return sorted(problems, key=lambda p: (rank.get(p.problem_id, len(rank)), p.level or 0))


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSONL file (``.gz`` too); a torn last line (a killed run) is ignored."""
    if not path.exists():
        return []
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            text = handle.read()
    else:
        text = path.read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def made_by_an_older_evaluator(row: dict) -> bool:
    """Whether a sweep row holds a verdict that this evaluator version did not make (a fix
    since may change it; a verdict of v1 names no version). A row without a verdict (a
    candidate that could not be written) is never stale."""
    from autoprofiler.evaluate.config import EVALUATOR_VERSION

    result = row.get("result")
    return isinstance(result, dict) and result.get("evaluator_version") != EVALUATOR_VERSION


def stored_verdicts(store: Any) -> set[tuple[str, str, str | None]]:
    """(problem hash, candidate hash, evaluator version) of every verdict ``store`` holds."""
    return {(row[1], row[2], row[5].get("evaluator_version")) for row in store.iter_evaluations()}


def verdict_stored(row: dict, stored: set[tuple[str, str, str | None]]) -> bool:
    """Whether the verdict a sweep row reports is in the store (and so in the export that a
    later slot resumes from): the row of a run killed between a verdict and its export does
    not count as done. A row without a verdict needs none."""
    result = row.get("result")
    if not isinstance(result, dict):
        return True
    key = (row["problem_hash"], row["candidate_hash"], result.get("evaluator_version"))
    return key in stored


def resume_from(paths: list[Path], store: Any, log: logging.Logger) -> None:
    """Load each evaluations export of ``paths`` that exists into ``store``; a file that is
    not one ends the script with one error line (exit 2)."""
    from autoprofiler.evaluate import EvaluationsFileError, import_evaluations

    for path in paths:
        if not path.exists():
            continue
        try:
            imported = import_evaluations(path, store).evaluations
        except EvaluationsFileError as exc:
            log.error("%s", exc)
            raise SystemExit(2) from None
        log.info("resumed %d evaluations from %s", imported, path)


def verdict_fields(result: Any, began: float) -> dict:
    """A sweep row's verdict columns for an ``EvalResult``: seconds since ``began``
    (``time.monotonic``), correctness, speedup, failure kind, and the whole result."""
    return {
        "wall_s": round(time.monotonic() - began, 2),
        "correct": result.correct,
        "speedup": result.speedup,
        "failure_kind": result.failure_kind,
        "result": result.to_dict(),
    }


def verdict_text(result: Any) -> str:
    """An ``EvalResult`` in a progress line: its speedup, else what failed."""
    if result.correct and result.speedup:
        return f"{result.speedup:.2f}x"
    return result.failure_kind or "wrong"


def append_jsonl(path: Path, row: dict) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
        handle.flush()


FIRST_JUDGED_ON = "cuda:NVIDIA H200"  # where the committed verdicts were first made


def add_evaluated_device(parser: argparse.ArgumentParser) -> None:
    """``--evaluated-device LABEL``: whose recorded verdicts the page replays (a rebuild on
    another GPU model adds its verdicts under that model's label, beside the H200's)."""
    parser.add_argument(
        "--evaluated-device", default=FIRST_JUDGED_ON,
        help=f"replay the verdicts recorded on this device (default {FIRST_JUDGED_ON})",
    )  # fmt: skip


def card_name(label: str) -> str:
    """A device label as the pages' prose names it: ``cuda:NVIDIA H200`` -> ``H200``."""
    return label.partition(":")[2].removeprefix("NVIDIA ") or label


def add_report_arguments(parser: argparse.ArgumentParser, markdown: str) -> None:
    """``--report ROWS --markdown FILE --command TEXT``: write the results table from rows
    measured earlier (and name the command that measured them) instead of measuring."""
    parser.add_argument("--report", type=Path, help="write the markdown table from these rows")
    parser.add_argument("--markdown", type=Path, default=Path(markdown))
    parser.add_argument("--command", default="", help="the measuring command, for the report")


def replace_block(path: Path, name: str, text: str) -> bool:
    """Put ``text`` between the markers ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` of
    the page ``path``; False (and one line on stderr) when the page lacks them."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    page = path.read_text(encoding="utf-8")
    if start not in page or end not in page:
        print(f"{path}: has no {start} ... {end} block", file=sys.stderr)
        return False
    head, _, rest = page.partition(start)
    _, _, tail = rest.partition(end)
    path.write_text(f"{head}{start}\n{text}\n{end}{tail}", encoding="utf-8")
    return True


def geomean(values: Sequence[float]) -> float:
    """The geometric mean of positive ``values``; nan when there are none."""
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")
