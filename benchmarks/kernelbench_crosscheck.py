"""Cross-check with KernelBench: our verdicts and speedups against KernelBench's own evaluator.

(problem, candidate) pairs from a recorded-evaluations export are judged twice on the GPU:
by ``autoprofiler.evaluate.evaluate`` and by KernelBench's ``eval_kernel_against_ref`` (the
candidate's verdict and time) and ``measure_ref_program_time`` (the reference's time), with
KernelBench imported at run time from a checkout given by path (an outside tool, never part
of this repository), each KernelBench call in a fresh subprocess with a time limit; a
problem's reference is timed by KernelBench once per run (as its own baseline times are).
With ``--warm N`` KernelBench's calls first run N at a time to fill the compile caches that
every process of the run shares. Rows go to a JSONL file as they finish; a rerun skips pairs
already there.

    python benchmarks/kernelbench_crosscheck.py [--problems PROBLEMS.jsonl] \\
        --kernelbench .kernelbench/src \\
        --evaluations docs/results/data/kernelbench_h200_evaluations.jsonl.gz \\
        --pairs 30 --out rows.jsonl [--deadline-s S]
    python benchmarks/kernelbench_crosscheck.py --report rows.jsonl \\
        --markdown docs/results/evaluator.md

Without ``--problems`` the problem sources come from the export itself (it carries those it
names; they hash the same as KernelBench's files). The checkout is the ``src`` tree of a
KernelBench commit, exported with ``git --git-dir=DIR archive HEAD src | tar -x -C
.kernelbench/`` and that commit written to ``.kernelbench/COMMIT``. Python packages that
KernelBench imports but the evaluation never uses (LLM clients, ``dotenv``) are replaced by
inert modules when missing; ``pydantic``, when missing, is loaded from wheels carried in
``.kernelbench/wheels``. Both are recorded in the rows.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import inspect
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import types
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _common import add_report_arguments, append_jsonl, read_jsonl

SECTION = "## Cross-check with KernelBench"
KINDS = ("triton", "compile", "other")  # tie-break order of the selection rule
PER_PROBLEM = 2
SPEEDUP_GOAL = 0.05  # the median ratio of speedups (ours / KernelBench) within 5 %
EXPORT_KIND = "autoprofiler.evaluations"

SELECTION_RULE = (
    "problems of the export in the order (problem id, level), so that levels alternate; from "
    f"each, up to {PER_PROBLEM} of its evaluated candidates, picked one at a time: a kind not "
    "yet picked for this problem first, then the kind with the fewest picks so far in the "
    "whole selection, then the kind order triton, compile, other, then the smallest candidate "
    "hash; stop at N pairs. Kind: `triton` if the source has `@triton.jit`, `compile` if it "
    "calls `torch.compile(`, else `other`. No result is looked at."
)

# KernelBench's settings for fp32 with CUDA events: those of its scripts/run_and_check.py.
KB_EVAL_ARGS: dict[str, Any] = {
    "seed_num": 42,
    "num_correct_trials": 5,
    "num_perf_trials": 100,
    "measure_performance": True,
    "timing_method": "cuda_event",
    "verbose": False,
    "check_for_excessive_speedup": True,
}
KB_REF_ARGS: dict[str, Any] = {
    "num_warmup": 5,
    "num_trials": 100,
    "discard_first": 1,
    "timing_method": "cuda_event",
    "use_torch_compile": False,
    "verbose": False,
    "precision": "fp32",
}

# Modules KernelBench imports at start-up for features the evaluation never calls (LLM
# queries, .env files, progress bars, downloads): inert stand-ins where they are missing.
_UNUSED_MODULES = ("dotenv", "openai", "litellm", "tqdm", "requests")


class UsageError(Exception):
    """A bad argument or input file; the message is one line."""


# --------------------------------------------------------------------------------------------
# Pair selection
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """One (problem, candidate) pair to judge."""

    level: int | None
    problem_id: int | None
    problem_name: str
    problem_hash: str
    candidate_hash: str
    kind: str
    transformation: str

    @property
    def key(self) -> str:
        return f"L{self.level}/{self.problem_name}" if self.level is not None else self.problem_name


@dataclass
class Export:
    """What a recorded-evaluations export holds: problems by hash, candidates by hash, the
    evaluations (problem hash, candidate hash) in file order, and the first recorded result of
    each."""

    problems: dict[str, dict]
    candidates: dict[str, dict]
    evaluations: list[tuple[str, str]]
    results: dict[tuple[str, str], dict] = field(default_factory=dict)


def read_export(path: Path) -> Export:
    """Read an ``export_evaluations`` file (raises ``UsageError``)."""
    from autoprofiler.problem import source_hash

    problems: dict[str, dict] = {}
    candidates: dict[str, dict] = {}
    evaluations: list[tuple[str, str]] = []
    results: dict[tuple[str, str], dict] = {}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            header = json.loads(handle.readline() or "{}")
            if header.get("kind") != EXPORT_KIND:
                raise UsageError(f"{path}: not an autoprofiler evaluations export")
            for line in handle:
                row = json.loads(line)
                if "problem" in row:
                    problems[source_hash(row["problem"]["source"])] = row["problem"]
                elif "candidate" in row:
                    candidates[row["candidate"]] = row
                elif "evaluation" in row:
                    pair = (row["problem_hash"], row["candidate_hash"])
                    evaluations.append(pair)
                    results.setdefault(pair, row.get("result") or {})
    except (OSError, EOFError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: cannot read the evaluations export: {exc}") from None
    return Export(problems, candidates, evaluations, results)


def recorded_verdict(result: dict) -> dict:
    """The verdict an export recorded for a pair, as the rows keep it."""
    findings = result.get("findings") or []
    return {
        "correct": result.get("correct"),
        "failure_kind": result.get("failure_kind"),
        "speedup": result.get("speedup"),
        "flagged": sorted({f.get("name") for f in findings if f.get("severity") == "flag"}),
        "evaluator_version": result.get("evaluator_version") or "1",
    }


def candidate_kind(source: str) -> str:
    """``triton`` (generated Triton kernels), ``compile`` (a torch.compile wrapper) or
    ``other``."""
    if "@triton.jit" in source:
        return "triton"
    if "torch.compile(" in source:
        return "compile"
    return "other"


def select_pairs(export: Export, count: int, per_problem: int = PER_PROBLEM) -> list[Pair]:
    """The first ``count`` pairs under ``SELECTION_RULE``: deterministic, results-blind."""
    by_problem: dict[str, dict[str, None]] = {}
    for problem_hash, candidate_hash in export.evaluations:
        if problem_hash in export.problems and candidate_hash in export.candidates:
            by_problem.setdefault(problem_hash, {})[candidate_hash] = None

    def problem_order(problem_hash: str) -> tuple:
        problem = export.problems[problem_hash]
        pid, level = problem.get("problem_id"), problem.get("level")
        return (pid if pid is not None else 1 << 30, level or 0, problem["name"])

    picks: Counter[str] = Counter()
    pairs: list[Pair] = []
    for problem_hash in sorted(by_problem, key=problem_order):
        problem = export.problems[problem_hash]
        pool = {c: candidate_kind(export.candidates[c]["source"]) for c in by_problem[problem_hash]}
        here: list[str] = []
        while len(here) < per_problem and len(pairs) < count and len(here) < len(pool):
            kinds_here = {pool[c] for c in here}
            choice = min(
                (c for c in pool if c not in here),
                key=lambda c: (pool[c] in kinds_here, picks[pool[c]], KINDS.index(pool[c]), c),
            )
            here.append(choice)
            picks[pool[choice]] += 1
            info = export.candidates[choice].get("info") or {}
            pairs.append(
                Pair(
                    level=problem.get("level"),
                    problem_id=problem.get("problem_id"),
                    problem_name=problem["name"],
                    problem_hash=problem_hash,
                    candidate_hash=choice,
                    kind=pool[choice],
                    transformation=str(info.get("transformation", "")),
                )
            )
        if len(pairs) >= count:
            break
    return pairs


# --------------------------------------------------------------------------------------------
# The KernelBench side: a worker process per call
# --------------------------------------------------------------------------------------------


def kernelbench_commit(src: Path) -> str:
    """The commit written beside the exported tree (``.kernelbench/COMMIT``), else unknown."""
    marker = src.resolve().parent / "COMMIT"
    if marker.is_file():
        return marker.read_text(encoding="utf-8").split()[0]
    return "unknown"


def check_kernelbench(src: Path) -> None:
    """Raise ``UsageError`` unless ``src`` holds the ``kernelbench`` package's eval and timing."""
    missing = [f for f in ("eval.py", "timing.py") if not (src / "kernelbench" / f).is_file()]
    if missing:
        raise UsageError(
            f"--kernelbench {src}: no KernelBench checkout there (expected "
            f"{src / 'kernelbench' / missing[0]}; export one with "
            "`git --git-dir=DIR archive HEAD src | tar -x -C .kernelbench/`)"
        )


def _inert_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__["__autoprofiler_stand_in__"] = True

    def unavailable(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(f"{name} is not installed (stand-in for KernelBench's import)")

    if name == "dotenv":
        module.load_dotenv = lambda *_a, **_k: False
    elif name == "openai":
        module.OpenAI = unavailable
    elif name == "litellm":
        module.completion = unavailable
    elif name == "tqdm":
        module.tqdm = lambda iterable=None, *_a, **_k: iterable
    else:
        module.get = module.post = unavailable
    return module


def _pydantic_from_wheels(wheels: Path) -> str:
    """Unpack the carried pydantic wheels once into a temporary folder and import from it."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found:
        raise ImportError(f"pydantic is not installed and {wheels} holds no wheels")
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    site = Path(tempfile.gettempdir()) / f"kernelbench-site-{tag}"
    if not (site / ".complete").exists():
        for wheel in found:
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(site)
        (site / ".complete").touch()
    sys.path.append(str(site))
    importlib.invalidate_caches()
    try:
        pydantic = importlib.import_module("pydantic")
    except ImportError:  # an installed dependency too old for it: the carried ones first
        carried = {n.split("-")[0] for n in (w.name for w in found)}
        for name in [m for m in sys.modules if m.split(".")[0] in carried]:
            del sys.modules[name]
        sys.path.remove(str(site))
        sys.path.insert(0, str(site))
        pydantic = importlib.import_module("pydantic")
    return f"pydantic {pydantic.VERSION} from {wheels}"


def prepare_kernelbench_import(src: Path, wheels: Path) -> list[str]:
    """Put ``src`` first on ``sys.path``, stand in for unused missing modules, make sure
    pydantic imports; returns what was stood in for or loaded from the wheels."""
    here = {Path(__file__).resolve().parent, Path(__file__).resolve().parents[1]}
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() not in here]
    sys.path.insert(0, str(src.resolve()))
    notes = []
    for name in _UNUSED_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            sys.modules[name] = _inert_module(name)
            notes.append(f"{name} (inert stand-in)")
    try:
        importlib.import_module("pydantic")
    except ImportError:
        notes.append(_pydantic_from_wheels(wheels))
    return notes


def _plain(value: Any) -> Any:
    """JSON-ready copy: exceptions and other objects become strings."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _exec_result(result: Any) -> dict:
    fields = ("compiled", "correctness", "runtime", "runtime_stats", "ref_runtime")
    data = {f: _plain(getattr(result, f, None)) for f in fields}
    data["ref_runtime_stats"] = _plain(getattr(result, "ref_runtime_stats", None))
    data["metadata"] = _plain(getattr(result, "metadata", {}))
    return data


def _check_parameters(fn: Any, names: list[str]) -> str:
    """The signature of ``fn``; raises if it lacks a parameter we pass."""
    signature = inspect.signature(fn)
    missing = [n for n in names if n not in signature.parameters]
    if missing:
        raise TypeError(f"{fn.__qualname__}{signature} has no parameter {', '.join(missing)}")
    return f"{fn.__module__}.{fn.__qualname__}{signature}"


def kb_worker(job_path: Path) -> int:
    """Run one KernelBench call described by a job file; write the outcome to ``job["out"]``."""
    job = json.loads(job_path.read_text(encoding="utf-8"))
    out = Path(job["out"])
    outcome: dict[str, Any] = {"status": "setup_error"}
    try:
        outcome["notes"] = prepare_kernelbench_import(Path(job["kernelbench"]), Path(job["wheels"]))
        import torch
        from kernelbench import eval as kb_eval
        from kernelbench import timing as kb_timing

        outcome["signatures"] = [
            _check_parameters(
                kb_eval.eval_kernel_against_ref,
                [*KB_EVAL_ARGS, "build_dir", "device", "backend", "precision"],
            ),
            _check_parameters(kb_timing.measure_ref_program_time, [*KB_REF_ARGS, "device"]),
        ]
        device = torch.device("cuda:0")
    except Exception as exc:
        outcome["error"] = f"{type(exc).__name__}: {exc}"
        out.write_text(json.dumps(outcome), encoding="utf-8")
        return 0
    began = time.perf_counter()
    try:
        if job["op"] == "probe":
            gpu = torch.cuda.get_device_name(device) if torch.cuda.is_available() else None
            outcome.update(status="ok", gpu=gpu)
        elif job["op"] == "eval":
            result = kb_eval.eval_kernel_against_ref(
                original_model_src=job["reference"],
                custom_model_src=job["candidate"],
                build_dir=job["build_dir"],
                device=device,
                backend=job["backend"],
                precision=torch.float32,
                **KB_EVAL_ARGS,
            )
            if result is None:  # KernelBench's "lock file error, please retry"
                outcome.update(status="no_result", error="eval_kernel_against_ref returned None")
            else:
                outcome.update(status="ok", result=_exec_result(result))
        else:
            stats = kb_timing.measure_ref_program_time(
                ref_arch_name=job["name"],
                ref_arch_src=job["reference"],
                device=device,
                **KB_REF_ARGS,
            )
            if stats is None:
                outcome.update(status="no_result", error="measure_ref_program_time returned None")
            else:
                outcome.update(status="ok", stats=_plain(stats))
    except Exception as exc:  # KernelBench let it through: the candidate's failure
        outcome.update(status="raised", error=f"{type(exc).__name__}: {exc}"[:2000])
    outcome["wall_s"] = time.perf_counter() - began
    out.write_text(json.dumps(outcome), encoding="utf-8")
    return 0


def run_kb(job: dict, timeout_s: float) -> dict:
    """One KernelBench call in a fresh subprocess; its outcome, or why there is none."""
    with tempfile.TemporaryDirectory(prefix="kb-crosscheck-") as work:
        job = {**job, "out": str(Path(work) / "outcome.json"), "build_dir": str(Path(work) / "b")}
        job_file = Path(work) / "job.json"
        job_file.write_text(json.dumps(job), encoding="utf-8")
        log_path = Path(work) / "log.txt"
        began = time.perf_counter()
        with log_path.open("w", encoding="utf-8") as log:
            command = [sys.executable, str(Path(__file__).resolve()), "--kb-worker", str(job_file)]
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=work,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
            try:
                code = process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                code = None
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-1500:]
        outcome_path = Path(job["out"])
        if outcome_path.exists():
            outcome = json.loads(outcome_path.read_text(encoding="utf-8"))
        elif code is None:
            outcome = {"status": "timeout", "error": f"no result within {timeout_s:.0f} s"}
        else:
            outcome = {"status": "crashed", "error": f"worker exit status {code}: {tail[-600:]}"}
        outcome["process_s"] = time.perf_counter() - began
        if job["op"] != "probe":  # the probe's copy is printed; the rows need none
            outcome.pop("signatures", None)
            outcome.pop("notes", None)
        if outcome["status"] not in ("ok",):
            outcome["log_tail"] = tail
        return outcome


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------


def _ours(problem: Any, source: str) -> dict:
    from autoprofiler.evaluate import EvalConfig, evaluate

    result = evaluate(problem, source, EvalConfig(device="cuda", time_compile_baseline=False))
    speedup = result.speedup() if callable(result.speedup) else result.speedup
    kind = result.failure_kind
    return {
        "correct": bool(result.correct),
        "failure_kind": getattr(kind, "value", kind),
        "failure_message": result.failure_message or "",
        "ref_ms": result.reference.median_ms if result.reference else None,
        "cand_ms": result.candidate.median_ms if result.candidate else None,
        "ref_trials": result.reference.trials if result.reference else 0,
        "cand_trials": result.candidate.trials if result.candidate else 0,
        "speedup": speedup,
        "device": result.device,
        "torch": result.torch_version,
        "wall_s": result.wall_s,
        "unstable": list(getattr(result, "unstable", []) or []),
        "evaluator_version": getattr(result, "evaluator_version", ""),
        "stages_s": dict(getattr(result, "stages_s", None) or {}),  # where its wall went
    }


def kb_verdict(kb: dict) -> bool | None:
    """KernelBench's verdict: its ``correctness``; False when the call raised, crashed or timed
    out on the candidate; None when KernelBench could not judge (set-up failure, no result)."""
    if kb.get("status") == "ok":
        return bool(kb["result"].get("correctness"))
    if kb.get("status") in ("raised", "crashed", "timeout"):
        return False
    return None


def kb_reason(kb: dict) -> str:
    """Why KernelBench failed the candidate, from its metadata or the call's error."""
    if kb.get("status") != "ok":
        return f"{kb.get('status')}: {kb.get('error', '')}"
    result = kb["result"]
    meta = result.get("metadata") or {}
    if not result.get("compiled"):
        return f"compilation failed: {meta.get('compilation_error', '')}"
    if result.get("correctness"):
        return ""
    for key in ("runtime_error", "correctness_issue", "error_during_performance"):
        if meta.get(key):
            extra = f" (max diff {meta['max_difference']})" if meta.get("max_difference") else ""
            return f"{key}: {meta[key]}{extra}"
    return f"incorrect: {meta.get('correctness_trials', '')}"


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def build_row(
    pair: Pair, ours: dict, kb: dict, kb_ref: dict, context: dict, recorded: dict | None = None
) -> dict:
    """The row for one pair: both verdicts, times, speedups, their ratio and the reasons, and
    the verdict the export recorded (``recorded``, made by an earlier evaluator) if given."""
    result = kb.get("result") or {}
    kb_cand = _positive(result.get("runtime"))
    kb_ref_ms = _positive((kb_ref.get("stats") or {}).get("mean"))
    verdict = kb_verdict(kb)
    kb_speedup = kb_ref_ms / kb_cand if verdict and kb_cand and kb_ref_ms else None
    ratio = ours["speedup"] / kb_speedup if ours["speedup"] and kb_speedup else None
    reasons = []
    if not ours["correct"]:
        reasons.append(f"ours: {ours['failure_kind']}: {ours['failure_message']}")
    if not verdict:
        reasons.append(f"KernelBench: {kb_reason(kb)}")
    if kb_ref.get("status") != "ok":
        reasons.append(
            f"KernelBench reference timing: {kb_ref.get('status')}: {kb_ref.get('error', '')}"
        )
    return {
        "problem": pair.key,
        **asdict(pair),
        "ours": ours,
        "kb": kb,
        "kb_ref": kb_ref,
        "kb_correct": verdict,
        "kb_cand_ms": kb_cand,
        "kb_ref_ms": kb_ref_ms,
        "kb_ref_inprocess_ms": _positive(result.get("ref_runtime")),
        "kb_speedup": kb_speedup,
        "speedup_ratio": ratio,
        "agree": None if verdict is None else verdict == ours["correct"],
        "why": " | ".join(r.replace("\n", " ")[:600] for r in reasons),
        **({"recorded": recorded_verdict(recorded)} if recorded else {}),
        **context,
    }


def _context(args: argparse.Namespace, gpu: str | None) -> dict:
    """What every row records about the run: tools, machine (``gpu`` as torch names it, read
    in a worker so that this process holds no CUDA context) and command."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "kernelbench_commit": kernelbench_commit(args.kernelbench),
        "kb_eval_args": {
            **KB_EVAL_ARGS,
            "device": "torch.device('cuda:0')",
            "precision": "torch.float32",
        },
        "kb_ref_args": {**KB_REF_ARGS, "device": "torch.device('cuda:0')"},
        "gpu": gpu,
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "host": platform.node(),
        "command": shlex.join(["python", *sys.argv]),
        "selection": SELECTION_RULE,
    }


def _eval_job(pair: Pair, problem: Any, source: str) -> dict:
    """The KernelBench ``eval`` call for ``pair``."""
    backend = "triton" if pair.kind == "triton" else "cuda"
    return {"op": "eval", "reference": problem.source, "candidate": source, "backend": backend}


def shared_compile_caches(root: Path) -> dict[str, str]:
    """Inductor's and Triton's cache folders under ``root`` for every process of the run
    (ours and KernelBench's), unless the caller chose their own; what is set."""
    chosen = {}
    for variable, folder in (
        ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
        ("TRITON_CACHE_DIR", "triton"),
    ):
        if not os.environ.get(variable):
            os.environ[variable] = chosen[variable] = str((root / folder).resolve())
    return chosen


def warm_compile_caches(
    pairs: list[Pair],
    problems: dict,
    export: Export,
    job_base: dict,
    args: argparse.Namespace,
    hard_stop: float,
) -> None:
    """KernelBench's ``eval`` call of each pair, ``args.warm`` at a time, before the timed pass:
    torch.compile and Triton fill the shared caches here, so the timed pass (one call at a
    time) loads its kernels instead of compiling them. Outcomes are thrown away: their
    timings were taken side by side on one GPU."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [
        {**job_base, **_eval_job(pair, problems[pair.problem_hash],
                                 export.candidates[pair.candidate_hash]["source"])}
        for pair in pairs if pair.problem_hash in problems
    ]  # fmt: skip
    began = time.monotonic()

    def warm(job: dict) -> str:
        limit = min(args.timeout_s, hard_stop - time.monotonic())
        return run_kb(job, limit)["status"] if limit > 1 else "skipped"

    with ThreadPoolExecutor(args.warm) as pool:
        statuses = Counter(pool.map(warm, jobs))
    print(
        f"warmed the compile caches with {len(jobs)} KernelBench calls, {args.warm} at a time, "
        f"in {time.monotonic() - began:.0f} s: {dict(statuses)}",
        flush=True,
    )


def measure(args: argparse.Namespace) -> int:
    from autoprofiler.problem import Problem, ProblemError, load_problems

    started = time.monotonic()
    check_kernelbench(args.kernelbench)
    export = read_export(args.evaluations)
    if args.problems is None:  # the export carries the sources of the problems it names
        problems = {h: Problem.from_dict(data) for h, data in export.problems.items()}
    else:
        try:
            problems = {p.content_hash: p for p in load_problems(args.problems).problems}
        except ProblemError as exc:
            raise UsageError(str(exc)) from None
    pairs = select_pairs(export, args.pairs)
    print(f"selection rule: {SELECTION_RULE}", flush=True)
    print(f"{len(pairs)} pairs: {dict(Counter(p.kind for p in pairs))}", flush=True)
    for pair in pairs:
        print(f"  {pair.key} {pair.candidate_hash} {pair.kind} ({pair.transformation})")
    caches = shared_compile_caches(Path(tempfile.gettempdir()) / "kb-crosscheck-caches")
    if caches:
        print(f"compile caches shared by every process of the run: {caches}", flush=True)
    # The workers start in a folder of their own: absolute paths.
    job_base = {
        "kernelbench": str(args.kernelbench.resolve()),
        "wheels": str(args.wheels.resolve()),
    }
    probe = run_kb({**job_base, "op": "probe"}, args.timeout_s)
    if probe["status"] != "ok":
        raise UsageError(
            f"KernelBench does not import from {args.kernelbench}: "
            f"{probe.get('error', probe['status'])}"
        )
    print(
        f"KernelBench {kernelbench_commit(args.kernelbench)} on {probe.get('gpu')}; "
        f"notes: {probe.get('notes')}",
        flush=True,
    )
    for signature in probe.get("signatures", []):
        print(f"  {signature}", flush=True)
    context = {**_context(args, probe.get("gpu")), "kb_notes": probe.get("notes", [])}
    done = {(r["problem_hash"], r["candidate_hash"]) for r in read_jsonl(args.out)}
    # KernelBench times a problem's reference once (its baseline times); so does this run.
    reference_times: dict[str, dict] = {}
    hard_stop = started + args.deadline_s + args.grace_s
    todo = [p for p in pairs if (p.problem_hash, p.candidate_hash) not in done]
    if args.warm > 0:
        warm_compile_caches(todo, problems, export, job_base, args, hard_stop)
    for pair in pairs:
        if (pair.problem_hash, pair.candidate_hash) in done:
            continue
        if time.monotonic() - started > args.deadline_s:
            print(f"deadline reached before {pair.key} {pair.candidate_hash}", flush=True)
            break
        pair_began = time.monotonic()
        problem = problems.get(pair.problem_hash)
        if problem is None:
            print(f"skipped {pair.key}: not in {args.problems}", flush=True)
            continue
        source = export.candidates[pair.candidate_hash]["source"]
        try:
            ours = _ours(problem, source)
        except Exception as exc:  # evaluate() should not raise; recorded if it does
            ours = {"correct": False, "failure_kind": "harness_error", "speedup": None,
                    "failure_message": f"{type(exc).__name__}: {exc}"[:600],
                    "ref_ms": None, "cand_ms": None}  # fmt: skip
        print(f"  ours done after {time.monotonic() - pair_began:.1f} s", flush=True)
        outcomes = []
        for job in (
            _eval_job(pair, problem, source),
            {"op": "ref", "reference": problem.source, "name": pair.key},
        ):
            if job["op"] == "ref" and pair.problem_hash in reference_times:
                outcomes.append(reference_times[pair.problem_hash])
                continue
            limit = min(args.timeout_s, hard_stop - time.monotonic())
            outcome = run_kb({**job_base, **job}, max(limit, 1.0))
            if outcome["status"] == "timeout" and limit < args.timeout_s:
                print(
                    f"stopped: the deadline cut {pair.key} {pair.candidate_hash} short in "
                    f"KernelBench's {job['op']} call; not recorded",
                    flush=True,
                )
                return 0
            print(
                f"  KernelBench {job['op']} {outcome['status']} after "
                f"{time.monotonic() - pair_began:.1f} s",
                flush=True,
            )
            outcomes.append(outcome)
        if outcomes[1].get("status") == "ok":
            reference_times[pair.problem_hash] = outcomes[1]
        recorded = export.results.get((pair.problem_hash, pair.candidate_hash))
        row = build_row(pair, ours, outcomes[0], outcomes[1], context, recorded)
        row["pair_s"] = time.monotonic() - pair_began
        row["kb_ref_timed_per"] = "problem"
        append_jsonl(args.out, row)
        print(
            f"{pair.key} {pair.kind}: ours {row['ours']['correct']} "
            f"{_fmt(ours['ref_ms'])}/{_fmt(ours['cand_ms'])} ms, KernelBench {row['kb_correct']} "
            f"{_fmt(row['kb_ref_ms'])}/{_fmt(row['kb_cand_ms'])} ms, ratio "
            f"{_fmt(row['speedup_ratio'])}",
            flush=True,
        )
    return 0


def judge_ours_again(args: argparse.Namespace) -> int:
    """Judge again, by our evaluator only, the pairs of ``--out`` whose candidate hashes
    ``--ours-again`` names; each row keeps KernelBench's side as measured before and records
    the new run (command, our evaluator's version) under ``ours_again``."""
    from autoprofiler.problem import Problem

    export = read_export(args.evaluations)
    rows = read_jsonl(args.out)
    wanted = set(args.ours_again)
    missing = wanted - {row["candidate_hash"] for row in rows}
    if missing:
        raise UsageError(f"--ours-again {' '.join(sorted(missing))}: no such pair in {args.out}")
    fields = Pair.__dataclass_fields__
    for index, row in enumerate(rows):
        if row["candidate_hash"] not in wanted:
            continue
        pair = Pair(**{name: row[name] for name in fields})
        problem = Problem.from_dict(export.problems[pair.problem_hash])
        ours = _ours(problem, export.candidates[pair.candidate_hash]["source"])
        again = build_row(pair, ours, row["kb"], row["kb_ref"], {})
        kept = {k: v for k, v in row.items() if k not in again}  # the run's context, recorded
        before = {"command": shlex.join(["python", *sys.argv]), "before": row["ours"]}
        rows[index] = {**kept, **again, "ours_again": before}
        tmp = args.out.with_suffix(".tmp")  # after each pair: a run cut short keeps the rest
        tmp.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        tmp.replace(args.out)
        print(f"{pair.key} {pair.candidate_hash}: ours {ours['correct']} {ours['speedup']}")
    return 0


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _version(row: dict) -> str:
    """`` (vN)``: the evaluator version that made our verdict, when the row says."""
    version = row["ours"].get("evaluator_version")
    again = ", judged again" if "ours_again" in row else ""
    return f" (v{version}{again})" if version else (f" ({again[2:]})" if again else "")


def _verdict(value: bool | None) -> str:
    return {True: "correct", False: "fails", None: "not judged"}[value]


def _cell(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return text.replace("|", "\\|")


def _para(text: str, indent: str = "") -> str:
    return textwrap.fill(
        text, width=96, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def _kwargs(values: dict) -> str:
    """``k=v, ...``; torch objects recorded as text are written as code, not as strings."""
    return ", ".join(
        f"{k}={v}" if isinstance(v, str) and v.startswith("torch.") else f"{k}={v!r}"
        for k, v in values.items()
    )


def report_section(rows: list[dict], command: str = "") -> str:
    """The markdown of the section: table, agreement, disagreements, speedup ratio."""
    rows = list({(r["problem_hash"], r["candidate_hash"]): r for r in rows}.values())
    judged = [r for r in rows if r.get("agree") is not None]
    agree = [r for r in judged if r["agree"]]
    ratios = [r["speedup_ratio"] for r in rows if r.get("speedup_ratio")]
    median = statistics.median(ratios) if ratios else None
    within = sum(1 for x in ratios if abs(x - 1) <= SPEEDUP_GOAL)
    commits = sorted({r.get("kernelbench_commit", "unknown") for r in rows})
    machines = sorted(
        {f"{r.get('gpu')}, torch {r.get('torch')}, triton {r.get('triton')}" for r in rows}
    )
    commands = list(dict.fromkeys(r.get("command", "") for r in rows if r.get("command")))
    commands += list(dict.fromkeys(r["ours_again"]["command"] for r in rows if "ours_again" in r))
    notes = sorted({n for r in rows for n in r.get("kb_notes", [])})
    found = sorted({str(r["ours"].get("evaluator_version") or "?") for r in rows})
    versions = "v" + ", v".join(found) if found else "?"
    scopes = {
        "pair": "timed for each pair",
        "problem": "timed once per problem and run, as KernelBench's baseline times are",
    }
    scope = "; ".join(
        text
        for name, text in scopes.items()
        if any(r.get("kb_ref_timed_per", "pair") == name for r in rows)
    )
    first = rows[0] if rows else {}
    eval_args = _kwargs(first.get("kb_eval_args", {}))
    ref_args = _kwargs(first.get("kb_ref_args", {}))
    lines = [
        SECTION,
        "",
        _para(
            f"KernelBench commit {', '.join(f'`{c}`' for c in commits) or '?'} (its `src/` "
            "tree, imported at run time from a checkout outside this repository) against "
            "`autoprofiler.evaluate.evaluate(problem, source, EvalConfig(device='cuda', "
            "time_compile_baseline=False))`, on the same pairs. "
            f"Machine: {'; '.join(machines) or '?'}."
        ),
        *(f"Command: `{c}`" for c in [*commands, command] if c),
        "",
        _para(f"Pairs: {len(rows)}, chosen by this rule: {first.get('selection', '')}"),
        "",
        _para(
            "KernelBench's side, with the settings of its `scripts/run_and_check.py`: "
            f"`eval_kernel_against_ref(ref, candidate, {eval_args}, build_dir=TMP, "
            "backend=B)` (B `'triton'` for Triton candidates, else `'cuda'`) for the verdict "
            f"and the candidate's time, `measure_ref_program_time(name, ref, {ref_args})` for "
            f"the reference's ({scope}), each call in a fresh process. Its times are means "
            "(rounded by "
            "KernelBench to 3 significant digits) and its speedup the reference's mean over "
            f"the candidate's; ours are medians (evaluator {versions}: the reference timed in "
            "the trusted reference process, the candidate in its own, each on a pool of "
            "distinct inputs through the same loop), and our speedup the ratio of the "
            "medians. *ratio* is our speedup over KernelBench's."
            + (
                f" Stand-ins and carried packages on KernelBench's side: {', '.join(notes)}."
                if notes
                else ""
            )
        ),
        "",
        "| problem | kind | ours | KernelBench | our ref ms | our cand ms | KB ref ms "
        "| KB cand ms | our speedup | KB speedup | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        kind = f"{r['kind']} ({r['transformation']})" if r.get("transformation") else r["kind"]
        lines.append(
            f"| {r['problem']} | {kind} | {_verdict(r['ours']['correct'])}{_version(r)} | "
            f"{_verdict(r.get('kb_correct'))} | {_fmt(r['ours']['ref_ms'], 4)} | "
            f"{_fmt(r['ours']['cand_ms'], 4)} | {_fmt(r.get('kb_ref_ms'), 4)} | "
            f"{_fmt(r.get('kb_cand_ms'), 4)} | {_fmt(r['ours']['speedup'])} | "
            f"{_fmt(r.get('kb_speedup'))} | {_fmt(r.get('speedup_ratio'))} |"
        )
    disagree = [r for r in judged if not r["agree"]]
    unjudged = [r for r in rows if r.get("agree") is None]
    met = median is not None and abs(median - 1) <= SPEEDUP_GOAL
    lines += [
        "",
        f"- verdicts agree: {len(agree)}/{len(judged)} pairs judged by both"
        + (f" ({len(unjudged)} not judged by KernelBench)" if unjudged else ""),
        f"- speedup ratio (ours / KernelBench): median {_fmt(median)} over {len(ratios)} pairs "
        f"timed by both; goal within {SPEEDUP_GOAL:.0%}: {'met' if met else 'not met'}; "
        f"{within}/{len(ratios)} pairs within {SPEEDUP_GOAL:.0%}"
        + (f"; extremes {_fmt(min(ratios))} and {_fmt(max(ratios))}" if ratios else ""),
        *against_recorded(rows),
        "",
    ]
    if disagree or unjudged:
        lines += [
            "Disagreements and pairs KernelBench did not judge:",
            "",
            "| problem | candidate | kind | ours | KernelBench | why |",
            "|---|---|---|---|---|---|",
        ]
        for r in disagree + unjudged:
            lines.append(
                f"| {r['problem']} | `{r['candidate_hash']}` | {r['kind']} | "
                f"{_verdict(r['ours']['correct'])} | {_verdict(r.get('kb_correct'))} | "
                f"{_cell(r.get('why', ''))} |"
            )
        lines.append("")
    return "\n".join(lines)


def _outcome(verdict: dict) -> str:
    kind = verdict.get("failure_kind")
    return _verdict(verdict.get("correct")) + (f" ({kind})" if kind else "")


def against_recorded(rows: list[dict]) -> list[str]:
    """Bullets comparing our verdicts here with those the export recorded for the same pairs
    (an earlier evaluator's): how many verdicts changed, which, and the speedups' ratio."""
    both = [r for r in rows if r.get("recorded")]
    if not both:
        return []
    versions = sorted({str(r["recorded"].get("evaluator_version")) for r in both})
    changed = [
        r
        for r in both
        if (r["recorded"].get("correct"), r["recorded"].get("failure_kind"))
        != (r["ours"]["correct"], r["ours"].get("failure_kind"))
    ]
    ratios = [
        r["ours"]["speedup"] / r["recorded"]["speedup"]
        for r in both
        if r["ours"].get("speedup") and r["recorded"].get("speedup")
    ]
    line = (
        f"- against the verdicts the export recorded for the same pairs (evaluator "
        f"v{', v'.join(versions)}): {len(both) - len(changed)}/{len(both)} unchanged"
    )
    if changed:
        line += "; changed: " + "; ".join(
            f"{r['problem']} `{r['candidate_hash']}` {_outcome(r['recorded'])} -> "
            f"{_outcome(r['ours'])}"
            for r in changed
        )
    if ratios:
        line += (
            f"; our speedup now over the recorded one: median {_fmt(statistics.median(ratios))}"
            f", {_fmt(min(ratios))}-{_fmt(max(ratios))} over {len(ratios)} pairs"
        )
    return [line]


def replace_section(text: str, section: str) -> str:
    """``text`` with its ``SECTION`` (up to the next ``## `` heading) replaced by ``section``,
    or ``section`` appended when there is none."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == SECTION), None)
    new = section.rstrip("\n").splitlines()
    if start is None:
        body = "\n".join(lines).rstrip("\n")
        return (body + "\n\n" if body else "") + "\n".join(new) + "\n"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    after = lines[end:]
    merged = [*lines[:start], *new, *([""] if after else []), *after]
    return "\n".join(merged).rstrip("\n") + "\n"


def write_report(rows_path: Path, markdown: Path, command: str = "") -> None:
    rows = read_jsonl(rows_path)
    if not rows:
        raise UsageError(f"{rows_path}: no rows")
    text = markdown.read_text(encoding="utf-8") if markdown.exists() else ""
    markdown.write_text(replace_section(text, report_section(rows, command)), encoding="utf-8")


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--problems", type=Path, help="problems JSONL or folder (default: the export's own)"
    )
    parser.add_argument("--kernelbench", type=Path, help="KernelBench src/ tree (has kernelbench/)")
    parser.add_argument("--wheels", type=Path, help="pydantic wheels (default: ../wheels of it)")
    parser.add_argument("--evaluations", type=Path, help="recorded-evaluations export .jsonl.gz")
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("kernelbench_crosscheck_rows.jsonl"))
    parser.add_argument("--deadline-s", type=float, default=1e9, help="start no pair after")
    parser.add_argument(
        "--grace-s",
        type=float,
        default=300.0,
        help="abandon (unrecorded) a pair still running this long after it",
    )
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per KernelBench call")
    parser.add_argument(
        "--warm",
        type=int,
        default=0,
        help="first run KernelBench's calls N at a time to fill the compile caches (0: no)",
    )
    parser.add_argument(
        "--ours-again", nargs="+", metavar="HASH",
        help="judge these pairs of --out again, ours only (KernelBench's side kept)",
    )  # fmt: skip
    parser.add_argument("--kb-worker", type=Path, help=argparse.SUPPRESS)
    add_report_arguments(parser, "docs/results/evaluator.md")
    args = parser.parse_args(argv)
    if args.kb_worker:  # leave at once: no exit handlers or teardown that could hang
        code = kb_worker(args.kb_worker)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    try:
        if args.report:
            write_report(args.report, args.markdown, args.command)
            return 0
        if args.ours_again:
            if args.evaluations is None:
                raise UsageError("--ours-again needs --evaluations")
            return judge_ours_again(args)
        for name in ("kernelbench", "evaluations"):
            if getattr(args, name) is None:
                raise UsageError(f"--{name} is required (or --report ROWS)")
        check_kernelbench(args.kernelbench)
        for name in ("problems", "evaluations"):
            if getattr(args, name) is not None and not getattr(args, name).exists():
                raise UsageError(f"--{name} {getattr(args, name)}: no such file")
        if args.pairs < 1:
            raise UsageError(f"--pairs {args.pairs}: must be at least 1")
        args.wheels = args.wheels or args.kernelbench.resolve().parent / "wheels"
        print(
            f"kernelbench crosscheck on {platform.node()} python {sys.version.split()[0]}",
            flush=True,
        )
        return measure(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
