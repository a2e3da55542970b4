"""The driver-worker channel of ``LocalExecutor``: length-prefixed pickled messages on pipes.

Driver to worker: ``("init", sys.path, log level)`` once, then ``("job", key, payload)`` with
``payload`` the pickled ``(fn, args)`` (unpickled in the worker, where a job whose module does
not import fails alone). Worker to driver: ``("reply", key, Reply)``.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, BinaryIO

_HEADER = struct.Struct(">Q")
WORKER_VARIABLE = "AUTOPROFILER_WORKER"  # the worker's name, set by the driver
PARENT_VARIABLE = "AUTOPROFILER_DRIVER_PID"  # the driver's pid: a worker leaves when it dies


def pack(message: Any) -> bytes:
    """One frame: the pickled message after its length."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def read_message(stream: BinaryIO) -> Any | None:
    """The next message of a blocking stream; None at its end."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    return None if len(data) < size else pickle.loads(data)


class FrameBuffer:
    """Reassembles messages from bytes read in arbitrary pieces."""

    def __init__(self) -> None:
        self._data = bytearray()

    def feed(self, chunk: bytes) -> list[Any]:
        """Add ``chunk``; return the messages now complete."""
        self._data += chunk
        messages = []
        while len(self._data) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._data)
            end = _HEADER.size + size
            if len(self._data) < end:
                break
            messages.append(pickle.loads(bytes(self._data[_HEADER.size : end])))
            del self._data[:end]
        return messages
