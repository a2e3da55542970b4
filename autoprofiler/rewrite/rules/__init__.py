"""The built-in rule rewriter: profile-guided, deterministic transformations, no LLM.

``RuleRewriter.rewrite`` picks one transformation from ``CATALOGUE`` by scoring each applicable
one against the profile's signals (or a prior without a profile); ``applicable`` and
``generate`` expose every transformation so a benchmark can evaluate them all.
"""

from autoprofiler.rewrite.rules.rewriter import RuleRewriter
from autoprofiler.rewrite.rules.transforms import CATALOGUE, ORDER, Score, Transformation

__all__ = ["CATALOGUE", "ORDER", "RuleRewriter", "Score", "Transformation"]
