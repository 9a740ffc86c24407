"""The program of the `skip_base` / `skip_nan` pair: one training loop, before and after a NaN check.

Not a scenario itself: skip_base.py and skip_nan.py both run this file (runpy), with NAN_CHECK
False and True, so their logs share file name, line numbers and the whole user stack, and
`tlparse-py diff` pairs their frames. `Model.forward` loops over four Linear+relu layers.

With NAN_CHECK, each step of that loop asks `torch.isnan(x).any()` and raises if so: a
data-dependent branch (a graph break) inside a for-loop. Dynamo cannot resume a graph inside a
loop, so it skips the whole frame ("Skipping the frame and falling back to eager"): the forward
runs eagerly on every step, and the compile time spent on it before it gave up is lost. Without
NAN_CHECK Dynamo folds the `and` away and the forward compiles into one graph, with its backward.

The backend is Inductor, as a real training job's would be, so what the skip costs is real
compile time (the forward and backward graphs it no longer compiles).
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")
NAN_CHECK = globals()["NAN_CHECK"]


class Model(torch.nn.Module):
    """Four Linear+relu steps, then a Linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(4))
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
            if NAN_CHECK and torch.isnan(x).any():
                raise ValueError("NaN in the activations")
        return self.head(x)


def main() -> None:
    """Three optimizer steps of the compiled model."""
    torch.manual_seed(0)
    model = Model().to(DEVICE)
    compiled = torch.compile(model, backend="inductor")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 16, device=DEVICE)
    y = torch.randn(8, 1, device=DEVICE)
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
    print("skip program ok, nan check:", NAN_CHECK, "loss", float(loss))


if __name__ == "__main__":
    main()
