"""Scenario `training`: forward + backward through a small nn.Module.

Expected records: aot_joint_graph, aot_forward_graph, aot_backward_graph, two
inductor_output_code (forward and backward), compilation_metrics for the forward and
bwd_compilation_metrics for the lazily compiled backward.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


class TinyNet(torch.nn.Module):
    """Linear -> tanh -> Linear; the tanh makes the backward save an activation."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x)))


def main() -> None:
    """Two optimizer steps: the first compiles forward and backward, the second reuses them."""
    torch.manual_seed(0)
    model = TinyNet().to(DEVICE)
    compiled = torch.compile(model, backend="inductor")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8, device=DEVICE)
    y = torch.randn(4, 1, device=DEVICE)
    for _ in range(2):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
    print("training ok, loss", float(loss))


if __name__ == "__main__":
    main()
