"""The store a command opens, and the recordings and evaluations imported into it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from autoprofiler.cli.console import fail, note

if TYPE_CHECKING:
    from autoprofiler.store import Store


def open_store(path: Path, recordings: list[Path] | None = None) -> Store:
    """The store at ``path`` with ``recordings`` imported into it, or one error line."""
    from autoprofiler.profile import ProfilerError, import_recordings
    from autoprofiler.store import Store, StoreError

    try:
        db = Store(path)
    except StoreError as exc:
        fail(str(exc))
    for file in recordings or []:
        try:
            count = import_recordings(file, db)
        except ProfilerError as exc:  # already names the file
            db.close()
            fail(str(exc))
        except (TypeError, ValueError) as exc:
            db.close()
            fail(f"{file}: cannot import recordings: {exc}")
        note(f"imported {count} recorded profiles from {file}")
    return db


def replay_device_for(db: Store, files: list[Path] | None, wanted: str = "") -> str | None:
    """Import recorded evaluations into ``db`` and choose the device whose results are
    replayed: ``wanted``, else the only one in ``files``; None (evaluate for real) with
    neither. Bad input is one error line."""
    from autoprofiler.evaluate import EvaluationsFileError, evaluated_devices, import_evaluations

    devices: dict[str, None] = {}
    for file in files or []:
        try:
            imported = import_evaluations(file, db)
        except EvaluationsFileError as exc:
            fail(str(exc))
        devices.update(dict.fromkeys(imported.devices))
        note(f"imported {imported.evaluations} recorded evaluations from {file}")
    if wanted:
        if wanted not in evaluated_devices(db):
            recorded = ", ".join(evaluated_devices(db)) or "none"
            fail(f"no evaluations recorded on {wanted!r} in the store (recorded: {recorded})")
        return wanted
    if not files:
        return None
    if len(devices) != 1:
        shown = ", ".join(devices) or "none"
        fail(f"choose the evaluations to replay with --evaluated-device (recorded: {shown})")
    return next(iter(devices))
