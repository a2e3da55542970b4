"""Shared by the benchmark scripts' tests: the scripts are imported from ``benchmarks/``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def import_benchmark(name: str) -> ModuleType:
    """The script ``benchmarks/NAME.py`` as a module (its folder on the path while importing)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
