"""Scenario `export_qualified_dim`: failing non-strict exports whose Dim is written as most code writes it.

`export_nonstrict_fail` calls `export(..., dynamic_shapes={"x": {0: Dim("b")}})` on one line with a
bare `Dim`. Real code qualifies it and spreads the call over several lines. The program runs twice
(two processes, so two logs, each with its own verdict); each run makes one non-strict export
(`strict=False`) of a model that branches on its batch dimension, which fails with a constraint
violation:

1. the call over two lines, `torch.export.Dim("batch")` inside a `dynamic_shapes` dict on its first;
2. the call formatted one argument a line (as black writes it), a tuple `dynamic_shapes` holding a
   name bound to `torch.export.Dim("rows")` on an earlier line.

A stack frame's text in the log is the first line of the frame's statement only (Python's
`FrameSummary.line`), so the log shows the Dim of the first call and none of the second.

Each export creates a symbol for its dimension (range [2, int_oo]) and adds the guard `s > 4` that
narrows it; torch suggests `Dim(..., min=5)`. The log holds the symbol and the guard, no exported
program and no exception record.
"""

from pathlib import Path

import torch

# The harness runs the processes one after the other in one working directory: the first leaves this.
FIRST_DONE = Path("export_qualified_dim.first")


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 4:
            return x.sin()
        return x.cos()


def qualified_in_dict() -> None:
    """The first process: a qualified Dim in a dict, the call over two lines."""
    x = torch.randn(8, 3)
    torch.export.export(Model(), (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}},
                        strict=False)


def bound_name_in_tuple() -> None:
    """The second process: a name bound to a qualified Dim on an earlier line, a tuple of shapes."""
    rows = torch.export.Dim("rows")
    torch.export.export(
        Model(),
        (torch.randn(8, 3),),
        dynamic_shapes=({0: rows},),
        strict=False,
    )


def main() -> None:
    first = not FIRST_DONE.exists()
    export = qualified_in_dict if first else bound_name_in_tuple
    try:
        export()
    except Exception as exc:  # noqa: BLE001 - the failure is the point
        print(f"export {'1' if first else '2'} failed, as expected:", type(exc).__name__)
        FIRST_DONE.touch()
        return
    raise SystemExit("export should have failed")


if __name__ == "__main__":
    main()
