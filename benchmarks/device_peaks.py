"""Measure a GPU's matmul rates (bf16, tf32, fp32) and copy bandwidth; print one JSON line."""

from __future__ import annotations

import json

import torch
import triton.testing


def matmul_tflops(dtype: torch.dtype, tf32: bool, n: int = 8192) -> float:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    ms = triton.testing.do_bench(lambda: a @ b, return_mode="median")
    return 2 * n**3 / (ms * 1e-3) / 1e12


def copy_tbps(n_bytes: int = 4 << 30) -> float:
    src = torch.empty(n_bytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median")
    return 2 * n_bytes / (ms * 1e-3) / 1e12


if __name__ == "__main__":
    print(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(),
                "bf16_tflops": matmul_tflops(torch.bfloat16, False),
                "tf32_tflops": matmul_tflops(torch.float32, True),
                "fp32_tflops": matmul_tflops(torch.float32, False),
                "copy_tbps": copy_tbps(),
                "method": "8192^3 matmul / 4 GiB device copy, do_bench median, random data",
            }
        )
    )
