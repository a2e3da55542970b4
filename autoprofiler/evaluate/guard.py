"""Run-time guards: what a candidate may not change in the worker, or leave running.

The verdict is made outside the candidate's process, so what a candidate changes here cannot
forge it; these guards are a second line that names the attempt. Before the candidate is
loaded, :class:`RuntimeGuard` records the functions the raw data depends on (torch, its
functional and tensor namespaces, the timers, builtins, the candidate side's own module, the
problem module and classes), the precision settings, the global module hooks, and (where one
is given) a model's parameters and buffers. :meth:`RuntimeGuard.check` reports any change as
a rejecting finding. :func:`background_work` names the other threads that are
still running candidate code. These raise the bar; code that restores what it changed before
the next check is not seen (docs/SECURITY.md says what is and is not covered).
"""

from __future__ import annotations

import builtins
import os
import sys
import threading
import time
import types
from collections.abc import Iterator, Mapping
from typing import Any

import torch
import torch.nn.functional

from autoprofiler.evaluate import timing
from autoprofiler.evaluate.result import Finding
from autoprofiler.evaluate.settings import precision_settings

TIMER_SPACES = frozenset({"time", "torch.cuda.Event", "timing"})
TIMER_ATTRIBUTES = frozenset({"synchronize", "Event", "elapsed_time", "perf_counter"})
GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks")
MAX_NAMES = 4
TORCH_DIR = os.path.join(os.path.dirname(torch.__file__), "")


def _global_hooks() -> dict[str, tuple]:
    module = torch.nn.modules.module
    return {name: tuple(getattr(module, name, {})) for name in GLOBAL_HOOKS}


def _functions(spaces: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Every callable or module in ``spaces``, by dotted name."""
    return {
        f"{label}.{name}": value
        for label, space in spaces.items()
        for name, value in list(space.items())
        if callable(value) or isinstance(value, types.ModuleType)
    }


def _code(functions: Mapping[str, Any]) -> dict[str, types.CodeType]:
    return {
        key: value.__code__
        for key, value in functions.items()
        if isinstance(value, types.FunctionType)
    }


def _torch_wraps(new: Any, original: Any) -> bool:
    """Whether ``new`` is torch's own wrapper around ``original``.

    Importing ``torch._dynamo`` (on a first ``torch.compile``) rebinds a few functions this way,
    e.g. ``torch.manual_seed`` and ``torch.nn.Module.__init__``.
    """
    code = getattr(new, "__code__", None)
    if not isinstance(new, types.FunctionType) or not code.co_filename.startswith(TORCH_DIR):
        return False
    if getattr(new, "__wrapped__", None) is original:
        return True
    for cell in new.__closure__ or ():
        try:
            if cell.cell_contents is original:
                return True
        except ValueError:  # an empty cell
            continue
    return False


def _module_structure(model: torch.nn.Module) -> dict[str, tuple]:
    """Each submodule's class, forward and hooks: what decides how it computes."""
    return {
        name: (
            type(module),
            type(module).forward,
            module.__dict__.get("forward"),
            tuple(module._forward_hooks),
            tuple(module._forward_pre_hooks),
        )
        for name, module in model.named_modules()
    }


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A host copy of the parameters and buffers (compared by value, not by identity)."""
    tensors = [*model.named_parameters(), *model.named_buffers()]
    return {name: tensor.detach().to("cpu", copy=True) for name, tensor in tensors}


def _names(keys: Iterator[str] | list[str]) -> str:
    keys = sorted(keys)
    more = f" and {len(keys) - MAX_NAMES} more" if len(keys) > MAX_NAMES else ""
    return ", ".join(keys[:MAX_NAMES]) + more


class RuntimeGuard:
    """A record of the worker's state before the candidate loads, to compare against later."""

    def __init__(
        self,
        reference_module: types.ModuleType,
        reference: torch.nn.Module | None,
        evaluator: Mapping[str, Any],
    ) -> None:
        reference = reference if reference is not None else torch.nn.Module()
        self._reference = reference
        self._spaces = self._watched_spaces(reference_module, reference, evaluator)
        self._functions = _functions(self._spaces)
        self._code = _code(self._functions)
        self._precision = precision_settings()
        self._hooks = _global_hooks()
        self._structure = _module_structure(reference)
        self._state = _state(reference)

    @staticmethod
    def _watched_spaces(
        reference_module: types.ModuleType,
        reference: torch.nn.Module,
        evaluator: Mapping[str, Any],
    ) -> dict[str, Mapping[str, Any]]:
        spaces: dict[str, Mapping[str, Any]] = {
            "builtins": vars(builtins),
            "time": vars(time),
            "torch": vars(torch),
            "torch.nn.functional": vars(torch.nn.functional),
            "torch.Tensor": vars(torch.Tensor),
            "torch.nn.Module": vars(torch.nn.Module),
            "torch.cuda": vars(torch.cuda),
            "torch.cuda.Event": vars(torch.cuda.Event),
            "timing": vars(timing),
            "worker": evaluator,
            "reference": vars(reference_module),
        }
        for module in reference.modules():
            cls = type(module)
            spaces.setdefault(f"{cls.__module__}.{cls.__qualname__}", vars(cls))
        return spaces

    def check(self) -> list[Finding]:
        """Findings for every change since the record was taken (empty when none)."""
        findings = []
        changed = self._replaced()
        timers = [key for key in changed if self._is_timer(key)]
        others = [key for key in changed if key not in timers]
        if timers:
            findings.append(Finding("patches_timer", f"replaced {_names(timers)}", "reject"))
        if others:
            findings.append(Finding("patches_runtime", f"replaced {_names(others)}", "reject"))
        precision = precision_settings()
        moved = [
            f"{key} {self._precision[key]} -> {precision.get(key)}"
            for key in self._precision
            if precision.get(key) != self._precision[key]
        ]
        if moved:
            detail = f"{_names(moved)}: the reference would compute under it too"
            findings.append(Finding("changes_precision", detail, "reject"))
        tampered = self._tampered_reference()
        if tampered:
            findings.append(Finding("tampers_reference", tampered, "reject"))
        return findings

    def _replaced(self) -> list[str]:
        """Names now bound to something else, or whose function has other code."""
        now = _functions(self._spaces)
        replaced = []
        for key, before in self._functions.items():
            value = now.get(key)
            if value is before:
                if key in self._code and value.__code__ is not self._code[key]:
                    replaced.append(f"{key}.__code__")
            elif not _torch_wraps(value, before):
                replaced.append(key)
        return replaced

    def _is_timer(self, key: str) -> bool:
        labels = [label for label in self._spaces if key.startswith(f"{label}.")]
        space = max(labels, key=len, default="")
        attribute = key.removeprefix(f"{space}.").split(".")[0]
        return space in TIMER_SPACES or attribute in TIMER_ATTRIBUTES

    def _tampered_reference(self) -> str:
        if _global_hooks() != self._hooks:
            return "registered a global module hook (it would rewrite the reference's output)"
        if _module_structure(self._reference) != self._structure:
            return "changed the reference model's modules, forward or hooks"
        state = dict([*self._reference.named_parameters(), *self._reference.named_buffers()])
        if state.keys() != self._state.keys():
            return "replaced the reference model's parameters"
        for name, before in self._state.items():
            now = state[name].detach()
            if now.shape != before.shape or not torch.equal(now.to("cpu"), before):
                return f"changed the reference model's {name}"
        return ""


def background_work(candidate_file: str) -> list[str]:
    """Names of the other threads whose stack holds candidate code right now.

    This thread's own frame is never bound to a name here: it would refer to itself, and
    the cycle would keep its callers' frames, with the inputs and outputs of the trial in
    them, alive until the next garbage collection (on the H100 that held 12 GiB a trial
    of a 6 GiB problem and ran an honest candidate out of memory)."""
    frames = sys._current_frames()
    frames.pop(threading.get_ident(), None)
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    busy = []
    for ident, frame in frames.items():
        walker: types.FrameType | None = frame
        while walker is not None:
            if walker.f_code.co_filename == candidate_file:
                busy.append(names.get(ident, str(ident)))
                break
            walker = walker.f_back
    return busy
