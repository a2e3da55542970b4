"""``RayExecutor``: each job a Ray task holding one GPU (or one CPU on a cluster without GPUs).

It joins the cluster at ``address`` (``auto``, ``host:port`` or ``ray://host:port``), uses the
one this process is already connected to, or starts a local one (closed again with the
executor). Ray itself pins each task's GPU (``CUDA_VISIBLE_DEVICES``). Ray's own retries are
off: a task whose worker or node dies comes back to ``Executor.run``, which runs it again once.
``ray`` is an optional dependency (``pip install 'autoprofiler[ray]'``), imported here only.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from autoprofiler.execute.base import Executor, ExecutorError, Finished, Job, Reply, one_line

log = logging.getLogger(__name__)


def import_ray() -> Any:
    """The ``ray`` module, or a one-line ``ExecutorError`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ExecutorError("the ray executor needs ray: pip install 'autoprofiler[ray]'") from None
    return ray


def _ray_call(fn: Callable[..., Any], args: tuple) -> tuple[Reply, str]:
    """The task body: the job's reply, and where it ran."""
    import ray

    from autoprofiler.execute.base import call_job

    where = f"node {ray.get_runtime_context().get_node_id()[:8]} pid {os.getpid()}"
    return call_job(fn, args), where


class RayExecutor(Executor):
    """Jobs as Ray tasks on the cluster at ``address`` (see the module docstring); at most
    ``workers`` in flight (default: one per GPU the cluster has now, else one per CPU)."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise ExecutorError(f"workers must be at least 1, not {workers}")
        ray = import_ray()
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            self._connect(address)
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        capacity = gpus or int(resources.get("CPU", 1))
        self._slots = workers or capacity  # more than it has now queue in Ray (autoscaling)
        self._task = ray.remote(_ray_call).options(
            num_gpus=1 if gpus else 0, num_cpus=1, max_retries=0
        )
        self._running: dict[Any, str] = {}  # object ref -> job key
        log.info(
            "ray executor: %d at once on %s (%d GPUs, %d CPUs)",
            self._slots,
            address or "a local cluster",
            gpus,
            int(resources.get("CPU", 0)),
        )

    def _connect(self, address: str | None) -> None:
        try:
            if address:
                self._ray.init(address=address, log_to_driver=True)
            else:  # a local cluster sees this process's import path
                env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
                self._ray.init(include_dashboard=False, runtime_env={"env_vars": env})
        except Exception as exc:
            where = address or "a local Ray cluster"
            raise ExecutorError(f"cannot start or join {where}: {one_line(exc)}") from None

    @property
    def slots(self) -> int:
        return self._slots

    def _place(self, job: Job, avoid: list[str]) -> bool:
        if len(self._running) >= self._slots:
            return False
        self._running[self._task.remote(job.fn, job.args)] = job.key
        return True

    def _collect(self, timeout_s: float) -> list[Finished]:
        if not self._running:
            time.sleep(timeout_s)
            return []
        refs = list(self._running)
        ready, _ = self._ray.wait(refs, num_returns=1, timeout=timeout_s)
        if ready:
            ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=0)
        return [self._finished(ref) for ref in ready]

    def _finished(self, ref: Any) -> Finished:
        key = self._running.pop(ref)
        errors = self._ray.exceptions
        try:
            reply, where = self._ray.get(ref)
        except errors.RayTaskError as exc:  # raised outside the job (arguments, pickling)
            return Finished(key, "ray", reply=Reply(error=one_line(exc.cause or exc)))
        except errors.RayError as exc:  # the worker or its node is gone
            return Finished(key, "ray", lost=one_line(exc))
        return Finished(key, where, reply=reply)

    def _abandon(self) -> None:
        for ref in self._running:
            self._ray.cancel(ref)
        self._running.clear()

    def close(self) -> None:
        """Leave the cluster if this executor started it."""
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
