"""Scenario `triton` (CUDA only): Inductor generates Triton kernels.

A pointwise chain and a reduction on a CUDA tensor give at least one fused pointwise
kernel and one reduction kernel.

Expected records: inductor_output_code whose payload contains @triton.jit kernels, and
(where this torch build logs it) triton_kernel_info artifacts.
"""

import sys

import torch


def fused(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pointwise ops fuse into one kernel; the softmax adds reductions."""
    z = torch.sin(x) * torch.cos(y) + 1
    return torch.softmax(z, dim=-1)


def main() -> None:
    """Compile and check against eager."""
    if not torch.cuda.is_available():
        sys.exit("triton: this scenario needs a CUDA device")
    x = torch.randn(64, 128, device="cuda")
    y = torch.randn(64, 128, device="cuda")
    compiled = torch.compile(fused, backend="inductor")
    torch.testing.assert_close(compiled(x, y), fused(x, y))
    torch.cuda.synchronize()
    print("triton ok")


if __name__ == "__main__":
    main()
