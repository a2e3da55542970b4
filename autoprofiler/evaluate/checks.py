"""Static checks on candidate source: each a small pure function returning findings.

They run in the caller (the runner), where the candidate cannot reach them, and flag code that
is suspicious in a kernel rewrite; a ``reject`` finding fails the candidate. At run time the
trusted verdict (:mod:`autoprofiler.evaluate.verdict`: outputs of every trial and of the timed
calls, constant outputs, a second input shape, the wall clock) and the watchers in the
candidate's process (:mod:`autoprofiler.evaluate.guard`, :mod:`autoprofiler.evaluate.audit`)
catch what can only be seen then.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from autoprofiler.evaluate.result import Finding

Check = Callable[[ast.Module], Iterator[Finding]]

TIMER_NAMES = frozenset(
    {"Event", "elapsed_time", "synchronize", "perf_counter", "perf_counter_ns", "time", "monotonic"}
)
# Attributes of torch that candidates may set: backend flags and compiler configuration.
SETTABLE_TORCH = ("torch.backends.", "torch._dynamo.config.", "torch._inductor.config.")
SIDE_CHANNELS = {
    "threading.Thread": "starts a thread",
    "_thread.start_new_thread": "starts a thread",
    "concurrent.futures.ThreadPoolExecutor": "starts a thread pool",
    "concurrent.futures.ProcessPoolExecutor": "starts a process pool",
    "multiprocessing.Process": "starts a process",
    "os.fork": "forks a process",
    "torch.cuda.Stream": "uses a side CUDA stream",
}
RUNTIME_INSPECTION = {
    "gc.get_objects": "reads the worker's objects through gc",
    "gc.get_referrers": "reads the worker's objects through gc",
    "gc.get_referents": "reads the worker's objects through gc",
    "sys._getframe": "inspects caller frames",
    "sys._current_frames": "inspects other threads' frames",
    "sys.modules": "reaches other modules through sys.modules",
    "inspect.currentframe": "inspects caller frames",
    "inspect.stack": "inspects caller frames",
    "inspect.getouterframes": "inspects caller frames",
}
FRAME_ATTRIBUTES = frozenset(
    {"f_back", "f_locals", "f_globals", "tb_frame", "gi_frame", "cr_frame", "__globals__"}
)
EVALUATOR_WORDS = ("autoprofiler.", "autoprofiler_", "job.json", "result_path", "status_fd")
DYNAMIC_CODE = frozenset({"exec", "eval", "compile", "__import__", "importlib.import_module"})
# torch calls that allocate, seed or configure rather than compute.
NOT_COMPUTE = frozenset(
    {
        "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like",
        "full", "full_like", "tensor", "as_tensor", "from_numpy", "arange", "linspace",
        "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm",
        "manual_seed", "device", "dtype", "no_grad", "inference_mode", "enable_grad",
        "set_grad_enabled", "compile", "is_tensor", "numel", "get_default_dtype", "module",
        "parameter", "buffer", "sequential", "modulelist", "moduledict", "parameterlist",
        "parameterdict", "identity",
    }
)  # fmt: skip
NOT_COMPUTE_PREFIXES = (
    "torch.nn.init.",
    "torch.cuda.",
    "torch.backends.",
    "torch.utils.",
    "torch.autograd.",
    "torch.library.",
    "torch.ops.",
    "torch._",
)
OP_FAMILIES = {"mm": "matmul", "bmm": "matmul", "addmm": "matmul", "baddbmm": "matmul"}
REFERENCE_ONLY = frozenset({"Model", "get_inputs", "get_init_inputs", "get_inputs_alt"})


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Names bound by imports: ``F`` -> ``torch.nn.functional``, ``sleep`` -> ``time.sleep``."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    names[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _resolve(node: ast.AST, aliases: dict[str, str]) -> str:
    """The dotted name of ``node`` with its first part resolved through the imports."""
    name = _dotted(node)
    head, _, rest = name.partition(".")
    target = aliases.get(head)
    if target is None:
        return name
    return f"{target}.{rest}" if rest else target


def _resolved_calls(tree: ast.AST) -> Iterator[tuple[ast.Call, str]]:
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node, _resolve(node.func, aliases)


def uses_reference_model(tree: ast.Module) -> Iterator[Finding]:
    """``ModelNew`` that inherits from or builds the reference ``Model``."""
    for node in ast.walk(tree):
        is_modelnew = isinstance(node, ast.ClassDef) and node.name == "ModelNew"
        if is_modelnew and any(_dotted(base) == "Model" for base in node.bases):
            yield Finding("inherits_reference", "ModelNew inherits from the reference Model")
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        if _dotted(call.func) == "Model":
            yield Finding("calls_reference", "the candidate builds the reference Model")
            return


def _assigned_names(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, dotted target) of each assignment to an attribute of an imported module or class.

    ``setattr(obj, "name", value)`` counts as one; ``self.time = ...`` does not.
    """
    aliases = _aliases(tree)
    imported = {target.split(".")[0] for target in aliases.values()}
    for line, name in _attribute_assignments(tree, aliases):
        if name.split(".")[0] in imported:
            yield line, name


def _attribute_assignments(tree: ast.Module, aliases: dict[str, str]) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute):
                    yield node.lineno, _resolve(target, aliases)
        elif isinstance(node, ast.Call) and _dotted(node.func) == "setattr" and node.args[1:]:
            name = node.args[1]
            attr = name.value if isinstance(name, ast.Constant) else "<computed>"
            yield node.lineno, f"{_resolve(node.args[0], aliases)}.{attr}"


def patches_runtime(tree: ast.Module) -> Iterator[Finding]:
    """Assignments to timers (``time.perf_counter = ...``) or to torch's own functions."""
    for line, name in _assigned_names(tree):
        base, _, attr = name.rpartition(".")
        if base and attr in TIMER_NAMES:
            yield Finding("patches_timer", f"assigns to {name} (line {line})", severity="reject")
        elif name.startswith("torch.") and not name.startswith(SETTABLE_TORCH):
            yield Finding("patches_runtime", f"assigns to {name} (line {line})", severity="reject")


def fallback_paths(tree: ast.Module) -> Iterator[Finding]:
    """An ``except`` that is broad or returns a value: a path that can hide a broken kernel."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.ExceptHandler):
            continue
        broad = node.type is None or _dotted(node.type) in {"Exception", "BaseException"}
        returns = any(isinstance(n, ast.Return) and n.value for n in ast.walk(node))
        if broad or returns:
            what = "broad except" if broad else "except that returns a value"
            yield Finding("fallback_path", f"{what} at line {node.lineno} (a fallback path?)")
            return


def side_channels(tree: ast.Module) -> Iterator[Finding]:
    """Threads, processes and side streams: ways to work outside the timed region."""
    seen = set()
    for _, name in _resolved_calls(tree):
        for marker, detail in SIDE_CHANNELS.items():
            if name.endswith(marker) and detail not in seen:
                seen.add(detail)
                yield Finding("side_channel", detail)


def inspects_runtime(tree: ast.Module) -> Iterator[Finding]:
    """gc scans, frame walks, ``sys.modules``: ways to read the evaluator's memory."""
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        detail = None
        if isinstance(node, ast.Attribute):
            name = _resolve(node, aliases)
            detail = RUNTIME_INSPECTION.get(name)
            if detail is None and node.attr in FRAME_ATTRIBUTES:
                detail = f"reads .{node.attr}"
        elif isinstance(node, ast.Name):
            detail = RUNTIME_INSPECTION.get(aliases.get(node.id, ""))
        if detail:
            yield Finding("inspects_runtime", f"{detail} (line {node.lineno})", severity="reject")
            return


def _docstrings(tree: ast.Module) -> set[int]:
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def touches_evaluator(tree: ast.Module) -> Iterator[Finding]:
    """Names or strings of the evaluator itself (its package, job file, result path)."""
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = "" if id(node) in docstrings else node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [getattr(node, "module", None) or "", *(a.name for a in node.names)]
            text = " ".join(f"{m}." for m in modules)
        else:
            continue
        word = next((w for w in EVALUATOR_WORDS if w in text), None)
        if word:
            detail = f"mentions {word!r} at line {node.lineno}"
            yield Finding("touches_evaluator", detail, severity="reject")
            return


def dynamic_code(tree: ast.Module) -> Iterator[Finding]:
    """``exec``, ``eval``, ``compile``, ``__import__``: code the other checks cannot read."""
    for call, name in _resolved_calls(tree):
        if name in DYNAMIC_CODE:
            yield Finding("dynamic_code", f"calls {name} at line {call.lineno}")
            return


CHECKS: tuple[Check, ...] = (
    uses_reference_model,
    patches_runtime,
    fallback_paths,
    side_channels,
    inspects_runtime,
    touches_evaluator,
    dynamic_code,
)


def torch_ops(tree: ast.AST) -> set[str]:
    """The computing torch calls in ``tree``: ``torch.X``, ``F.X``, ``nn.X`` modules and ``@``.

    Names are lower-cased with their families merged (``mm``, ``bmm`` -> ``matmul``); calls
    that allocate, seed or configure are left out.
    """
    ops = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            ops.add("matmul")
    for _, name in _resolved_calls(tree):
        if not name.startswith("torch.") or name.startswith(NOT_COMPUTE_PREFIXES):
            continue
        op = name.rsplit(".", 1)[1].lower()
        if op not in NOT_COMPUTE and not op.startswith("_"):
            ops.add(OP_FAMILIES.get(op, op))
    return ops


def _without_reference(tree: ast.Module) -> ast.Module:
    """The candidate minus a copied reference (``Model``, ``get_inputs``, ...)."""
    body = [
        node
        for node in tree.body
        if not (isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in REFERENCE_ONLY)
    ]
    return ast.Module(body=body, type_ignores=[])


def same_op_as_reference(tree: ast.Module, reference: ast.Module) -> Iterator[Finding]:
    """The candidate calls every torch op the reference's ``Model`` computes with."""
    models = [n for n in reference.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
    if not models:
        return
    reference_ops = torch_ops(ast.Module(body=[*_imports(reference), *models], type_ignores=[]))
    candidate_ops = torch_ops(_without_reference(tree))
    if reference_ops and reference_ops <= candidate_ops:
        ops = ", ".join(sorted(reference_ops))
        yield Finding("same_op_as_reference", f"calls torch {ops}, as the reference does")


def _imports(tree: ast.Module) -> list[ast.stmt]:
    return [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def scan_source(source: str, reference_source: str | None = None) -> list[Finding]:
    """Run every static check over ``source`` (a source that does not parse yields nothing).

    With ``reference_source`` (the problem), the candidate's torch ops are also compared with
    the reference's.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    findings = [finding for check in CHECKS for finding in check(tree)]
    if reference_source is not None:
        try:
            reference = ast.parse(reference_source)
        except SyntaxError:
            return findings
        findings.extend(same_op_as_reference(tree, reference))
    return findings
