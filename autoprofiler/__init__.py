"""autoprofiler: learn what to profile when optimizing GPU kernels."""

from autoprofiler.problem import LoadReport, Problem, ProblemError, load_problems

__version__ = "0.1.0"

__all__ = ["LoadReport", "Problem", "ProblemError", "__version__", "load_problems"]
