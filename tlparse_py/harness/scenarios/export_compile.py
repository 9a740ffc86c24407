"""Scenario `export_compile`: a plain torch.export that succeeds, then torch.compile of its module.

`torch.export.export` with a named `Dim` and `Dim.AUTO` exports the model; the program then
compiles `ep.module()` with Inductor, whose cache lookups (misses) are logged.
"""

import os

import torch
from torch.export import Dim, export

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x + 1) @ y


def main() -> None:
    x, y = torch.randn(4, 8, device=DEVICE), torch.randn(8, 3, device=DEVICE)
    ep = export(Model(), (x, y), dynamic_shapes={"x": {0: Dim("b"), 1: Dim.AUTO}, "y": {0: Dim.AUTO, 1: Dim.AUTO}})
    compiled = torch.compile(ep.module(), backend="inductor")
    torch.testing.assert_close(compiled(x, y), Model()(x, y))
    print("export then compile ok")


if __name__ == "__main__":
    main()
