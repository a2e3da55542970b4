"""The ctypes binding of CUPTI: struct layouts against the real headers, and the library's own
failures on a machine without a GPU driver."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autoprofiler.profile import cupti_activity, cupti_api
from autoprofiler.profile.cupti_api import SIGNATURES, CuptiError, load_cupti

CUDA_INCLUDE = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
HEADERS = (
    "cupti_target.h",
    "cupti_profiler_target.h",
    "cupti_profiler_host.h",
    "cupti_range_profiler.h",
)


def _c_layouts(tmp_path: Path) -> dict[str, list[int]]:
    """For each bound struct, what the C compiler says: its STRUCT_SIZE macro, then the offset
    of each field this binding declares."""
    lines = ["#include <stdio.h>", "#include <stddef.h>"]
    lines += [f"#include <{h}>" for h in HEADERS]
    lines.append("int main(void) {")
    for params, c_name in {c: n for c, n in SIGNATURES.values()}.items():
        fields = " ".join("%zu" for _ in params._fields_)
        offsets = ", ".join(f"offsetof({c_name}, {f[0]})" for f in params._fields_)
        lines.append(
            f'printf("{c_name} %zu {fields}\\n", (size_t){c_name}_STRUCT_SIZE, {offsets});'
        )
    lines += ["return 0; }"]
    source = tmp_path / "layouts.cpp"
    source.write_text("\n".join(lines))
    binary = tmp_path / "layouts"
    subprocess.run(
        ["g++", "-x", "c++", f"-I{CUDA_INCLUDE}", str(source), "-o", str(binary)],
        check=True,
        capture_output=True,
        text=True,
    )
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    return {line.split()[0]: [int(x) for x in line.split()[1:]] for line in out.splitlines()}


@pytest.mark.skipif(
    shutil.which("g++") is None or not all((CUDA_INCLUDE / h).exists() for h in HEADERS),
    reason="needs g++ and the CUDA toolkit's CUPTI headers",
)
def test_every_bound_struct_matches_the_cuda_headers(tmp_path: Path) -> None:
    layouts = _c_layouts(tmp_path)
    for params, c_name in {c: n for c, n in SIGNATURES.values()}.items():
        size, *offsets = layouts[c_name]
        mine = [getattr(params, f[0]).offset for f in params._fields_]
        assert offsets == mine, c_name
        assert params.make().structSize == size, c_name


def test_a_missing_library_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    environ = {cupti_api.CUPTI_ENV: str(tmp_path / "libcupti.so"), "CUDA_HOME": str(tmp_path)}
    try:
        library = load_cupti(environ)
    except CuptiError as exc:
        assert cupti_api.CUPTI_ENV in str(exc) and "\n" not in str(exc)
    else:  # a CUPTI the loader finds by soname: it must be a range-profiler one
        assert hasattr(library, "cuptiRangeProfilerEnable")


def _driverless_cupti() -> ctypes.CDLL:
    """This machine's CUPTI library, where no CUDA driver is (else the test is skipped)."""
    try:
        library = load_cupti()
    except CuptiError:
        pytest.skip("no CUPTI library on this machine")
    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("a CUDA driver is present: this checks the driverless failure")
    except OSError:
        pass
    return library


def test_cupti_without_a_driver_fails_as_a_cupti_error() -> None:
    library = _driverless_cupti()
    with pytest.raises(CuptiError, match=r"cuptiProfilerInitialize failed: .*CUPTI error \d+"):
        cupti_api.Cupti(library).initialize()
    with pytest.raises(CuptiError, match=r"libcuda\.so\.1"):
        cupti_api.current_context()


def test_errors_with_advice_name_what_to_do() -> None:
    try:
        cupti = cupti_api.Cupti(load_cupti())
    except CuptiError:
        pytest.skip("no CUPTI library on this machine")
    privileges = cupti.error("cuptiRangeProfilerEnable", 35)
    assert "NVreg_RestrictProfilingToAdminUsers=0" in str(privileges)
    assert "INSUFFICIENT_PRIVILEGES" in str(privileges)
    unsupported = cupti.error("cuptiProfilerHostInitialize", 27)
    assert "AUTOPROFILER_HARDWARE=ncu" in str(unsupported)
    assert cupti.error("cuptiProfilerHostConfigAddMetrics", 17).unsupported_metric


@pytest.mark.skipif(
    shutil.which("g++") is None or not (CUDA_INCLUDE / "cupti_activity.h").exists(),
    reason="needs g++ and the CUDA toolkit's CUPTI headers",
)
def test_the_kernel_record_prefix_matches_the_cuda_header(tmp_path: Path) -> None:
    record, c_name = cupti_activity._KernelRecord, cupti_activity.RECORD_C_NAME
    fields = [f[0] for f in record._fields_]
    offsets = ", ".join(f"offsetof({c_name}, {f})" for f in fields)
    formats = " ".join("%zu" for _ in fields)
    source = tmp_path / "record.cpp"
    source.write_text(
        "#include <stdio.h>\n#include <stddef.h>\n#include <cupti_activity.h>\n"
        f'int main(void) {{ printf("{formats}\\n", {offsets}); return 0; }}\n'
    )
    binary = tmp_path / "record"
    subprocess.run(
        ["g++", "-x", "c++", f"-I{CUDA_INCLUDE}", str(source), "-o", str(binary)],
        check=True,
        capture_output=True,
    )
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    assert [int(x) for x in out.split()] == [getattr(record, f).offset for f in fields]
    assert _enum_value("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL") == cupti_activity.CONCURRENT_KERNEL


def _enum_value(name: str) -> int:
    text = (CUDA_INCLUDE / "cupti_activity.h").read_text()
    return int(re.search(rf"\b{name}\s*=\s*(\d+)", text).group(1))


def test_a_kernel_record_reads_as_ncu_names_its_launch_statistics() -> None:
    record = cupti_activity._KernelRecord(
        kind=cupti_activity.CONCURRENT_KERNEL, registersPerThread=40, start=7,
        gridX=4, gridY=2, gridZ=1, blockX=128, blockY=1, blockZ=1,
        staticSharedMemory=1024, dynamicSharedMemory=512, name=b"_Z6kernelPfi",
    )  # fmt: skip
    entry = cupti_activity.kernel_record(record, reserved_shared=1024)
    assert entry == {
        "name": "kernel(float*, int)",
        "start": 7,
        "launch__grid_size": 8.0,
        "launch__block_size": 128.0,
        "launch__registers_per_thread": 40.0,
        "launch__shared_mem_per_block": 2560.0,
        "launch__shared_mem_per_block_driver": 1024.0,
    }
    assert cupti_activity.demangle("triton_poi_fused_add_0") == "triton_poi_fused_add_0"


def test_kernel_records_without_a_driver_fail_as_a_cupti_error() -> None:
    library = _driverless_cupti()
    ran = []
    activity = cupti_activity.KernelActivity(cupti_api.Cupti(library))
    with pytest.raises(CuptiError, match=r"cuptiActivityEnable failed: .*CUPTI error \d+"):
        activity.record(lambda: ran.append(1))
    assert ran == []  # nothing runs unrecorded
    assert activity in cupti_activity._REGISTERED  # its callbacks outlive it: CUPTI holds them
