"""Scenario `cudagraphs` (CUDA only): torch.compile(mode="reduce-overhead").

CUDA graph trees warm up on the first call, record on the next and replay afterwards, so
the function is called several times.

Expected records: cudagraph chromium events (CUDAGraphNode.record,
cudagraphify.get_container) and runtime compile overhead
(compilation_metrics_runtime with runtime_cudagraphify_time_us).
"""

import sys

import torch


class TinyMLP(torch.nn.Module):
    """Small enough that launch overhead dominates: the case cudagraphs is for."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def main() -> None:
    """Warm-up, record, then replays, under no_grad (inference cudagraphs)."""
    if not torch.cuda.is_available():
        sys.exit("cudagraphs: this scenario needs a CUDA device")
    model = TinyMLP().cuda().eval()
    compiled = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(16, 32, device="cuda")
    with torch.no_grad():
        expected = model(x)
        for _ in range(5):
            out = compiled(x)
        torch.testing.assert_close(out, expected)
    torch.cuda.synchronize()
    print("cudagraphs ok")


if __name__ == "__main__":
    main()
