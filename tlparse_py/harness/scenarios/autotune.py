"""Scenario `autotune` (CUDA only): torch.compile(mode="max-autotune") on a matmul.

Inductor benchmarks its Triton mm templates against aten.mm and picks the fastest.

Expected records: `mm_template_autotuning` / `mm_template_precompiling` chromium events
(compile_time_autotune_time_us in compilation_metrics) and Triton template kernels in
inductor_output_code.
"""

import sys

import torch


def matmul_bias_relu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """A matmul with an epilogue that a template kernel can fuse."""
    return torch.relu(a @ b + bias)


def main() -> None:
    """One compile; the matrices are small so each benchmark run is quick."""
    if not torch.cuda.is_available():
        sys.exit("autotune: this scenario needs a CUDA device")
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 256, device="cuda", dtype=torch.float16)
    bias = torch.randn(256, device="cuda", dtype=torch.float16)
    compiled = torch.compile(matmul_bias_relu, mode="max-autotune")
    torch.testing.assert_close(
        compiled(a, b, bias), matmul_bias_relu(a, b, bias), atol=1e-2, rtol=1e-2
    )
    torch.cuda.synchronize()
    print("autotune ok")


if __name__ == "__main__":
    main()
