"""Triton kernels compiled in the build lane, where no GPU is visible.

A Triton kernel compiles at its first launch, inside the candidate's timed run: LLVM, ``ptxas``
and a launcher built with the C compiler, seconds on the GPU lane that the CPU could have spent
earlier. :func:`prebuild_triton` runs the candidate's forward once in the build lane's process
on meta tensors (shapes and dtypes, no data) with Triton in a compile-only mode
(:func:`compile_only`): its driver answers with the timing lane's GPU (the compute capability
the lane was given) instead of asking one, every launch compiles and returns without running,
an autotuned kernel compiles each configuration it could pick, and tensors that would be on
the GPU are meta tensors that say they are. Each kernel compiled this way, and its launcher,
land in the candidate's own Triton cache under the key its timed run looks up (the same
source, signature, specialization, options and target: a meta tensor's address, 0, is as
aligned as an allocation), so the timed run loads them.

Best effort by design: a forward that needs data (``.item()``), a CUDA call or an unusual
launch stops the dry run where it is, and the timed run compiles whatever is missing as it
would have. The build hands nothing to the verdict.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TritonPrebuild:
    """What a dry run compiled: kernels (one per specialization), launchers, and why it
    stopped early, if it did."""

    kernels: int = 0
    launchers: int = 0
    stopped: str = ""


def parse_capability(text: str) -> tuple[int, int]:
    """``"9.0"`` -> ``(9, 0)``; ValueError for anything else."""
    major, _, minor = text.strip().partition(".")
    return int(major), int(minor or 0)


class _CudaAsMeta(TorchFunctionMode):
    """Tensors asked for on the GPU are made on the meta device (``.cuda()``, ``.to("cuda")``
    and ``device="cuda"`` alike)."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None):
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.cuda:
            return args[0]
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "meta"
        if func is torch.Tensor.to:
            args = tuple("meta" if _is_cuda(a) else a for a in args)
        return func(*args, **kwargs)


def _is_cuda(value: Any) -> bool:
    if isinstance(value, torch.device):
        return value.type == "cuda"
    return isinstance(value, str) and value.split(":")[0] == "cuda"


def _compile_only_driver(capability: tuple[int, int]) -> Any:
    """Triton's CUDA driver that names ``capability`` as the current GPU's and asks no GPU;
    its launchers are built when the CUDA driver library is there to link them to."""
    from triton.backends.nvidia import driver as nvidia

    class CompileOnlyDriver(nvidia.CudaDriver):
        def __init__(self) -> None:
            try:
                self.utils = nvidia.CudaUtils()  # Triton's own driver module, built once
            except Exception as exc:  # no libcuda here (a CPU-only machine): kernels only
                log.info("Triton launchers not built here: %s", str(exc).splitlines()[0])
                self.utils = None
            self.launcher_cls = nvidia.CudaLauncher
            self.get_device_capability = lambda device=None: capability
            self.get_current_device = lambda: 0
            self.get_current_stream = lambda device=None: 0
            self.set_current_device = lambda device: None

        @staticmethod
        def is_active() -> bool:
            return True

    return CompileOnlyDriver()


@contextlib.contextmanager
def compile_only(capability: tuple[int, int]) -> Iterator[list[Any]]:
    """Triton compiling for a GPU of ``capability`` without one, launching nothing; yields
    the list every compiled kernel is appended to. Restores Triton and torch on leaving."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.driver import driver
    from triton.runtime.jit import JITFunction

    compiled: list[Any] = []
    launch = JITFunction.run
    tune = Autotuner.run

    def compile_instead(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        kernel = launch(self, *args, grid=grid, warmup=True, **kwargs)
        if kernel is not None:
            compiled.append(kernel)
        return kernel

    def compile_every_config(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("warmup", None)  # a launch's; each configuration is compiled, not run
        return self.warmup(*args, **kwargs)

    previous = getattr(driver, "_active", None)
    driver.set_active(_compile_only_driver(capability))
    JITFunction.run = compile_instead
    Autotuner.run = compile_every_config
    torch.Tensor.is_cuda = property(lambda self: self.device.type in ("cuda", "meta"))
    try:
        with torch.device("meta"), _CudaAsMeta():
            yield compiled
    finally:
        del torch.Tensor.is_cuda  # the tensor base class's own again
        JITFunction.run = launch
        Autotuner.run = tune
        driver._active = previous


def build_launchers(kernels: list[Any]) -> int:
    """Build the launcher of each kernel (into the Triton cache); how many were built."""
    from triton.runtime.driver import driver

    active = driver.active
    if getattr(active, "utils", None) is None:
        return 0
    built = 0
    for kernel in {id(k): k for k in kernels}.values():
        try:
            active.launcher_cls(kernel.src, kernel.metadata)
        except Exception as exc:
            log.info("a Triton launcher was not built: %s", str(exc).splitlines()[0])
            continue
        built += 1
    return built


def prebuild_triton(model: Any, inputs: list[Any], capability: tuple[int, int]) -> TritonPrebuild:
    """Compile the Triton kernels ``model``'s forward launches on ``inputs`` (meta tensors)
    for a GPU of ``capability``, with no GPU; never raises."""
    with contextlib.ExitStack() as stack:
        try:
            compiled = stack.enter_context(compile_only(capability))
        except Exception as exc:  # no Triton, or one this module does not know
            stopped = f"no compile-only Triton here: {type(exc).__name__}: {exc}"
            return TritonPrebuild(stopped=stopped.splitlines()[0][:200])
        stopped = ""
        try:
            with torch.no_grad():
                model(*inputs)
        except (Exception, SystemExit) as exc:  # the dry run ends here; what compiled stays
            stopped = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        return TritonPrebuild(len({id(k) for k in compiled}), build_launchers(compiled), stopped)


@dataclass
class TritonCompiles:
    """The Triton compilations of this process, as Triton's compilation listener reports them
    (``triton.knobs.compilation.listener``): how many kernels, how many were found in the
    cache, and the seconds Triton spent in ``compile`` for them. A diagnostic of where a first
    call's seconds go (a kernel the build lane made should be a cache hit); candidate code can
    replace the listener, so it decides nothing."""

    kernels: int = 0
    cache_hits: int = 0
    seconds: float = 0.0

    def listen(self) -> bool:
        """Become Triton's compilation listener, when Triton is imported and has one."""
        knobs = getattr(sys.modules.get("triton"), "knobs", None)
        compilation = getattr(knobs, "compilation", None)
        if compilation is None or not hasattr(compilation, "listener"):
            return False
        compilation.listener = self._heard
        return True

    def _heard(self, **event: Any) -> None:
        self.kernels += 1
        self.cache_hits += bool(event.get("cache_hit"))
        total = getattr(event.get("times"), "total", 0)  # microseconds
        self.seconds += total / 1e6 if isinstance(total, (int, float)) else 0.0
