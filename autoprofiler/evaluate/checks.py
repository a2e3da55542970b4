"""Static checks on candidate source: each a small pure function returning findings.

These flag code that is suspicious in a kernel rewrite (they do not prove a cheat); the
dynamic checks in the worker (constant outputs, aliasing, output re-checked after timing)
reject the cheats that can be shown at run time.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from autoprofiler.evaluate.result import Finding

Check = Callable[[ast.Module], Iterator[Finding]]


def _calls(tree: ast.Module) -> Iterator[ast.Call]:
    return (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def uses_reference_model(tree: ast.Module) -> Iterator[Finding]:
    """``ModelNew`` that inherits from or builds the reference ``Model``."""
    for node in ast.walk(tree):
        is_modelnew = isinstance(node, ast.ClassDef) and node.name == "ModelNew"
        if is_modelnew and any(_dotted(base) == "Model" for base in node.bases):
            yield Finding("inherits_reference", "ModelNew inherits from the reference Model")
    for call in _calls(tree):
        if _dotted(call.func) == "Model":
            yield Finding("calls_reference", "the candidate builds the reference Model")
            return


def patches_timing(tree: ast.Module) -> Iterator[Finding]:
    """Assignments to timer or event attributes (``torch.cuda.Event = ...``)."""
    suspicious = ("Event", "elapsed_time", "synchronize", "perf_counter", "time")
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                name = _dotted(target)
                if "." in name and name.rsplit(".", 1)[1] in suspicious:
                    yield Finding("patches_timer", f"assigns to {name}", severity="reject")


def catches_everything(tree: ast.Module) -> Iterator[Finding]:
    """A bare or broad ``except`` (a fallback path that can hide a broken kernel)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and (
            node.type is None or _dotted(node.type) in {"Exception", "BaseException"}
        ):
            yield Finding("broad_except", f"broad except at line {node.lineno} (fallback path?)")
            return


def side_channels(tree: ast.Module) -> Iterator[Finding]:
    """Threads, extra streams, ``gc`` or frame inspection: ways around the timed region."""
    markers = {
        "threading.Thread": "starts a thread",
        "torch.cuda.Stream": "uses a side CUDA stream",
        "gc.get_objects": "reads objects through gc",
        "sys._getframe": "inspects caller frames",
        "inspect.stack": "inspects caller frames",
    }
    seen = set()
    for call in _calls(tree):
        name = _dotted(call.func)
        for marker, detail in markers.items():
            if name.endswith(marker) and marker not in seen:
                seen.add(marker)
                yield Finding("side_channel", detail)


CHECKS: tuple[Check, ...] = (
    uses_reference_model,
    patches_timing,
    catches_everything,
    side_channels,
)


def scan_source(source: str) -> list[Finding]:
    """Run every static check over ``source`` (a source that does not parse yields nothing)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [finding for check in CHECKS for finding in check(tree)]
