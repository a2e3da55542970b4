"""Triton source for the matched patterns: fused elementwise kernels and row kernels.

Each elementwise group becomes one kernel (``_ap_fused_<k>_kernel``) and its launcher; row
sites call shared launchers (``_ap_softmax``, ``_ap_layer_norm``, ``_ap_reduce``) with their dim
and flags as constants. Everything computes in float32 and follows PyTorch's formulas, so the
results match eager float32 within 1e-4. The same code runs on a GPU and, with
``TRITON_INTERPRET=1``, on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

from autoprofiler.rewrite.rules.fx_codegen import AttrArg, NodeArg, Replacement
from autoprofiler.rewrite.rules.patterns import (
    ELEMENTWISE_OPS,
    ElementwiseGroup,
    Ref,
    RowSite,
    Step,
)

ELEMENTWISE_BLOCK = 1024
ROW_LOOP_BLOCK = 4096
DEFAULT_MAX_SINGLE_PASS = 65536

# Triton expressions per canonical op: {a}, {b} are operands, {p0}, {p1} parameters.
EXPRESSIONS: dict[str, str] = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "div": "{a} / {b}",
    "maximum": "tl.maximum({a}, {b})",
    "minimum": "tl.minimum({a}, {b})",
    "neg": "-{a}",
    "relu": "tl.where({a} > 0.0, {a}, 0.0)",
    "sigmoid": "1.0 / (1.0 + tl.exp(-{a}))",
    "tanh": "_ap_tanh({a})",
    "gelu": "0.5 * {a} * (1.0 + tl.math.erf({a} * 0.7071067811865476))",
    "gelu_tanh": (
        "0.5 * {a} * (1.0 + _ap_tanh(0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a})))"
    ),
    "silu": "{a} / (1.0 + tl.exp(-{a}))",
    "mish": "{a} * _ap_tanh(_ap_softplus({a}, 1.0, 20.0))",
    "softplus": "_ap_softplus({a}, {p0}, {p1})",
    "leaky_relu": "tl.where({a} > 0.0, {a}, {a} * {p0})",
    "elu": "tl.where({a} > 0.0, {a}, {p0} * (tl.exp({a}) - 1.0))",
    "selu": (
        "1.0507009873554805 * tl.where({a} > 0.0, {a}, 1.6732632423543772 * (tl.exp({a}) - 1.0))"
    ),
    "clamp_min": "tl.maximum({a}, {p0})",
    "clamp_max": "tl.minimum({a}, {p1})",
    "clamp": "tl.minimum(tl.maximum({a}, {p0}), {p1})",
    "hardsigmoid": "tl.minimum(tl.maximum({a} + 3.0, 0.0), 6.0) / 6.0",
    "hardswish": "{a} * tl.minimum(tl.maximum({a} + 3.0, 0.0), 6.0) / 6.0",
    "exp": "tl.exp({a})",
    "log": "tl.log({a})",
    "abs": "tl.abs({a})",
    "sqrt": "tl.sqrt({a})",
    "rsqrt": "1.0 / tl.sqrt({a})",
    "square": "{a} * {a}",
    "cube": "{a} * {a} * {a}",
    "reciprocal": "1.0 / {a}",
}

_JIT_HELPERS = {
    "_ap_tanh": """
@triton.jit
def _ap_tanh(x):
    # tanh from one exp of a non-positive argument: no overflow, error below 1e-6
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    return tl.where(x >= 0.0, y, -y)
""",
    "_ap_softplus": """
@triton.jit
def _ap_softplus(x, beta, threshold):
    # PyTorch's softplus: linear above the threshold
    return tl.where(x * beta > threshold, x, tl.log(1.0 + tl.exp(x * beta)) / beta)
""",
}

_OPERAND_HELPERS = '''
@triton.jit
def _ap_load(ptr, offs, mask, inner, size, MODE: tl.constexpr):
    # MODE 0: same shape as the output; 1: one element; 2: varies along one axis only
    if MODE == 0:
        value = tl.load(ptr + offs, mask=mask)
    elif MODE == 1:
        value = tl.load(ptr)
    else:
        value = tl.load(ptr + (offs // inner) % size, mask=mask)
    return value.to(tl.float32)


def _ap_operand(t, shape):
    """(tensor, mode, inner, size) for reading ``t`` broadcast to ``shape`` in flat order."""
    if tuple(t.shape) == tuple(shape):
        return t.contiguous(), 0, 1, 1
    if t.numel() == 1:
        return t.reshape(1), 1, 1, 1
    dims = (1,) * (len(shape) - t.dim()) + tuple(t.shape)
    axes = [i for i, d in enumerate(dims) if d != 1]
    if len(axes) == 1:
        axis = axes[0]
        return t.reshape(-1).contiguous(), 2, math.prod(shape[axis + 1 :]), dims[axis]
    return t.expand(shape).contiguous(), 0, 1, 1
'''

_ELEMENTWISE_KERNEL = '''
@triton.jit
def {name}_kernel(
    {signature}
):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
{loads}
{body}
    tl.store(out_ptr + offs, {result}, mask=mask)


def {name}({inputs}):
    """{doc}"""
    shape = torch.broadcast_shapes({shapes})
    out = torch.empty(shape, device={first}.device, dtype=torch.float32)
    n = out.numel()
    if n == 0:
        return out
{operands}
    grid = (triton.cdiv(n, {block}),)
    {name}_kernel[grid](
        {call_args}
    )
    return out
'''

_ROW_COMMON = '''
_AP_MAX_SINGLE_PASS = {max_single}  # rows up to this length are read once
_AP_LOOP_BLOCK = min({loop_block}, _AP_MAX_SINGLE_PASS)


def _ap_block(n, cap):
    return max(16, min(triton.next_power_of_2(n), cap))


def _ap_warps(block):
    return 4 if block <= 1024 else 8 if block <= 4096 else 16


def _ap_col_blocks(R, inner):
    """(BLOCK_R, BLOCK_I) tiles for reducing over a dim that is not the last."""
    block_i = max(2, min(triton.next_power_of_2(inner), 64))
    block_r = max(2, min(triton.next_power_of_2(R), 4096 // block_i, _AP_LOOP_BLOCK))
    return block_r, block_i


def _ap_split(x, dim):
    """(outer, R, inner): the sizes before, at and after ``dim``."""
    return math.prod(x.shape[:dim]), x.shape[dim], math.prod(x.shape[dim + 1 :])
'''

_SOFTMAX = '''
@triton.jit
def _ap_softmax_rows_kernel(
    x_ptr, out_ptr, R, BLOCK: tl.constexpr, SINGLE: tl.constexpr, LOG: tl.constexpr,
    INT64: tl.constexpr,
):
    row = tl.program_id(0)
    if INT64:
        row = row.to(tl.int64)
    x_row = x_ptr + row * R
    out_row = out_ptr + row * R
    cols = tl.arange(0, BLOCK)
    if SINGLE:
        mask = cols < R
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        row_max = tl.max(x, axis=0)
        e = tl.exp(x - row_max)
        total = tl.sum(e, axis=0)
        if LOG:
            y = x - row_max - tl.log(total)
        else:
            y = e / total
        tl.store(out_row + cols, y, mask=mask)
    else:
        # online max and sum per lane, then one pass to write
        m = tl.full([BLOCK], -3.0e38, tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for start in range(0, R, BLOCK):
            mask = start + cols < R
            x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, x)
            s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
            m = m_new
        row_max = tl.max(m, axis=0)
        total = tl.sum(s * tl.exp(m - row_max), axis=0)
        for start in range(0, R, BLOCK):
            mask = start + cols < R
            x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
            if LOG:
                y = x - row_max - tl.log(total)
            else:
                y = tl.exp(x - row_max) / total
            tl.store(out_row + start + cols, y, mask=mask)


@triton.jit
def _ap_softmax_cols_kernel(
    x_ptr, out_ptr, R, inner, n_col_blocks, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
    LOG: tl.constexpr, INT64: tl.constexpr,
):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    base = (pid // n_col_blocks) * R * inner
    cols = (pid % n_col_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    col_mask = cols < inner
    rows = tl.arange(0, BLOCK_R)
    m = tl.full([BLOCK_R, BLOCK_I], -3.0e38, tl.float32)
    s = tl.zeros([BLOCK_R, BLOCK_I], tl.float32)
    for start in range(0, R, BLOCK_R):
        r = start + rows
        mask = (r[:, None] < R) & col_mask[None, :]
        offs = base + r[:, None] * inner + cols[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    col_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - col_max[None, :]), axis=0)
    for start in range(0, R, BLOCK_R):
        r = start + rows
        mask = (r[:, None] < R) & col_mask[None, :]
        offs = base + r[:, None] * inner + cols[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if LOG:
            y = x - col_max[None, :] - tl.log(total)[None, :]
        else:
            y = tl.exp(x - col_max[None, :]) / total[None, :]
        tl.store(out_ptr + offs, y, mask=mask)


def _ap_softmax(x, dim, log):
    """Softmax (log-softmax when ``log``) of float32 ``x`` over ``dim``."""
    x = x.contiguous()
    out = torch.empty(x.shape, device=x.device, dtype=torch.float32)
    outer, R, inner = _ap_split(x, dim)
    if out.numel() == 0:
        return out
    int64 = x.numel() >= 2**31
    if inner == 1:
        single = R <= _AP_MAX_SINGLE_PASS
        block = _ap_block(R, _AP_MAX_SINGLE_PASS if single else _AP_LOOP_BLOCK)
        _ap_softmax_rows_kernel[(outer,)](
            x, out, R, BLOCK=block, SINGLE=single, LOG=log, INT64=int64,
            num_warps=_ap_warps(block),
        )
    else:
        block_r, block_i = _ap_col_blocks(R, inner)
        n_col_blocks = triton.cdiv(inner, block_i)
        _ap_softmax_cols_kernel[(outer * n_col_blocks,)](
            x, out, R, inner, n_col_blocks, BLOCK_R=block_r, BLOCK_I=block_i, LOG=log,
            INT64=int64,
        )
    return out
'''

_LAYER_NORM = '''
@triton.jit
def _ap_layer_norm_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, R, eps, BLOCK: tl.constexpr, SINGLE: tl.constexpr,
    HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, INT64: tl.constexpr,
):
    row = tl.program_id(0)
    if INT64:
        row = row.to(tl.int64)
    x_row = x_ptr + row * R
    out_row = out_ptr + row * R
    cols = tl.arange(0, BLOCK)
    if SINGLE:
        mask = cols < R
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / R
        d = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / R + eps)
        y = d * rstd
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            y = y + tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, y, mask=mask)
    else:
        # two passes for the mean and the centred variance, one to write
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, R, BLOCK):
            mask = start + cols < R
            acc += tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / R
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, R, BLOCK):
            mask = start + cols < R
            x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
            d = tl.where(mask, x - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / R + eps)
        for start in range(0, R, BLOCK):
            mask = start + cols < R
            x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
            y = (x - mean) * rstd
            if HAS_WEIGHT:
                y = y * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            if HAS_BIAS:
                y = y + tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(out_row + start + cols, y, mask=mask)


def _ap_layer_norm(x, weight, bias, dim, eps):
    """Layer norm of float32 ``x`` over its dims from ``dim`` on (biased variance)."""
    x = x.contiguous()
    out = torch.empty(x.shape, device=x.device, dtype=torch.float32)
    R = math.prod(x.shape[dim:])
    if out.numel() == 0:
        return out
    single = R <= _AP_MAX_SINGLE_PASS
    block = _ap_block(R, _AP_MAX_SINGLE_PASS if single else _AP_LOOP_BLOCK)
    _ap_layer_norm_kernel[(x.numel() // R,)](
        x,
        weight.contiguous() if weight is not None else x,
        bias.contiguous() if bias is not None else x,
        out, R, eps, BLOCK=block, SINGLE=single, HAS_WEIGHT=weight is not None,
        HAS_BIAS=bias is not None, INT64=x.numel() >= 2**31, num_warps=_ap_warps(block),
    )
    return out
'''

_REDUCE = '''
@triton.jit
def _ap_reduce_rows_kernel(
    x_ptr, out_ptr, R, OP: tl.constexpr, BLOCK: tl.constexpr, INT64: tl.constexpr
):
    # OP 0: sum, 1: mean, 2: max, 3: min
    row = tl.program_id(0)
    if INT64:
        row = row.to(tl.int64)
    x_row = x_ptr + row * R
    cols = tl.arange(0, BLOCK)
    if OP == 2:
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
    elif OP == 3:
        acc = tl.full([BLOCK], float("inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, R, BLOCK):
        mask = start + cols < R
        if OP == 2:
            x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"))
            acc = tl.maximum(acc, x.to(tl.float32))
        elif OP == 3:
            x = tl.load(x_row + start + cols, mask=mask, other=float("inf"))
            acc = tl.minimum(acc, x.to(tl.float32))
        else:
            acc += tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
    if OP == 2:
        result = tl.max(acc, axis=0)
    elif OP == 3:
        result = tl.min(acc, axis=0)
    else:
        result = tl.sum(acc, axis=0)
    if OP == 1:
        result = result / R
    tl.store(out_ptr + row, result)


@triton.jit
def _ap_reduce_cols_kernel(
    x_ptr, out_ptr, R, inner, n_col_blocks, OP: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_I: tl.constexpr, INT64: tl.constexpr,
):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    outer = pid // n_col_blocks
    cols = (pid % n_col_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    col_mask = cols < inner
    rows = tl.arange(0, BLOCK_R)
    if OP == 2:
        acc = tl.full([BLOCK_R, BLOCK_I], float("-inf"), tl.float32)
    elif OP == 3:
        acc = tl.full([BLOCK_R, BLOCK_I], float("inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK_R, BLOCK_I], tl.float32)
    for start in range(0, R, BLOCK_R):
        r = start + rows
        mask = (r[:, None] < R) & col_mask[None, :]
        offs = outer * R * inner + r[:, None] * inner + cols[None, :]
        if OP == 2:
            x = tl.load(x_ptr + offs, mask=mask, other=float("-inf"))
            acc = tl.maximum(acc, x.to(tl.float32))
        elif OP == 3:
            x = tl.load(x_ptr + offs, mask=mask, other=float("inf"))
            acc = tl.minimum(acc, x.to(tl.float32))
        else:
            acc += tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if OP == 2:
        result = tl.max(acc, axis=0)
    elif OP == 3:
        result = tl.min(acc, axis=0)
    else:
        result = tl.sum(acc, axis=0)
    if OP == 1:
        result = result / R
    tl.store(out_ptr + outer * inner + cols, result, mask=col_mask)


_AP_REDUCE_OPS = {"sum": 0, "mean": 1, "max": 2, "min": 3}


def _ap_reduce(x, dim, keepdim, kind):
    """``kind`` ("sum", "mean", "max", "min") of float32 ``x`` over ``dim``."""
    x = x.contiguous()
    outer, R, inner = _ap_split(x, dim)
    shape = list(x.shape)
    if keepdim:
        shape[dim] = 1
    else:
        del shape[dim]
    out = torch.empty(shape, device=x.device, dtype=torch.float32)
    if out.numel() == 0:
        return out
    op, int64 = _AP_REDUCE_OPS[kind], x.numel() >= 2**31
    if inner == 1:
        block = _ap_block(R, _AP_LOOP_BLOCK)
        _ap_reduce_rows_kernel[(outer,)](
            x, out, R, OP=op, BLOCK=block, INT64=int64, num_warps=_ap_warps(block)
        )
    else:
        block_r, block_i = _ap_col_blocks(R, inner)
        n_col_blocks = triton.cdiv(inner, block_i)
        _ap_reduce_cols_kernel[(outer * n_col_blocks,)](
            x, out, R, inner, n_col_blocks, OP=op, BLOCK_R=block_r, BLOCK_I=block_i,
            INT64=int64,
        )
    return out
'''

_ROW_SOURCES = {"softmax": _SOFTMAX, "log_softmax": _SOFTMAX, "layer_norm": _LAYER_NORM}


def _literal(value: float | int) -> str:
    return f"({float(value)!r})"


def _expression(step: Step, names: list[str]) -> str:
    def operand(ref: Ref) -> str:
        if ref.kind == "const":
            return _literal(ref.value)
        return f"v{ref.value}" if ref.kind == "input" else names[int(ref.value)]

    args = [operand(r) for r in step.args]
    op = step.op
    params = list(step.params)
    if op == "clamp":
        low, high = params
        op = (
            "clamp"
            if low is not None and high is not None
            else "clamp_min"
            if high is None
            else "clamp_max"
        )
    values = {f"p{i}": _literal(p) for i, p in enumerate(params) if p is not None}
    return EXPRESSIONS[op].format(a=args[0], b=args[-1], **values)


def _helpers_used(text: str) -> list[str]:
    return [name for name in _JIT_HELPERS if f"{name}(" in text]


def elementwise_source(group: ElementwiseGroup, name: str) -> str:
    """The kernel and launcher ``name(in0, in1, ...)`` computing ``group`` in one pass."""
    count = len(group.inputs)
    names: list[str] = []
    body = []
    for index, step in enumerate(group.steps):
        if step.op not in ELEMENTWISE_OPS:
            raise ValueError(f"no Triton expression for {step.op!r}")
        body.append(f"    t{index} = {_expression(step, names)}")
        names.append(f"t{index}")
    inputs = [f"in{i}" for i in range(count)]
    signature = [
        "out_ptr",
        "n_elements",
        *(f"in{i}_ptr, in{i}_inner, in{i}_size" for i in range(count)),
        *(f"MODE{i}: tl.constexpr" for i in range(count)),
        "BLOCK: tl.constexpr",
        "INT64: tl.constexpr",
    ]
    call_args = [
        "out",
        "n",
        *(f"a{i}, inner{i}, size{i}" for i in range(count)),
        *(f"MODE{i}=mode{i}" for i in range(count)),
        f"BLOCK={ELEMENTWISE_BLOCK}",
        "INT64=n >= 2**31",
    ]
    producer = f" (epilogue of {group.producer})" if group.producer else ""
    return _ELEMENTWISE_KERNEL.format(
        name=name,
        signature=",\n    ".join(signature) + ",",
        loads="\n".join(
            f"    v{i} = _ap_load(in{i}_ptr, offs, mask, in{i}_inner, in{i}_size, MODE{i})"
            for i in range(count)
        ),
        body="\n".join(body),
        result=names[-1],
        inputs=", ".join(inputs),
        doc=" -> ".join(step.op for step in group.steps) + producer,
        shapes=", ".join(f"{x}.shape" for x in inputs),
        first=inputs[0],
        operands="\n".join(
            f"    a{i}, mode{i}, inner{i}, size{i} = _ap_operand(in{i}, shape)"
            for i in range(count)
        ),
        block=ELEMENTWISE_BLOCK,
        call_args=",\n        ".join(call_args) + ",",
    )


def elementwise_section(groups: Sequence[ElementwiseGroup]) -> tuple[str, list[Replacement]]:
    """Source for all groups (helpers once) and the FX replacements that call them."""
    kernels = [elementwise_source(g, f"_ap_fused_{i}") for i, g in enumerate(groups)]
    text = "".join(kernels)
    parts = [_JIT_HELPERS[h] for h in _helpers_used(text)] + [_OPERAND_HELPERS, *kernels]
    replacements = [
        Replacement(
            function=f"_ap_fused_{i}",
            args=tuple(NodeArg(n) for n in g.inputs),
            results=(g.result,),
            nodes=g.nodes,
        )
        for i, g in enumerate(groups)
    ]
    return "\n".join(p.strip("\n") + "\n\n" for p in parts), replacements


def _row_arg(value: str) -> NodeArg | AttrArg | None:
    if not value:
        return None
    return AttrArg(value.removeprefix("attr:")) if value.startswith("attr:") else NodeArg(value)


def _row_replacement(site: RowSite) -> Replacement:
    x = NodeArg(site.input)
    if site.kind in ("softmax", "log_softmax"):
        function, args = "_ap_softmax", (x, site.dim, site.kind == "log_softmax")
    elif site.kind == "layer_norm":
        weight, bias = _row_arg(site.weight), _row_arg(site.bias)
        function, args = "_ap_layer_norm", (x, weight, bias, site.dim, site.eps)
    else:
        function, args = "_ap_reduce", (x, site.dim, site.keepdim, site.kind)
    return Replacement(function, args, site.results, site.nodes)


def row_section(
    sites: Sequence[RowSite], max_single_pass: int = DEFAULT_MAX_SINGLE_PASS
) -> tuple[str, list[Replacement]]:
    """Source of the row launchers the sites need and the FX replacements that call them."""
    parts = [_ROW_COMMON.format(max_single=max_single_pass, loop_block=ROW_LOOP_BLOCK)]
    for site in sites:
        source = _ROW_SOURCES.get(site.kind, _REDUCE)
        if source not in parts:
            parts.append(source)
    text = "\n".join(p.strip("\n") + "\n\n" for p in parts)
    return text, [_row_replacement(s) for s in sites]
