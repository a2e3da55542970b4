"""What ``optimize --keep best`` keeps: the fastest contender that counts, flags counting only
for what autoprofiler wrote itself (or with count_flagged), the reference at 1.0x always."""

from __future__ import annotations

from autoprofiler.evaluate import EvalResult, Finding, TimingStats
from autoprofiler.problem import Problem
from autoprofiler.rewrite.base import Candidate, RewriteContext, Rewriter
from autoprofiler.rewrite.contenders import (
    COMPILE,
    REFERENCE,
    Contender,
    best,
    contenders,
    reference_source,
)
from autoprofiler.rewrite.rules import RuleRewriter
from tests.conftest import SCALE_PROBLEM


def _stats(median_ms: float) -> TimingStats:
    return TimingStats(median_ms, median_ms, median_ms, median_ms, median_ms, median_ms, 10, "t")


def judged(label: str, speedup: float | None, flags=(), trusted=False) -> Contender:
    result = EvalResult(problem_hash="p", candidate_hash=label, correct=speedup is not None)
    result.reference = _stats(10.0)
    result.candidate = _stats(10.0 / speedup) if speedup else None
    result.findings = [Finding(name, "", "flag") for name in flags]
    return Contender(label, Candidate(f"# {label}", label), result, trusted)


def test_the_fastest_counted_contender_is_kept() -> None:
    field = [judged("llm", 2.0), judged("rules", 1.5, trusted=True), Contender(REFERENCE, None)]
    assert best(field).label == "llm"


def test_a_flagged_llm_kernel_counts_only_when_asked_and_ours_always() -> None:
    field = [
        judged("llm", 4.2, ("same_op_as_reference",)),
        judged(COMPILE, 1.3, ("calls_reference",), trusted=True),
        Contender(REFERENCE, None),
    ]
    assert best(field).label == COMPILE
    assert best(field, count_flagged=True).label == "llm"


def test_failures_leave_the_reference_and_ties_go_to_the_earlier() -> None:
    assert best([judged("llm", None), Contender(REFERENCE, None)]).label == REFERENCE
    assert best([judged("llm", 0.5), Contender(REFERENCE, None)]).label == REFERENCE
    tie = [judged("llm", 1.5), judged("rules", 1.5, trusted=True), Contender(REFERENCE, None)]
    assert best(tie).label == "llm"


def test_the_contenders_of_an_llm_rewrite_and_of_a_rule_rewrite() -> None:
    problem = Problem(name="scale", source=SCALE_PROBLEM, origin="<test>")
    context = RewriteContext(device="cpu")
    own = Candidate("class ModelNew: pass\n", "llm:test")

    rules = RuleRewriter()
    from_llm = contenders(problem, None, context, _NotRules(), own)
    assert from_llm[0].label == "not-rules"
    assert from_llm[-1].label == REFERENCE
    assert {c.label for c in from_llm} >= {"rules", REFERENCE}
    assert not from_llm[0].trusted and all(c.trusted for c in from_llm[1:-1])
    from_rules = contenders(problem, None, context, rules, rules.rewrite(problem, None, context))
    assert [c.label for c in from_rules].count("rules") == 1  # not asked twice
    sources = [c.candidate.source for c in from_rules if c.candidate]
    assert len(sources) == len(set(sources))
    assert reference_source(problem).rstrip().endswith("ModelNew = Model")


class _NotRules(Rewriter):
    """A rewriter that is not builtin (as an LLM's); never asked here."""

    name = "not-rules"

    def rewrite(self, problem, profile, context) -> Candidate:
        raise AssertionError("contenders judges the candidate it is given")


def test_torch_compile_is_marked_whoever_picked_it() -> None:
    problem = Problem(name="scale", source=SCALE_PROBLEM, origin="<test>")
    context = RewriteContext(device="cpu")
    rules = RuleRewriter()
    compiled = rules.generate(problem, COMPILE, context)
    own = Candidate("class ModelNew: pass\n", "llm:test")
    field = contenders(problem, None, context, _NotRules(), own)
    marked = [c for c in field if c.compiled_reference]
    assert len(marked) == 1 and marked[0].candidate.source == compiled.source
    assert not field[0].compiled_reference  # the LLM's own candidate
    picked = contenders(problem, None, context, rules, compiled)  # the rules' pick is compile
    assert [c.label for c in picked] == ["rules", REFERENCE]
    assert picked[0].compiled_reference and picked[0].candidate is compiled
