"""The session's real bench (``tests.bench.fixtures.bench_run``), to report on."""

from tests.bench.fixtures import bench_run  # noqa: F401
