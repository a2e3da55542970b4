"""Rewriters: a problem and its profile in, one ``ModelNew`` candidate out."""

from autoprofiler.rewrite.base import Candidate, RewriteContext, Rewriter, profile_hash

__all__ = ["Candidate", "RewriteContext", "Rewriter", "profile_hash"]
