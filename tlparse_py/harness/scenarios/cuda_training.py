"""Scenario `cuda_training` (CUDA only): training steps whose batch size changes.

The first batch size compiles static Triton kernels for the forward and the lazily compiled
backward; a second batch size makes Dynamo recompile with a dynamic batch dimension (automatic
dynamic shapes), so the second compile's Triton kernels take the size as an argument.

Expected records: inductor_output_code with @triton.jit kernels for forward and backward,
bwd_compilation_metrics, and a recompile ([0/1]) whose reason names the batch size.
"""

import sys

import torch


class Block(torch.nn.Module):
    """Linear -> LayerNorm -> GELU -> Linear: pointwise and reduction kernels in both passes."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.norm = torch.nn.LayerNorm(128)
        self.fc2 = torch.nn.Linear(128, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.norm(self.fc1(x))))


def main() -> None:
    """Two steps at batch 16, then two at batch 24 (the recompile)."""
    if not torch.cuda.is_available():
        sys.exit("cuda_training: this scenario needs a CUDA device")
    torch.manual_seed(0)
    model = Block().cuda()
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for batch in (16, 16, 24, 24):
        x = torch.randn(batch, 64, device="cuda")
        y = torch.randn(batch, 8, device="cuda")
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    print("cuda_training ok, loss", float(loss))


if __name__ == "__main__":
    main()
