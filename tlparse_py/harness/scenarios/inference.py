"""Scenario `inference`: one frame, no graph breaks, Inductor, under torch.no_grad.

Expected records: dynamo_start, dynamo_output_graph, aot_inference_graph,
inductor_output_code, compilation_metrics (one frame, frame_compile_id 0, attempt 0).
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


class TinyMLP(torch.nn.Module):
    """Two small linear layers with a pointwise activation: enough for a fused kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)) * 2.0 + 1.0)


def main() -> None:
    """Compile the module once and run it twice (the second call hits the guards)."""
    torch.manual_seed(0)
    model = TinyMLP().to(DEVICE).eval()
    compiled = torch.compile(model, backend="inductor")
    x = torch.randn(4, 8, device=DEVICE)
    with torch.no_grad():
        expected = model(x)
        for _ in range(2):
            torch.testing.assert_close(compiled(x), expected)
    print("inference ok")


if __name__ == "__main__":
    main()
