"""Scenario `export_nonstrict_fail`: a non-strict export (torch.export's default) that fails on a shape.

The batch dimension is declared dynamic (`Dim("b")`), and the model branches on `x.shape[0] > 2`.
Export creates a symbol for the dimension (range [2, int_oo]), adds the guard `s > 2` that narrows
it, and raises a constraint violation (suggested fix: `Dim("b", min=3)`); the log holds the
symbol and the guard, and then nothing: no exported program, no exception record.
"""

import torch
from torch.export import Dim, export


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 2:
            return x.sin()
        return x.cos()


def main() -> None:
    try:
        export(Model(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: Dim("b")}})
    except Exception as exc:  # noqa: BLE001 - the failure is the point
        print("export failed, as expected:", type(exc).__name__)
        return
    raise SystemExit("export should have failed")


if __name__ == "__main__":
    main()
