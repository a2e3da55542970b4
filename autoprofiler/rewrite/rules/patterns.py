"""Patterns in a traced FX graph that a generated Triton kernel can replace.

Two kinds, both plain data naming FX nodes, so a code generator can rewrite a copy of the graph:

- ``ElementwiseGroup``: a connected set of float32 elementwise ops with one result (a chain, or
  a small DAG such as ``x * sigmoid(x)``), often the epilogue of a GEMM or convolution.
- ``RowSite``: a softmax, log-softmax, layer norm or sum/mean/max/min reduction over one dim.

Every op is recognised in its three spellings (``torch.relu``/``F.relu``, ``x.relu()``,
``nn.ReLU``); an op with arguments the kernels do not model (``alpha``, ``rounding_mode``,
``dtype``, tensor bounds, non-float32 tensors) is left to PyTorch.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import GraphModule, Node

from autoprofiler.rewrite.rules.graph import tensor_meta

Scalar = float | int

# Canonical elementwise ops. Binary: add, sub, mul, div, maximum, minimum; the rest are unary.
# Parameters (``Step.params``): leaky_relu (slope), elu (alpha), softplus (beta, threshold),
# clamp (low, high; None for no bound).
ELEMENTWISE_OPS = frozenset(
    {
        *("add", "sub", "mul", "div", "maximum", "minimum", "neg", "abs", "square", "cube"),
        *("relu", "leaky_relu", "elu", "selu", "clamp", "hardsigmoid", "hardswish"),
        *("sigmoid", "tanh", "gelu", "gelu_tanh", "silu", "mish", "softplus"),
        *("exp", "log", "sqrt", "rsqrt", "reciprocal"),
    }
)
HEAVY_MODULES = (nn.Linear, nn.Bilinear, nn.modules.conv._ConvNd)
HEAVY_FUNCTIONS = frozenset(
    {"linear", "matmul", "mm", "bmm", "addmm", "conv1d", "conv2d", "conv3d", "einsum"}
)


@dataclass(frozen=True)
class Ref:
    """An operand of a fused step: an external input, an earlier step or a constant."""

    kind: str  # "input" | "step" | "const"
    value: Scalar


@dataclass(frozen=True)
class Step:
    """One canonical elementwise op applied to its operands."""

    op: str
    args: tuple[Ref, ...]
    params: tuple[Scalar | None, ...] = ()


@dataclass(frozen=True)
class ElementwiseGroup:
    """Elementwise ops fused into one kernel.

    ``inputs`` are the FX nodes the kernel reads (float32 tensors that broadcast together),
    ``nodes`` the FX nodes it replaces in graph order (the last is the result), ``producer``
    the GEMM/convolution it is the epilogue of ("" when none).
    """

    inputs: tuple[str, ...]
    steps: tuple[Step, ...]
    nodes: tuple[str, ...]
    producer: str = ""

    @property
    def result(self) -> str:
        return self.nodes[-1]


@dataclass(frozen=True)
class RowSite:
    """A row-wise op over one dim: softmax, log-softmax, layer norm or a reduction.

    ``dim`` is non-negative; for ``layer_norm`` it is the first normalized dim (the rows are the
    flattened trailing dims). ``weight``/``bias`` name an FX node, or ``attr:<path>`` for a
    module's parameter, or are "" when absent. ``results`` are the nodes whose users read the
    kernel's output; ``nodes`` all the nodes it replaces.
    """

    kind: str
    input: str
    dim: int
    ndim: int
    keepdim: bool = False
    weight: str = ""
    bias: str = ""
    eps: float = 1e-5
    nodes: tuple[str, ...] = ()
    results: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Match:
    op: str
    operands: tuple[Node | Scalar, ...]
    params: tuple[Scalar | None, ...] = ()


@dataclass(frozen=True)
class _Signature:
    family: str
    names: tuple[str, ...]
    defaults: tuple[tuple[str, Any], ...] = ()

    def bind(self, node: Node) -> dict[str, Any] | None:
        """Arguments by name (defaults filled in), or None for arguments it does not know."""
        if len(node.args) > len(self.names) or set(node.kwargs) - set(self.names):
            return None
        bound = dict(self.defaults)
        bound.update(zip(self.names, node.args))
        bound.update(node.kwargs)
        return bound


def _sig(family: str, *names: str, **defaults: Any) -> _Signature:
    return _Signature(family, ("input", *names), tuple(defaults.items()))


_UNARY_METHODS = ("neg", "relu", "sigmoid", "tanh", "exp", "log", "abs", "sqrt", "rsqrt", "square")
# Tensor methods by name; the torch functions of the same names take the same arguments.
ELEMENTWISE_METHODS: dict[str, _Signature] = {
    "add": _sig("add", "other", alpha=1),
    "sub": _sig("sub", "other", alpha=1),
    "mul": _sig("mul", "other"),
    "div": _sig("div", "other", rounding_mode=None),
    "true_divide": _sig("div", "other"),
    "maximum": _sig("maximum", "other"),
    "minimum": _sig("minimum", "other"),
    "pow": _sig("pow", "exponent"),
    "clamp": _sig("clamp", "min", "max", min=None, max=None),
    "clip": _sig("clamp", "min", "max", min=None, max=None),
    "clamp_min": _sig("clamp", "min", max=None),
    "clamp_max": _sig("clamp", "max", min=None),
    **{name: _sig(name) for name in _UNARY_METHODS},
}
ELEMENTWISE_FUNCTIONS: dict[Callable[..., Any], _Signature] = {
    operator.add: _sig("add", "other"),
    operator.sub: _sig("sub", "other"),
    operator.mul: _sig("mul", "other"),
    operator.truediv: _sig("div", "other"),
    operator.neg: _sig("neg"),
    operator.pow: _sig("pow", "exponent"),
    **{getattr(torch, name): sig for name, sig in ELEMENTWISE_METHODS.items()},
    F.relu: _sig("relu", "inplace", inplace=False),
    F.relu6: _sig("relu6", "inplace", inplace=False),
    F.silu: _sig("silu", "inplace", inplace=False),
    F.mish: _sig("mish", "inplace", inplace=False),
    F.hardswish: _sig("hardswish", "inplace", inplace=False),
    F.hardsigmoid: _sig("hardsigmoid", "inplace", inplace=False),
    F.sigmoid: _sig("sigmoid"),
    F.tanh: _sig("tanh"),
    F.gelu: _sig("gelu", "approximate", approximate="none"),
    F.leaky_relu: _sig("leaky_relu", "negative_slope", "inplace", negative_slope=0.01),
    F.hardtanh: _sig("hardtanh", "min_val", "max_val", "inplace", min_val=-1.0, max_val=1.0),
    F.elu: _sig("elu", "alpha", "inplace", alpha=1.0),
    F.selu: _sig("selu", "inplace", inplace=False),
    torch.selu: _sig("selu"),
    F.softplus: _sig("softplus", "beta", "threshold", beta=1.0, threshold=20.0),
}
_POWERS = {2: "square", 3: "cube", 0.5: "sqrt", -1: "reciprocal"}


def _module_match(module: nn.Module) -> tuple[str, tuple[Scalar | None, ...]] | None:
    """The canonical op (and parameters) an activation module computes."""
    simple = {
        nn.ReLU: "relu",
        nn.Sigmoid: "sigmoid",
        nn.Tanh: "tanh",
        nn.SiLU: "silu",
        nn.Mish: "mish",
        nn.Hardswish: "hardswish",
        nn.Hardsigmoid: "hardsigmoid",
        nn.SELU: "selu",
    }
    if type(module) in simple:
        return simple[type(module)], ()
    if isinstance(module, nn.GELU):
        return {"none": ("gelu", ()), "tanh": ("gelu_tanh", ())}.get(module.approximate)
    if isinstance(module, nn.LeakyReLU):
        return "leaky_relu", (module.negative_slope,)
    if isinstance(module, nn.Hardtanh):  # ReLU6 too
        return "clamp", (module.min_val, module.max_val)
    if isinstance(module, nn.ELU):
        return "elu", (module.alpha,)
    if isinstance(module, nn.Softplus):
        return "softplus", (module.beta, module.threshold)
    return None


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _resolve(family: str, bound: dict[str, Any]) -> _Match | None:
    """The canonical op for a function or method family with its bound arguments."""
    x = bound["input"]
    if family in ("add", "sub") and bound.get("alpha", 1) != 1:
        return None
    if family == "div" and bound.get("rounding_mode") is not None:
        return None
    if family in ("add", "sub", "mul", "div", "maximum", "minimum"):
        return _Match(family, (x, bound["other"]))
    if family == "pow":
        power = bound["exponent"]
        op = _POWERS.get(power) if _is_scalar(power) else None
        return _Match(op, (x,)) if op else None
    if family == "clamp":
        low, high = bound["min"], bound["max"]
        if (low is None and high is None) or not all(
            b is None or _is_scalar(b) for b in (low, high)
        ):
            return None
        return _Match("clamp", (x,), (low, high))
    if family == "relu6":
        return _Match("clamp", (x,), (0.0, 6.0))
    if family == "hardtanh":
        return _Match("clamp", (x,), (bound["min_val"], bound["max_val"]))
    if family == "gelu":
        op = {"none": "gelu", "tanh": "gelu_tanh"}.get(bound["approximate"])
        return _Match(op, (x,)) if op else None
    params = {
        "leaky_relu": ("negative_slope",),
        "elu": ("alpha",),
        "softplus": ("beta", "threshold"),
    }
    values = tuple(bound[name] for name in params.get(family, ()))
    if not all(_is_scalar(v) for v in values):
        return None
    return _Match(family, (x,), values)


def _float32(node: Node) -> bool:
    meta = tensor_meta(node)
    return meta is not None and meta.dtype == torch.float32


def match_elementwise(node: Node, graph_module: GraphModule) -> _Match | None:
    """The canonical elementwise op ``node`` computes on float32 tensors, or None."""
    if not _float32(node):
        return None
    match: _Match | None = None
    bound: dict[str, Any] | None = None
    if node.op == "call_module":
        module = graph_module.get_submodule(node.target)
        found = _module_match(module)
        if found is not None and len(node.args) == 1 and not node.kwargs:
            match = _Match(found[0], (node.args[0],), found[1])
            bound = {"inplace": getattr(module, "inplace", False)}
    else:
        signature = None
        if node.op == "call_function":
            signature = ELEMENTWISE_FUNCTIONS.get(node.target)
        elif node.op == "call_method":
            signature = ELEMENTWISE_METHODS.get(node.target)
        bound = signature.bind(node) if signature else None
        match = _resolve(signature.family, bound) if bound is not None else None
    if match is None or match.op not in ELEMENTWISE_OPS:
        return None
    if not all(_is_scalar(p) or p is None for p in match.params):
        return None
    tensors = [a for a in match.operands if isinstance(a, Node)]
    if not tensors or not all(
        _is_scalar(a) or (isinstance(a, Node) and _float32(a)) for a in match.operands
    ):
        return None
    if bound is not None and bound.get("inplace") and len(tensors[0].users) > 1:
        return None  # the in-place update is seen by the input's other users
    return match


def _producer(node: Node, graph_module: GraphModule) -> str:
    """A short label when ``node`` is a GEMM or convolution ("Linear", "conv2d"), else ""."""
    if node.op == "call_module":
        module = graph_module.get_submodule(node.target)
        return type(module).__name__ if isinstance(module, HEAVY_MODULES) else ""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return name if name in HEAVY_FUNCTIONS else ""


def find_elementwise_groups(graph_module: GraphModule) -> list[ElementwiseGroup]:
    """Maximal single-result groups of fusable elementwise ops, in graph order.

    Walking the graph backwards, each unassigned fusable node starts a group as its result and
    pulls in the fusable producers whose every user is already in the group.
    """
    nodes = list(graph_module.graph.nodes)
    matches = {n: m for n in nodes if (m := match_elementwise(n, graph_module)) is not None}
    assigned: dict[Node, int] = {}
    members: list[list[Node]] = []
    for node in reversed(nodes):
        if node not in matches or node in assigned:
            continue
        index = len(members)
        group, frontier = [node], [node]
        assigned[node] = index
        while frontier:
            current = frontier.pop()
            for operand in matches[current].operands:
                if (
                    isinstance(operand, Node)
                    and operand in matches
                    and operand not in assigned
                    and all(assigned.get(user) == index for user in operand.users)
                ):
                    assigned[operand] = index
                    group.append(operand)
                    frontier.append(operand)
        members.append(group)
    order = {n: i for i, n in enumerate(nodes)}
    groups = [
        _build_group(sorted(m, key=order.__getitem__), matches, graph_module) for m in members
    ]
    position = {n.name: i for i, n in enumerate(nodes)}
    return sorted(groups, key=lambda g: position[g.result])


def _build_group(
    members: list[Node], matches: dict[Node, _Match], graph_module: GraphModule
) -> ElementwiseGroup:
    inputs: list[Node] = []
    position = {node: i for i, node in enumerate(members)}
    steps = []
    for node in members:
        args = []
        for operand in matches[node].operands:
            if not isinstance(operand, Node):
                args.append(Ref("const", operand))
            elif operand in position:
                args.append(Ref("step", position[operand]))
            else:
                if operand not in inputs:
                    inputs.append(operand)
                args.append(Ref("input", inputs.index(operand)))
        steps.append(Step(matches[node].op, tuple(args), matches[node].params))
    producer = next((p for n in inputs if (p := _producer(n, graph_module))), "")
    return ElementwiseGroup(
        inputs=tuple(n.name for n in inputs),
        steps=tuple(steps),
        nodes=tuple(n.name for n in members),
        producer=producer,
    )


_SOFTMAX_FUNCTIONS = {
    torch.softmax: _sig("softmax", "dim", "dtype", dtype=None),
    F.softmax: _sig("softmax", "dim", "_stacklevel", "dtype", dim=None, dtype=None),
    torch.log_softmax: _sig("log_softmax", "dim", "dtype", dtype=None),
    F.log_softmax: _sig("log_softmax", "dim", "_stacklevel", "dtype", dim=None, dtype=None),
}
_REDUCTION_FUNCTIONS = {
    torch.sum: _sig("sum", "dim", "keepdim", "dtype", dim=None, keepdim=False, dtype=None),
    torch.mean: _sig("mean", "dim", "keepdim", "dtype", dim=None, keepdim=False, dtype=None),
    torch.amax: _sig("max", "dim", "keepdim", dim=(), keepdim=False),
    torch.amin: _sig("min", "dim", "keepdim", dim=(), keepdim=False),
}
# torch.max(x, dim) and x.max(dim) return (values, indices): only the values may be read.
_INDEXED_REDUCTIONS = {torch.max: "max", torch.min: "min", "max": "max", "min": "min"}
_LAYER_NORM = _sig(
    "layer_norm", "normalized_shape", "weight", "bias", "eps", weight=None, bias=None, eps=1e-5
)
_ROW_METHODS = {
    "softmax": _sig("softmax", "dim", "dtype", dtype=None),
    "log_softmax": _sig("log_softmax", "dim", "dtype", dtype=None),
    "sum": _REDUCTION_FUNCTIONS[torch.sum],
    "mean": _REDUCTION_FUNCTIONS[torch.mean],
    "amax": _REDUCTION_FUNCTIONS[torch.amax],
    "amin": _REDUCTION_FUNCTIONS[torch.amin],
}


def _single_dim(dim: Any, ndim: int) -> int | None:
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    if isinstance(dim, int) and not isinstance(dim, bool) and -ndim <= dim < ndim:
        return dim % ndim
    return None


def _value_users(node: Node) -> list[Node] | None:
    """The users that read only the values of a ``(values, indices)`` result, or None."""
    users = list(node.users)
    for user in users:
        is_values = (user.target is operator.getitem and user.args[1:] == (0,)) or (
            user.target is getattr and user.args[1:] == ("values",)
        )
        if user.op != "call_function" or not is_values or not _float32(user):
            return None
    return users or None


def _row_site(node: Node, graph_module: GraphModule) -> RowSite | None:
    """The row site ``node`` is, or None."""
    if node.op == "call_module":
        return _module_row_site(node, graph_module)
    if node.op not in ("call_method", "call_function"):
        return None
    indexed = node.target in _INDEXED_REDUCTIONS
    if indexed:
        signature = _sig(_INDEXED_REDUCTIONS[node.target], "dim", "keepdim", keepdim=False)
    elif node.op == "call_method":
        signature = _ROW_METHODS.get(node.target)
    else:
        signature = (
            _SOFTMAX_FUNCTIONS.get(node.target)
            or _REDUCTION_FUNCTIONS.get(node.target)
            or (_LAYER_NORM if node.target in (F.layer_norm, torch.layer_norm) else None)
        )
    bound = signature.bind(node) if signature else None
    x = bound.get("input") if bound else None
    if bound is None or not isinstance(x, Node) or not _float32(x):
        return None
    ndim = len(tensor_meta(x).shape)
    if signature.family == "layer_norm":
        return _layer_norm_site(node, x, ndim, bound)
    dim = _single_dim(bound.get("dim"), ndim)
    if (
        dim is None
        or bound.get("dtype") is not None
        or not isinstance(bound.get("keepdim", False), bool)
    ):
        return None
    results: tuple[Node, ...] = (node,)
    removed: tuple[Node, ...] = (node,)
    if indexed:
        users = _value_users(node)
        if users is None:
            return None
        results, removed = tuple(users), (node, *users)
    elif not _float32(node):
        return None
    return RowSite(
        kind=signature.family,
        input=x.name,
        dim=dim,
        ndim=ndim,
        keepdim=bound.get("keepdim", False),
        nodes=tuple(n.name for n in removed),
        results=tuple(n.name for n in results),
    )


def _layer_norm_site(node: Node, x: Node, ndim: int, bound: dict[str, Any]) -> RowSite | None:
    shape = bound["normalized_shape"]
    shape = (shape,) if isinstance(shape, int) else shape
    weight, bias, eps = bound["weight"], bound["bias"], bound["eps"]
    if (
        not isinstance(shape, (tuple, list))
        or not all(isinstance(s, int) for s in shape)
        or not 0 < len(shape) <= ndim
        or not _is_scalar(eps)
        or not all(p is None or (isinstance(p, Node) and _float32(p)) for p in (weight, bias))
        or not _float32(node)
    ):
        return None
    return RowSite(
        kind="layer_norm",
        input=x.name,
        dim=ndim - len(shape),
        ndim=ndim,
        weight=weight.name if weight is not None else "",
        bias=bias.name if bias is not None else "",
        eps=float(eps),
        nodes=(node.name,),
        results=(node.name,),
    )


def _module_row_site(node: Node, graph_module: GraphModule) -> RowSite | None:
    module = graph_module.get_submodule(node.target)
    if len(node.args) != 1 or node.kwargs or not isinstance(node.args[0], Node):
        return None
    x = node.args[0]
    if not _float32(x) or not _float32(node):
        return None
    ndim = len(tensor_meta(x).shape)
    if isinstance(module, (nn.Softmax, nn.LogSoftmax)):
        dim = _single_dim(module.dim, ndim)
        if dim is None:
            return None
        kind = "softmax" if isinstance(module, nn.Softmax) else "log_softmax"
        return RowSite(kind, x.name, dim, ndim, nodes=(node.name,), results=(node.name,))
    if isinstance(module, nn.LayerNorm) and len(module.normalized_shape) <= ndim:
        has_weight = module.weight is not None
        has_bias = module.bias is not None
        return RowSite(
            kind="layer_norm",
            input=x.name,
            dim=ndim - len(module.normalized_shape),
            ndim=ndim,
            weight=f"attr:{node.target}.weight" if has_weight else "",
            bias=f"attr:{node.target}.bias" if has_bias else "",
            eps=float(module.eps),
            nodes=(node.name,),
            results=(node.name,),
        )
    return None


def find_row_sites(graph_module: GraphModule) -> list[RowSite]:
    """Every softmax, layer norm and single-dim reduction on float32 tensors, in graph order."""
    return [s for n in graph_module.graph.nodes if (s := _row_site(n, graph_module)) is not None]


def channels_last_hazards(graph_module: GraphModule) -> list[str]:
    """Nodes that fail on channels-last tensors: ``.view`` of a 4-D or 5-D tensor."""
    hazards = []
    for node in graph_module.graph.nodes:
        source = node.args[0] if node.args and isinstance(node.args[0], Node) else None
        meta = tensor_meta(source) if source is not None else None
        is_view = node.op == "call_method" and node.target == "view"
        if is_view and meta is not None and len(meta.shape) in (4, 5):
            hazards.append(node.name)
    return hazards
