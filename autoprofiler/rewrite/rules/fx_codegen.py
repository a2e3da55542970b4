"""Re-emit a traced forward as Python source, with some of its nodes replaced by calls.

The emitted function takes the reference module as ``self``: ``self.linear(x)`` calls the
reference's own submodules, so the candidate keeps the reference's parameters (same seed, same
order) and only the replaced nodes change.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import GraphModule, Node

# Names FX's code generator may refer to, and how the candidate provides each.
_FX_GLOBALS = {
    "torch": "",  # every candidate imports torch
    "inf": "from math import inf",
    "nan": "from math import nan",
    "NoneType": "NoneType = type(None)",
    "device": "from torch import device",
    "fx_pytree": "import torch.fx._pytree as fx_pytree",
    "pytree": "import torch.utils._pytree as pytree",
}


class CodegenError(ValueError):
    """A traced forward that cannot be emitted as standalone source."""


@dataclass(frozen=True)
class NodeArg:
    """An argument that is the value of the FX node ``name``."""

    name: str


@dataclass(frozen=True)
class AttrArg:
    """An argument that is the reference module's attribute ``path`` (``"ln.weight"``)."""

    path: str


@dataclass(frozen=True)
class Replacement:
    """Replace ``nodes`` by one call of ``function`` whose value the users of ``results`` read.

    ``args`` are ``NodeArg``, ``AttrArg`` or plain constants (numbers, strings, bools, None).
    """

    function: str
    args: tuple[Any, ...]
    results: tuple[str, ...]
    nodes: tuple[str, ...]


def _placeholder(name: str) -> Callable[..., Any]:
    """A function object FX can call ``name`` (it is replaced by that name in the source)."""

    def call(*args: Any) -> Any:
        raise RuntimeError(f"{name} is a code generation placeholder")

    call.__name__ = call.__qualname__ = name
    return call


def _apply(
    graph: torch.fx.Graph, replacement: Replacement, target: Any, nodes: dict[str, Node]
) -> None:
    """Apply one replacement; ``nodes`` (name to node) then maps its results to the new call."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    results = [nodes[name] for name in replacement.results]
    with graph.inserting_before(min(results, key=order.__getitem__)):
        args = tuple(
            nodes[a.name]
            if isinstance(a, NodeArg)
            else graph.get_attr(a.path)
            if isinstance(a, AttrArg)
            else a
            for a in replacement.args
        )
        name = replacement.function.removeprefix("_ap_") + "_out"
        call = graph.create_node("call_function", target, args, {}, name=name)
    for result in results:
        result.replace_all_uses_with(call)
    removed = sorted({nodes[n] for n in replacement.nodes}, key=order.__getitem__, reverse=True)
    for node in removed:
        graph.erase_node(node)
    for name in replacement.nodes:
        del nodes[name]
    nodes.update(dict.fromkeys(replacement.results, call))


def emit_forward(
    graph_module: GraphModule,
    replacements: Sequence[Replacement] = (),
    module_name: str = "",
    name: str = "_ap_forward",
) -> str:
    """Source of ``def name(self, ...)``: the traced forward with ``replacements`` applied.

    ``module_name`` is the module the problem was loaded as: FX names the problem's own helper
    functions after it, and the candidate (which contains the problem's source) calls them by
    their plain names. Raises ``CodegenError`` for references the candidate cannot provide.
    """
    graph = copy.deepcopy(graph_module.graph)
    targets = {r.function: _placeholder(r.function) for r in replacements}
    nodes = {n.name: n for n in graph.nodes}
    for replacement in replacements:
        _apply(graph, replacement, targets[replacement.function], nodes)
    for node in list(graph.nodes):
        node.type = None  # annotations would name types the candidate does not import
        if node.op == "get_attr" and not node.users:
            graph.erase_node(node)
        elif node.op == "get_attr" and str(node.target).startswith("_tensor_constant"):
            raise CodegenError("the forward builds a tensor constant that only the trace holds")
    graph.lint()
    code = graph.python_code(root_module="self")
    source = code.src
    preamble = []
    by_object = {id(fn): fn_name for fn_name, fn in targets.items()}
    for global_name, value in sorted(code.globals.items()):
        if not re.search(rf"\b{re.escape(global_name)}\b", source):
            continue
        if id(value) in by_object:
            plain = by_object[id(value)]
        elif global_name in _FX_GLOBALS:
            preamble.append(_FX_GLOBALS[global_name])
            continue
        elif callable(value) and getattr(value, "__module__", None) == module_name and module_name:
            plain = value.__name__
        else:
            raise CodegenError(f"the traced forward refers to {global_name!r} ({value!r})")
        source = re.sub(rf"\b{re.escape(global_name)}\b", plain, source)
    source = re.sub(r"\bdef forward\(", f"def {name}(", source, count=1).strip()
    return "\n".join([*filter(None, preamble), "", "", source]).strip() + "\n"
