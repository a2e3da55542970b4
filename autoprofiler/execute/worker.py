"""A ``LocalExecutor`` worker process: ``python -m autoprofiler.execute.worker``.

It answers job messages from stdin (``autoprofiler.execute.channel``) on what was its stdout;
anything else written to stdout goes to stderr, so a chatty job cannot corrupt the channel.
EOF on stdin ends the worker; SIGINT interrupts the job in flight (its ``finally`` blocks run)
and ends it, and on Linux the worker gets SIGINT when the driver dies, even by SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import signal
import sys
from typing import BinaryIO

from autoprofiler.execute.base import Reply, call_job, one_line
from autoprofiler.execute.channel import PARENT_VARIABLE, WORKER_VARIABLE, pack, read_message

INTERRUPTED = 130
PR_SET_PDEATHSIG = 1


def _init(path: list[str], level: int) -> None:
    sys.path[:0] = [p for p in path if p not in sys.path]
    name = os.environ.get(WORKER_VARIABLE, "worker")
    logging.basicConfig(level=level, format=f"%(levelname)s [{name}] %(name)s: %(message)s")


def _run(payload: bytes) -> Reply:
    try:
        fn, args = pickle.loads(payload)
    except Exception as exc:  # the job's module does not import here
        return Reply(error=f"cannot load the job: {one_line(exc)}")
    return call_job(fn, args)


def serve(inbox: BinaryIO, outbox: BinaryIO) -> None:
    """Answer job messages from ``inbox`` on ``outbox`` until ``inbox`` ends."""
    while (message := read_message(inbox)) is not None:
        if message[0] == "init":
            _init(message[1], message[2])
            continue
        _, key, payload = message
        reply = _run(payload)
        try:
            frame = pack(("reply", key, reply))
        except Exception as exc:  # a value that does not pickle
            frame = pack(("reply", key, Reply(error=f"result not sent: {one_line(exc)}")))
        outbox.write(frame)
        outbox.flush()


def _leave_with_parent() -> None:
    """Ask for SIGINT when the driver dies (Linux); leave now if it already has."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)
    parent = int(os.environ.get(PARENT_VARIABLE, "0"))
    if parent and os.getppid() != parent:
        raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the driver ignores it
    outbox = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # print() in a job goes to stderr, not into the channel
    try:
        _leave_with_parent()
        serve(sys.stdin.buffer, outbox)
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:  # the driver is gone
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
