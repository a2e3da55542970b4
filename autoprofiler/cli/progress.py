"""Progress a person can follow, the same for every long command, on stderr (nothing with -q).

On a terminal: a rich bar with the count done, elapsed time and ETA, and what is running now.
Elsewhere (a file, a pipe, a CI log): one plain line per finished item, written as it happens,
``optimize 3/15 L1/05_elementwise_chain: ok 1.52x (4.2 s)``.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as _Bar

from autoprofiler.cli.console import messages
from autoprofiler.cli.verbosity import quiet

if TYPE_CHECKING:
    from autoprofiler.evaluate import EvalResult


def eval_verdict(result: EvalResult | None, failure: str = "no candidate") -> str:
    """An evaluation in a few words: ``ok 1.52x``, ``ok 1.10x flagged side_channel``,
    ``wrong_values``; ``failure`` when there is no result."""
    if result is None:
        return failure
    if not result.correct:
        return result.failure_kind.value if result.failure_kind else "failed"
    speedup = f" {result.speedup:.3g}x" if result.speedup is not None else ""
    flagged = f" flagged {','.join(result.flagged)}" if result.flagged else ""
    return f"ok{speedup}{flagged}"


class Progress:
    """A long command's progress over ``total`` items (None: not known ahead); a context
    manager. ``finished`` counts an item done, ``status`` says what runs now (terminal only),
    ``step`` a stage begun when there are no items to count."""

    def __init__(self, what: str, total: int | None = None, console: Console | None = None) -> None:
        self.what = what
        self.count = 0
        self._total = total
        self._console = console or messages()
        self._began = self._last = time.monotonic()
        self._bar: _Bar | None = None
        self._task = None

    @property
    def on_terminal(self) -> bool:
        return self._console.is_terminal

    def __enter__(self) -> Progress:
        if self.on_terminal and not quiet():
            columns = (
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[status]}"),
            )
            self._bar = _Bar(*columns, console=self._console)
            self._bar.start()
            self._task = self._bar.add_task(self.what, total=self._total, status="")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def total(self, total: int) -> None:
        """Set the number of items (known once the work is planned)."""
        self._total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def status(self, text: str) -> None:
        """What runs now, beside the bar (a plain log gets lines for finished items only)."""
        if self._bar is not None:
            self._bar.update(self._task, status=text)

    def finished(
        self, item: str, verdict: str, seconds: float | None = None, completed: int | None = None
    ) -> None:
        """One item done: ``verdict`` in a few words, ``seconds`` it took (default: since the
        previous item finished). ``completed`` sets the bar's count when it counts something
        else than items (learn: rounds; ``item`` then says where it is)."""
        now = time.monotonic()
        took = now - self._last if seconds is None else seconds
        self._last = now
        self.count = self.count + 1 if completed is None else completed
        line = f"{item}: {verdict} ({took:.1f} s)"
        if self._bar is not None:
            self._bar.update(self._task, completed=self.count, status=line)
        elif not quiet():
            of = f"/{self._total}" if self._total is not None else ""
            self._say(
                f"{self.what} {line}"
                if completed is not None
                else f"{self.what} {self.count}{of} {line}"
            )

    def step(self, text: str) -> None:
        """A stage of the work begun: beside the bar, or a line with the time so far."""
        if self._bar is not None:
            self._bar.update(self._task, status=text)
        elif not quiet():
            self._say(f"{self.what} [{time.monotonic() - self._began:.0f} s] {text}")

    def _say(self, line: str) -> None:
        self._console.print(line, highlight=False, markup=False, soft_wrap=True)
