"""Peak rates of known GPUs (``data/devices.json``): the ceilings a roofline bound divides by.

Each peak carries its source: ``measured`` (on the device, see ``H200_NOTES``) or a datasheet
lead not yet measured. Device names from ``torch.cuda.get_device_name`` (``"NVIDIA H200"``) map to
table keys (``"H200"``) through each entry's aliases; ``device_key`` is also the device name that
recordings are stored under.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

DEVICES_FILE = "devices.json"
_DTYPE_RATE = {
    "bfloat16": "bf16_tflops",
    "float16": "fp16_tflops",
    "float32": "fp32_tflops",
    "float64": "fp64_tflops",
}


@dataclass(frozen=True)
class DevicePeaks:
    """Peak compute (TFLOP/s by rate name, e.g. ``bf16_tflops``) and DRAM bandwidth of a GPU."""

    name: str
    tflops: dict[str, float] = field(default_factory=dict)
    dram_tb_s: float = 0.0
    sources: dict[str, str] = field(default_factory=dict)

    def matmul_tflops(self, dtype: str, tf32: bool = False) -> float:
        """The matmul rate for a torch dtype name (``float32`` uses TF32 when ``tf32``)."""
        rate = (
            "tf32_tflops" if dtype == "float32" and tf32 else _DTYPE_RATE.get(dtype, "fp32_tflops")
        )
        return self.tflops.get(rate, self.tflops.get("fp32_tflops", 0.0))


@cache
def _table() -> dict[str, dict]:
    text = resources.files("autoprofiler").joinpath("data", DEVICES_FILE).read_text("utf-8")
    return json.loads(text)


def device_key(name: str) -> str:
    """The table key for a device name (``"NVIDIA H200"`` -> ``"H200"``); unknown names are
    returned without the vendor prefix and with spaces as dashes."""
    for key, entry in _table().items():
        if name == key or name in entry.get("aliases", ()):
            return key
    return re.sub(r"\s+", "-", name.removeprefix("NVIDIA ").strip()) or "unknown"


def known_devices() -> list[str]:
    return sorted(_table())


def get_device(name: str) -> DevicePeaks | None:
    """The peaks of ``name`` (a key or an alias), or None for a device not in the table."""
    entry = _table().get(device_key(name))
    if entry is None:
        return None
    peaks = entry.get("peaks", {})
    return DevicePeaks(
        name=device_key(name),
        tflops={k: v["value"] for k, v in peaks.items() if k.endswith("_tflops")},
        dram_tb_s=peaks.get("dram_tb_s", {}).get("value", 0.0),
        sources={k: v.get("source", "") for k, v in peaks.items()},
    )
