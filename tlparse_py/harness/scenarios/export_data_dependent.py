"""Scenario `export_data_dependent`: a non-strict export failing on a data-dependent branch.

Two exports, as a user's program makes them: `Good` exports; `Bad` branches on a value computed from
tensor data (`if h.mean() > 0:`). Export (non-strict, its default) turns the tensor's truth value into
an unbacked symbol (`create_unbacked_symbol` u0, range [0, 1], its user stack ending at that line),
cannot guard on it and raises GuardOnDataDependentSymNode. The log holds the symbol and the graph
traced until then (the `make_fx_fail_partial` artifact), and no exception record: torch logs none
for a non-strict export. A successful export logs no exported program under TORCH_TRACE either.

Expected records: create_unbacked_symbol, the make_fx_fail_partial artifact.
"""

import torch


class Good(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x))


class Bad(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        if h.mean() > 0:
            return h * 2
        return h


def main() -> None:
    torch.export.export(Good(), (torch.randn(4, 8),))
    try:
        torch.export.export(Bad(), (torch.randn(4, 8),))
    except Exception as exc:  # noqa: BLE001 - the failure is the point
        print("export failed, as expected:", type(exc).__name__)
        return
    raise SystemExit("export should have failed")


if __name__ == "__main__":
    main()
