"""Outputs handed over on the host as raw files (``evaluate/output_files.py``): what the
candidate's side writes, and what the trusted side refuses to read."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest
import torch

from autoprofiler.evaluate.inputs import OutputError, plain_leaves
from autoprofiler.evaluate.layout import SLOT_ALIGN, describe, malformed
from autoprofiler.evaluate.output_files import (
    output_path,
    read_output,
    size_limit,
    write_output,
)

CPU = torch.device("cpu")


LIMIT = size_limit(2**20)


def _written(tmp_path: Path, value, name: str = "out") -> tuple[Path, list[dict]]:
    path = output_path(tmp_path, name)
    return path, write_output(plain_leaves(value), path, LIMIT)


def test_an_output_crosses_whole_with_its_numbers_and_odd_tensors(tmp_path: Path) -> None:
    strided = torch.arange(15.0).reshape(5, 3).t()  # not contiguous
    value = (strided, [torch.tensor([True, False])], 3.5, torch.zeros(0, 4), torch.tensor(7))
    path, told = _written(tmp_path, value)
    assert told == describe(plain_leaves(value))
    assert path.stat().st_size == 3 * SLOT_ALIGN  # each tensor from an aligned offset
    assert not list(tmp_path.glob("*.partial"))
    got = read_output(path, told, CPU)
    assert torch.equal(got[0], strided) and got[0].is_contiguous()
    assert torch.equal(got[1], value[1][0]) and got[2] == 3.5
    assert got[3].shape == (0, 4) and int(got[4]) == 7


def test_an_output_of_numbers_only_is_an_empty_file(tmp_path: Path) -> None:
    path, told = _written(tmp_path, [1, 2.5])
    assert path.stat().st_size == 0
    assert read_output(path, told, CPU) == [1, 2.5]


def test_the_leaves_stay_readable_after_the_file_is_removed(tmp_path: Path) -> None:
    path, told = _written(tmp_path, torch.arange(1000.0))
    got = read_output(path, told, CPU)
    path.unlink()
    assert float(got[0].sum()) == sum(range(1000))


def test_a_dtype_that_cannot_cross_is_refused_when_written(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="uint16 cannot be handed over") as error:
        _written(tmp_path, torch.zeros(3, dtype=torch.uint16))
    assert not error.value.cheat


def test_an_output_over_the_limit_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    huge = torch.zeros(1).expand(2**20, 2**20)  # a stride-0 view: 4 TiB if written whole
    with pytest.raises(OutputError, match=r"shape \(1048576, 1048576\) takes 4\.1e\+03 GiB"):
        _written(tmp_path, huge)
    assert not list(tmp_path.iterdir())
    path = output_path(tmp_path, "out")
    write_output([torch.zeros(SLOT_ALIGN // 4)], path, SLOT_ALIGN)  # exactly the limit
    with pytest.raises(OutputError, match="over the"):
        write_output([torch.zeros(SLOT_ALIGN // 4 + 1)], path, SLOT_ALIGN)


def test_no_file_is_a_missing_output(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"no output was handed over \(out.out\)"):
        read_output(output_path(tmp_path, "out"), [{"number": 1}], CPU)
    (tmp_path / "out.partial").write_bytes(b"\0" * 64)  # a write that did not finish
    with pytest.raises(OutputError, match="no output was handed over"):
        read_output(output_path(tmp_path, "out"), [{"number": 1}], CPU)


@pytest.mark.parametrize("extra", [-4, 4, SLOT_ALIGN])
def test_a_file_of_another_size_than_its_description_is_refused(tmp_path: Path, extra: int):
    path, told = _written(tmp_path, torch.ones(100))
    size = path.stat().st_size
    os.truncate(path, size + extra)
    with pytest.raises(OutputError, match=f"holds {size + extra} bytes where its description"):
        read_output(path, told, CPU)


def test_a_description_that_claims_more_than_the_file_is_refused(tmp_path: Path) -> None:
    path, _ = _written(tmp_path, torch.ones(100))
    with pytest.raises(OutputError, match="where its description needs"):
        read_output(path, [{"dtype": "float32", "shape": [1000, 1000]}], CPU)


@pytest.mark.parametrize(
    ("told", "why"),
    [
        ("garbage", "its output description is malformed"),
        ([1], "its output description is malformed"),
        (
            [{"dtype": "object", "shape": [2]}],
            "output 0 has a dtype that cannot be handed over: object",
        ),
        ([{"dtype": "float32", "shape": [-1]}], "output 0 has a malformed shape"),
        ([{"dtype": "float32", "shape": [2.0]}], "output 0 has a malformed shape"),
        ([{"dtype": "float32"}], "output 0 has a malformed shape"),
        ([{"number": "1"}], "output 0 is described as a number but is not one"),
        ([{"number": [1]}], "output 0 is described as a number but is not one"),
    ],
)
def test_a_malformed_description_is_refused_before_the_file_is_opened(tmp_path, told, why):
    assert malformed(told) == why
    with pytest.raises(OutputError, match="^" + why.replace("(", r"\(")):
        read_output(output_path(tmp_path, "never-written"), told, CPU)


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = output_path(tmp_path, "out")
    os.mkfifo(path)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            read_output(path, [{"dtype": "float32", "shape": [4]}], CPU)
            outcome.append(None)
        except BaseException as exc:  # the test looks at what it was
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # let the blocked open() go before failing
        with open(path, "wb"):
            pass
        pytest.fail("reading a FIFO blocked until a writer came")
    assert isinstance(outcome[0], OutputError) and "not a regular file" in str(outcome[0])


@pytest.mark.parametrize("target", ["file", "/dev/zero"])
def test_a_symbolic_link_is_refused_wherever_it_points(tmp_path: Path, target: str) -> None:
    real, told = _written(tmp_path, torch.ones(64), "real")
    path = output_path(tmp_path, "out")
    path.symlink_to(real if target == "file" else Path(target))
    with pytest.raises(OutputError, match=r"unreadable output out\.out"):
        read_output(path, told, CPU)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("columns", [1 << 20, 1002])  # 6 MiB; 6012 bytes, not whole pages
def test_an_output_crosses_to_the_gpu_through_page_locked_memory(
    tmp_path: Path, caplog, columns: int
) -> None:
    device = torch.device("cuda")
    made = torch.randn(3, columns, device=device)[:, ::2]  # on the GPU, not contiguous
    path, told = _written(tmp_path, [made, 2])
    with caplog.at_level(logging.DEBUG, logger="autoprofiler.evaluate.cuda_ipc"):
        got = read_output(path, told, device)
    assert "pageable" not in caplog.text  # the driver page-locked it
    assert got[0].device.type == "cuda" and torch.equal(got[0], made) and got[1] == 2
    # the pages were let go: the same memory can be registered again, and the file removed
    assert torch.equal(read_output(path, told, device)[0], made)
    path.unlink()
