"""Scenario `export`: torch.export (strict and non-strict) and draft_export.

Runs under TORCH_DTRACE, which turns on the dtrace-only records.
Part 1: strict export with a dynamic batch dimension (Dim) -> `export`, `exported_program`,
create_symbol / guard_added for the dynamic dimension.
Part 2: non-strict export with the same Dim plus a data-dependent value (.item()) that is
used in control flow after torch._check -> create_unbacked_symbol, guard_added,
expression_created.
Part 3: draft_export of a model whose data-dependent branch cannot be decided without real
tensors -> propagate_real_tensors_provenance. draft_export writes its own capture file
into the same directory, so this scenario leaves two .log files.
Part 4: plain export of that same model fails on the data-dependent guard ->
guard_on_data_dependent_error; the program catches the error and still exits 0.

draft_export goes last: in torch 2.13 it removes the trace handler while it runs and does
not put it back, so nothing logged after it reaches the main trace file.
"""

import os

import torch
from torch.export import Dim, draft_export, export

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


class DynamicBatch(torch.nn.Module):
    """A linear layer over a dynamic batch dimension."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x)) + x.shape[0]


class CheckedItem(torch.nn.Module):
    """Reads a scalar out of a tensor and branches on it, guarded by torch._check."""

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= x.shape[0])
        if k > 0:  # decidable only because of the first torch._check
            return x[:k].sum(0)
        return x.sum(0)


class Undecidable(torch.nn.Module):
    """A data-dependent branch with no torch._check: only real tensors can decide it."""

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        if k > 2:
            return x[:k] * 2
        return x[:1]


def export_strict(batch: Dim) -> None:
    """Strict (Dynamo-traced) export with a dynamic batch dimension."""
    ep = export(
        DynamicBatch().to(DEVICE),
        (torch.randn(5, 4, device=DEVICE),),
        dynamic_shapes={"x": {0: batch}},
        strict=True,
    )
    print("strict export:", len(ep.graph.nodes), "nodes")


def export_non_strict(batch: Dim) -> None:
    """Non-strict export: a dynamic batch plus an unbacked .item() checked with torch._check."""
    x = torch.randn(6, 4, device=DEVICE)
    n = torch.tensor(3, device=DEVICE)
    ep = export(
        CheckedItem(),
        (x, n),
        dynamic_shapes={"x": {0: batch}, "n": None},
        strict=False,
    )
    torch.testing.assert_close(ep.module()(x, n), CheckedItem()(x, n))
    print("non-strict export:", len(ep.graph.nodes), "nodes")


def run_draft_export() -> None:
    """draft_export keeps going past the undecidable guard and reports it."""
    x = torch.randn(6, 4, device=DEVICE)
    n = torch.tensor(3, device=DEVICE)
    ep = draft_export(Undecidable(), (x, n))
    print("draft_export failures:", len(ep._report.failures))  # type: ignore[attr-defined, unused-ignore]  # set by draft_export; unused without torch installed


def export_undecidable() -> None:
    """Without real tensors the branch on .item() is a GuardOnDataDependentSymNode error."""
    x = torch.randn(6, 4, device=DEVICE)
    n = torch.tensor(3, device=DEVICE)
    try:
        export(Undecidable(), (x, n), strict=False)
    except Exception as exc:  # GuardOnDataDependentSymNode, possibly wrapped
        print("caught expected export error:", type(exc).__name__)
    else:
        raise SystemExit("export of a data-dependent branch unexpectedly succeeded")


def main() -> None:
    """Strict, non-strict, the failing plain export, then draft export (which must be last)."""
    batch = Dim("batch", min=2, max=64)
    export_strict(batch)
    export_non_strict(batch)
    export_undecidable()
    run_draft_export()
    print("export ok")


if __name__ == "__main__":
    main()
