"""Rewriters: a problem and its profile in, one ``ModelNew`` candidate out."""

from autoprofiler.rewrite.base import Candidate, RewriteContext, Rewriter

__all__ = ["Candidate", "RewriteContext", "Rewriter"]
