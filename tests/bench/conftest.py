"""The session's real bench (``fixtures.bench_run``)."""

from tests.bench.fixtures import bench_run  # noqa: F401
