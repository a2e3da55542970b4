"""The report page on the committed H200 reproduction bench: the rewriter named as the user
named it, the problem lists folded, a comparison per budget that says plainly where the
learned tree is worse, one picture per distinct learned tree."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from autoprofiler.learn.scoring import rewriter_cache_id
from autoprofiler.llm.recorded_client import RecordedLLMClient
from autoprofiler.report.compare import Verdict, compare, comparison_text
from autoprofiler.report.html import render_report, rewriter_name
from autoprofiler.rewrite.llm_rewriter import LLMRewriter
from autoprofiler.rewrite.rules import RuleRewriter
from tests.learn.gated_rewriter import GatedRewriter
from tests.report.chromium import needs_chromium, render_in_chromium
from tests.report.reproduction import reproduction, with_outcome


@pytest.fixture(scope="module")
def page() -> str:
    return render_report([reproduction()])


@pytest.mark.parametrize(
    ("rewriter", "shown"),
    [
        (RuleRewriter(), "rules"),
        (
            RuleRewriter.from_name("rules-without-compile_max_autotune"),
            "rules-without-compile_max_autotune",
        ),
        (LLMRewriter(RecordedLLMClient("openai:gpt-4o")), "llm (openai:gpt-4o)"),
        (
            GatedRewriter(),
            "tests.learn.gated_rewriter:GatedRewriter (named gated:static.flops:12:0)",
        ),
    ],
)
def test_the_rewriter_is_named_as_on_the_command_line(rewriter: object, shown: str) -> None:
    assert rewriter_name(rewriter_cache_id(rewriter)) == shown


def test_the_page_names_the_rewriter_and_folds_the_problem_lists(page: str) -> None:
    assert "<dt>rewriter</dt><dd>rules</dd>" in page
    assert "RuleRewriter" not in page
    bench = reproduction()
    for label, hashes in (("training", bench.train), ("test", bench.test)):
        folded = re.search(
            rf"<dt>{label} problems</dt><dd><details><summary>(\d+) problems</summary>(.*?)"
            "</details></dd>",
            page,
        )
        assert folded, label
        assert int(folded[1]) == len(hashes)
        assert folded[2].split(", ") == [bench.names[h] for h in hashes]


def test_each_budget_says_where_the_learned_tree_is_worse(page: str) -> None:
    bench = reproduction()
    paragraphs = re.findall(r'<p class="versus worse">(.*?)</p>', page)
    assert len(paragraphs) == len(bench.budgets) == 9
    against_none, against_best = paragraphs[0].split("<br>")
    assert against_none == (
        "Learned tree against no profile (none): <strong>worse on correct (90% vs 95%), "
        "fast_1 (71% vs 76%) and profiling s / problem (0.18 vs 0.00)</strong>; better on "
        "fast_1.5 (29% vs 24%) and geomean vs eager (1.316x vs 1.263x)."
    )
    assert against_best == (
        "Against the best fixed configuration within the budget on each column (named after "
        "the value): <strong>worse on correct (90% vs 95%: none), fast_1 (71% vs 76%: none) "
        "and profiling s / problem (0.18 vs 0.00: none)</strong>; the same on fast_1.5 (29%: "
        "static) and geomean vs eager (1.316x: static)."
    )
    unlimited = paragraphs[
        bench.budgets.index(next(b for b in bench.budgets if b.budget_s is None))
    ]
    assert "correct (90% vs 95%: none, SpeedOfLight and 4 more)" in unlimited  # all fit now


def test_a_learned_tree_that_stops_failing_is_no_longer_worse_on_correctness() -> None:
    bench = reproduction()
    for problem in ("L2/57_Conv2d_ReLU_HardSwish", "L2/69_Conv2d_HardSwish_ReLU"):
        bench = with_outcome(bench, "learned", problem, correct=True, speedup=2.0, failure="")
    against_none, against_best = compare(bench, bench.budgets[0])
    verdicts = {v.column: v.verdict for v in against_none}
    assert verdicts == {
        "correct": Verdict.BETTER,
        "fast_1": Verdict.BETTER,  # 81 % against 76 %
        "fast_1.5": Verdict.BETTER,
        "geomean vs eager": Verdict.BETTER,
        "profiling s / problem": Verdict.WORSE,
    }
    best = {v.column: (v.verdict, v.others) for v in against_best}
    assert best["correct"] == (Verdict.BETTER, ("none",))
    assert "better on correct (100% vs 95%" in comparison_text(bench, bench.budgets[0])


def test_learned_trees_alike_are_drawn_once_with_every_budget(page: str) -> None:
    # the static tree under six budgets, the empty one under the three of cost weight 0.05
    budgets = reproduction().budgets
    captions = re.findall(r"<figcaption>tree learned under (.*?)</figcaption>", page)
    assert page.count("<svg") == len(captions) == 2
    drawn = [caption.split("; ") for caption in captions]
    assert [label for labels in drawn for label in labels] == [
        *(b.label for b in budgets if b.cost_weight != 0.05),
        *(b.label for b in budgets if b.cost_weight == 0.05),
    ]
    for labels in drawn:  # alike: one tree per picture
        roots = {json.dumps(b.learned.tree["root"]) for b in budgets if b.label in labels}
        assert len(roots) == 1


@needs_chromium
def test_the_reproduction_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    """The committed H200 bench's page, whole (its screenshot: ``tmp_path/shot.png``)."""
    dom, shot = render_in_chromium(render_report([reproduction()]), tmp_path, 9000)
    assert "<title>decoded 4 of 4, svg 2</title>" in dom, dom[:500]
    assert dom.count("<details>") == 3  # two problem lists, the per-problem outcomes
    assert shot.stat().st_size > 200_000
