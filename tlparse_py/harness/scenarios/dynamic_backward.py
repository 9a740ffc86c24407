"""Scenario `dynamic_backward`: a training recompile whose backward is compiled inside its forward compile.

A small model is trained on inputs of 4, then 8 rows: the second size recompiles it with a dynamic
batch size, and under dynamic shapes Inductor compiles that recompile's backward right away, inside
the forward compile (a chromium span with is_backward: true), instead of lazily at the first
backward call (no bwd_compilation_metrics for it).
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).sum()


def main() -> None:
    model = torch.compile(Model().to(DEVICE), backend="inductor")
    for rows in (4, 8):
        model(torch.randn(rows, 8, device=DEVICE)).backward()
    print("dynamic backward ok")


if __name__ == "__main__":
    main()
