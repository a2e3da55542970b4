"""Problems in the KernelBench contract, and the loaders that find them.

A problem is Python source that defines ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``. It is identified by the hash of its source, so the same program loaded
from a file, a folder, a KernelBench checkout or a JSONL data set is the same problem.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import re
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

REQUIRED_NAMES = ("Model", "get_inputs")
OPTIONAL_NAMES = ("get_init_inputs",)


class ProblemError(ValueError):
    """A problem that cannot be used; the message is one line naming the source and the fault."""


@dataclass(frozen=True)
class Problem:
    """A reference program: ``Model``, ``get_inputs()``, ``get_init_inputs()``."""

    name: str
    source: str
    origin: str = ""
    level: int | None = None
    problem_id: int | None = None

    @property
    def content_hash(self) -> str:
        """SHA-256 of the source text (first 16 hex digits): the problem's identity."""
        return source_hash(self.source)

    @property
    def key(self) -> str:
        """A short readable id: ``L1/23_Softmax`` for KernelBench problems, else the name."""
        if self.level is not None:
            return f"L{self.level}/{self.name}"
        return self.name

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Problem:
        return cls(**{k: data.get(k) for k in ("name", "source", "origin", "level", "problem_id")})

    def load_module(self, module_name: str | None = None) -> types.ModuleType:
        """Execute the source in a fresh module and return it (raises ``ProblemError``)."""
        return exec_problem_source(self.source, module_name or _module_name(self.name), self.origin)


@dataclass
class LoadReport:
    """What a load found: the usable problems and a one-line error per rejected source."""

    problems: list[Problem] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _module_name(name: str) -> str:
    return "autoprofiler_problem_" + re.sub(r"\W", "_", name)


def check_source(source: str, origin: str) -> None:
    """Raise ``ProblemError`` unless ``source`` parses and defines the contract's names."""
    try:
        tree = ast.parse(source, filename=origin or "<problem>")
    except SyntaxError as exc:
        raise ProblemError(f"{origin}: syntax error at line {exc.lineno}: {exc.msg}") from None
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise ProblemError(f"{origin}: missing {', '.join(missing)}")


def exec_problem_source(source: str, module_name: str, origin: str = "") -> types.ModuleType:
    """Run problem (or candidate) source as a module; any exception becomes ``ProblemError``."""
    check_source(source, origin)
    module = types.ModuleType(module_name)
    module.__file__ = origin or f"<{module_name}>"
    try:
        code = compile(source, module.__file__, "exec")
        exec(code, module.__dict__)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ProblemError(f"{origin}: raises at import: {type(exc).__name__}: {first}") from None
    for name in REQUIRED_NAMES:
        if not hasattr(module, name):
            raise ProblemError(f"{origin}: missing {name}")
    return module


def problem_from_source(
    source: str, name: str, origin: str, level: int | None = None, problem_id: int | None = None
) -> Problem:
    """Build a checked problem: parses, defines the contract's names, imports cleanly."""
    problem = Problem(name=name, source=source, origin=origin, level=level, problem_id=problem_id)
    problem.load_module()
    return problem


def _id_from_stem(stem: str) -> int | None:
    match = re.match(r"(\d+)_", stem)
    return int(match.group(1)) if match else None


def load_file(path: Path, level: int | None = None) -> Problem:
    """Load one ``.py`` problem file (raises ``ProblemError``)."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{path}: cannot read: {exc}") from None
    return problem_from_source(source, path.stem, str(path), level, _id_from_stem(path.stem))


def _collect(loaders: Iterable[Callable[[], Problem]]) -> LoadReport:
    report = LoadReport()
    for make in loaders:
        try:
            report.problems.append(make())
        except ProblemError as exc:
            log.info("rejected %s", exc)
            report.errors.append(str(exc))
    return report


def _kernelbench_root(path: Path) -> Path | None:
    for root in (path / "KernelBench", path):
        if any((root / f"level{n}").is_dir() for n in range(1, 5)):
            return root
    return None


def _id_filter(ids: Sequence[int] | None, problem_id: int | None) -> bool:
    return ids is None or problem_id in ids


def load_problems(
    path: str | Path, levels: Sequence[int] | None = None, ids: Sequence[int] | None = None
) -> LoadReport:
    """Load problems from a ``.py`` file, a folder, a KernelBench checkout or a JSONL file.

    ``levels`` selects KernelBench levels; ``ids`` selects by the number that starts the file
    name (KernelBench checkouts, plain folders and a single file, which has no level) or the
    ``problem_id`` of a JSONL row.
    Bad sources are reported in ``LoadReport.errors``; good ones are kept. A path that does
    not exist or holds nothing loadable raises ``ProblemError``.
    """
    path = Path(path)
    if not path.exists():
        raise ProblemError(f"{path}: no such file or folder")
    if path.is_file() and path.suffix == ".jsonl":
        return _load_jsonl(path, levels, ids)
    if path.is_file():
        wanted = levels is None and _id_filter(ids, _id_from_stem(path.stem))
        return _collect([lambda: load_file(path)] if wanted else [])
    kb_root = _kernelbench_root(path)
    if kb_root is not None:
        jobs = []
        for level_dir in sorted(kb_root.glob("level[0-9]*")):
            level = int(level_dir.name.removeprefix("level"))
            if levels is not None and level not in levels:
                continue
            for file in sorted(level_dir.glob("*.py"), key=_natural_key):
                if _id_filter(ids, _id_from_stem(file.stem)):
                    jobs.append(lambda f=file, lv=level: load_file(f, lv))
        return _collect(jobs)
    files = sorted((f for f in path.glob("*.py") if not f.name.startswith("_")), key=_natural_key)
    if not files:
        raise ProblemError(f"{path}: no .py problem files in this folder")
    files = [f for f in files if _id_filter(ids, _id_from_stem(f.stem))]
    return _collect(lambda f=f: load_file(f) for f in files)


def _natural_key(path: Path) -> tuple:
    number = _id_from_stem(path.stem)
    return (number if number is not None else 1 << 30, path.stem)


def _row_problem(line: str) -> dict:
    """A JSONL line as a problem row (raises ``ValueError`` saying why it is not one)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(row, dict):
        raise ValueError(f"a JSON {type(row).__name__}, not an object")
    for field_name in ("name", "source"):
        if not isinstance(row.get(field_name), str):
            raise ValueError(f"no {field_name!r} text")
    return row


def _load_jsonl(path: Path, levels: Sequence[int] | None, ids: Sequence[int] | None) -> LoadReport:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{path}: cannot read: {exc}") from None
    jobs = []
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        origin = f"{path}:{line_no}"
        try:
            row = _row_problem(line)
        except ValueError as exc:
            jobs.append(_raiser(f"{origin}: not a problem row: {exc}"))
            continue
        level, problem_id = row.get("level"), row.get("problem_id")
        if (levels is not None and level not in levels) or not _id_filter(ids, problem_id):
            continue
        jobs.append(
            lambda s=row["source"], n=row["name"], o=origin, lv=level, pid=problem_id: (
                problem_from_source(s, n, o, lv, pid)
            )
        )
    return _collect(jobs)


def _raiser(message: str):
    def fail() -> Problem:
        raise ProblemError(message)

    return fail
