"""What ``optimize --keep best`` judges for one problem, and which one it keeps.

The rewriter's own candidate is one contender. Beside it: the rule rewriter's pick for the same
profile (unless the rewriter is the rule rewriter), torch.compile of the reference (the rule
rewriter's ``compile`` transformation), and the reference itself, which needs no judging (it
is correct at 1.0x by definition). The fastest correct contender is kept, so ``optimize`` is
never slower than the reference and, where torch.compile is judged correct, never slower than
it. A flagged speedup of the rewriter's candidate counts only with ``count_flagged``, as in
every score; a flag is a suspicion about code autoprofiler did not write, so the contenders it
wrote itself (the rule rewriter's, torch.compile: flagged ``calls_reference`` by design) count
at their speedups.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from autoprofiler.evaluate.result import counted_speedup, flag_names
from autoprofiler.rewrite.base import Candidate, Rewriter
from autoprofiler.rewrite.rules import RuleRewriter

if TYPE_CHECKING:
    from autoprofiler.evaluate.result import EvalResult
    from autoprofiler.problem import Problem
    from autoprofiler.profile.base import Profile
    from autoprofiler.rewrite.base import RewriteContext

REFERENCE = "reference"
COMPILE = "compile"


@dataclass(frozen=True)
class Contender:
    """A candidate in the running (``label`` names who wrote it) and, once judged, its
    verdict; the reference has neither a source to judge nor a verdict."""

    label: str
    candidate: Candidate | None
    result: EvalResult | None = None
    trusted: bool = False  # written by autoprofiler itself: its flags are no suspicion
    compiled_reference: bool = False  # torch.compile of the reference, as autoprofiler writes it

    def counted(self, count_flagged: bool = False) -> float | None:
        """The speedup over eager this contender counts at, or None when it does not count
        (not correct, not judged, or flagged unless ``count_flagged`` or ``trusted``)."""
        if self.label == REFERENCE:
            return 1.0
        if self.result is None:
            return None
        result = self.result
        flags = flag_names(result.findings) if result.correct else ()
        counts_flagged = count_flagged or self.trusted
        return counted_speedup(result.correct, result.speedup, flags, counts_flagged)


def contenders(
    problem: Problem,
    profile: Profile | None,
    context: RewriteContext,
    rewriter: Rewriter,
    own: Candidate,
) -> list[Contender]:
    """The rewriter's candidate ``own``, then the rule rewriter's pick for ``profile`` (when
    ``rewriter`` is not a rule rewriter), torch.compile, and the reference. Contenders whose
    source is the same as an earlier one's are left out; an earlier one whose source is
    torch.compile's is marked ``compiled_reference`` (it is that very program)."""
    ours = isinstance(rewriter, RuleRewriter)
    rules = rewriter if ours else RuleRewriter()
    made = [Contender(rewriter.name, own, trusted=rewriter.builtin)]
    if not ours:
        made.append(Contender(rules.name, rules.rewrite(problem, profile, context), trusted=True))
    compiled = rules.generate(problem, COMPILE, context)
    made.append(Contender(COMPILE, compiled, trusted=True, compiled_reference=True))
    kept: dict[str, Contender] = {}  # by source, in order
    for contender in made:
        candidate = contender.candidate
        if candidate is None or not candidate.usable or candidate.source in kept:
            continue
        is_compiled = compiled.usable and candidate.source == compiled.source
        kept[candidate.source] = replace(contender, compiled_reference=is_compiled)
    return [*kept.values(), Contender(REFERENCE, None)]


def best(judged: list[Contender], count_flagged: bool = False) -> Contender:
    """The fastest contender that counts; the earliest among equals (the rewriter's own
    first, the reference last)."""
    ranked = [(c.counted(count_flagged), -i, c) for i, c in enumerate(judged)]
    return max((r for r in ranked if r[0] is not None), key=lambda r: (r[0], r[1]))[2]


def reference_source(problem: Problem) -> str:
    """The reference as a candidate file: its program with ``ModelNew`` naming ``Model``."""
    return f"{problem.source.rstrip()}\n\n\nModelNew = Model\n"
