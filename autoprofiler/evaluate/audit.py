"""What candidate code does, seen through Python's audit events (PEP 578).

The worker installs one :class:`AuditWatch` before the candidate loads and switches it on only
around candidate code (its import, construction and forward calls). It records files written
outside the allowed folders, network connections and scans of the worker's objects through
``gc``. An audit hook cannot be removed from Python; native code (a C++ extension, ``ctypes``)
does not raise these events.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from autoprofiler.evaluate.result import Finding

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
FILE_EVENTS = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.truncate": (0,),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.chmod": (0,),
    "shutil.rmtree": (0,),
}
NETWORK_EVENTS = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg", "socket.bind"})
INSPECTION_EVENTS = frozenset(
    {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"}
)
HARMLESS_PATHS = frozenset({os.devnull})
MAX_SHOWN = 3


class AuditWatch:
    """An audit hook that records what watched code writes, connects to and inspects."""

    def __init__(self, allowed_roots: Sequence[str]) -> None:
        self._roots = tuple(os.path.join(os.path.abspath(r), "") for r in allowed_roots if r)
        self._active = False
        self.writes: list[str] = []
        self.connections: list[str] = []
        self.inspections: list[str] = []

    def install(self) -> None:
        sys.addaudithook(self._hook)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Record events raised inside this block."""
        self._active = True
        try:
            yield
        finally:
            self._active = False

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self._active:
            return
        try:
            self._record(event, args)
        except Exception:  # an audit hook must never fail the code it watches
            return

    def _record(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = args
            writes = any(c in mode for c in "wax+") if isinstance(mode, str) else False
            if writes or (mode is None and flags & WRITE_FLAGS):
                self._note_path(path)
        elif event in FILE_EVENTS:
            for index in FILE_EVENTS[event]:
                self._note_path(args[index])
        elif event in NETWORK_EVENTS:
            _note(self.connections, f"{event} {args[1]!r}")
        elif event in INSPECTION_EVENTS:
            _note(self.inspections, event)

    def _note_path(self, path: Any) -> None:
        if isinstance(path, int):  # a file descriptor the process already holds
            return
        absolute = os.path.abspath(os.fsdecode(path))
        inside = any(os.path.join(absolute, "").startswith(root) for root in self._roots)
        compiled = f"{os.sep}__pycache__{os.sep}" in absolute  # Python's own bytecode cache
        if not (inside or compiled or absolute in HARMLESS_PATHS):
            _note(self.writes, absolute)

    def findings(self) -> list[Finding]:
        """What was recorded, as findings (gc scans reject; writes and connections flag)."""
        found = []
        if self.inspections:
            detail = f"called {_shown(self.inspections)}"
            found.append(Finding("inspects_runtime", detail, severity="reject"))
        if self.writes:
            found.append(Finding("writes_outside_workdir", f"wrote {_shown(self.writes)}"))
        if self.connections:
            found.append(Finding("network_access", _shown(self.connections)))
        return found


def _note(seen: list[str], item: str) -> None:
    if item not in seen:
        seen.append(item)


def _shown(items: list[str]) -> str:
    more = f" and {len(items) - MAX_SHOWN} more" if len(items) > MAX_SHOWN else ""
    return ", ".join(items[:MAX_SHOWN]) + more
