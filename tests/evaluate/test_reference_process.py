"""The trusted reference process's own care: it times nothing just after giving memory back."""

from __future__ import annotations

import gc
import io
import json
import math
import time

import pytest
import torch

from autoprofiler.evaluate import EvalConfig, reference


def _server(device: str) -> reference._Server:
    return reference._Server({"config": EvalConfig(device=device).to_dict()})


def test_timing_waits_out_the_moment_after_memory_was_given_back(monkeypatch) -> None:
    monkeypatch.setattr(reference, "SETTLE_S", 0.3)
    server = _server("cpu")
    assert server.gave_back_at == -math.inf
    began = time.monotonic()
    server._settle()  # nothing given back: no wait
    assert time.monotonic() - began < 0.1
    server.gave_back_at = time.monotonic()
    server._settle()
    assert time.monotonic() - server.gave_back_at >= 0.3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_giving_back_a_gib_or_more_is_noted() -> None:
    server = _server("cuda")
    small = torch.empty(2**20, dtype=torch.uint8, device="cuda")
    del small
    server._release()
    assert server.gave_back_at == -math.inf
    block = torch.empty(2 * 2**30, dtype=torch.uint8, device="cuda")
    del block
    server._release()
    assert server.gave_back_at > time.monotonic() - 5


UINT32_OUTPUT = """
import torch
import torch.nn as nn

FORWARDS = []

class Model(nn.Module):
    def forward(self, x):
        FORWARDS.append(tuple(x.shape))
        return x.to(torch.uint32)

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
"""


def test_outputs_that_cannot_cross_as_raw_bytes_are_found_out_once() -> None:
    """A reference output of a dtype outside the slab's: the reference runs once to find out,
    not again on every later offer of a slab."""
    from autoprofiler.evaluate.layout import LayoutError

    server = _server("cpu")
    built = server.problem({"problem_hash": "uint32", "problem_source": UINT32_OUTPUT})
    for _ in range(3):
        with pytest.raises(LayoutError, match="uint32"):
            server._layouts(built)
    assert built.module.FORWARDS and len(built.module.FORWARDS) <= 2  # one per shape, once


def test_what_the_server_imported_is_frozen_out_of_the_collectors_walk_while_it_serves() -> None:
    seen: list[int] = []

    def requests():  # the server reads its requests here, after its set-up
        seen.append(gc.get_freeze_count())
        yield json.dumps({"op": "free", "slab_id": "none"}) + "\n"

    replies = io.StringIO()
    assert gc.get_freeze_count() == 0
    reference.serve({"config": EvalConfig(device="cpu").to_dict()}, requests(), replies)
    assert seen and seen[0] > 10_000, "the server's gc.collect() walks all of torch"
    assert gc.get_freeze_count() == 0, "left frozen: objects at shutdown reported leaked"
    answers = [json.loads(line) for line in replies.getvalue().splitlines()]
    assert answers == [{"ready": True, "device": "cpu"}, {"freed": False}]
