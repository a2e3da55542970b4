"""Forging the worker's "done" on its status pipe, then hanging.

Writes ``done`` to every pipe the process holds, so an evaluator that trusted it would wait for
the worker forever; then sleeps for good.
Verdict: timeout
"""

import os
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for name in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                    os.write(int(name), b"done\n")
            except OSError:
                continue
        while True:
            time.sleep(1)
