"""An opt-in stricter sandbox for candidate workers: bubblewrap (``bwrap``).

With ``EvalConfig.sandbox = "bwrap"`` the worker runs with no network, a read-only view of the
whole file system except its own work folder, a fresh ``/dev/shm`` and a new PID and IPC
namespace that dies with the evaluator. It still runs as the user, with the user's devices
(GPUs included) and read access to every file the user can read (docs/SECURITY.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path

SANDBOXES = ("bwrap",)


class SandboxError(RuntimeError):
    """The sandbox asked for cannot be used; the message is one line saying why."""


def sandbox_command(kind: str, work_dir: Path) -> list[str]:
    """The command prefix that runs a worker inside the sandbox ``kind``."""
    if kind not in SANDBOXES:
        raise SandboxError(f"unknown sandbox {kind!r}; choose one of {', '.join(SANDBOXES)}")
    binary = shutil.which("bwrap")
    if binary is None:
        raise SandboxError(
            "sandbox 'bwrap' asked for, but bwrap is not installed "
            "(Debian/Ubuntu: apt-get install bubblewrap)"
        )
    folder = str(work_dir.resolve())
    return [
        binary,
        "--ro-bind", "/", "/",
        "--dev-bind", "/dev", "/dev",
        "--tmpfs", "/dev/shm",
        "--proc", "/proc",
        "--bind", folder, folder,
        "--chdir", folder,
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--",
    ]  # fmt: skip


def exit_status(returncode: int) -> int:
    """bwrap exits with 128 + N when the worker dies of signal N; give it back as -N."""
    return 128 - returncode if returncode > 128 else returncode
