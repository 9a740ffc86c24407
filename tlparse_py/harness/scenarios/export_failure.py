"""Scenario `export_failure`: torch.export.export failing with a ConstraintViolationError.

The module branches on `x.shape[0] > 2`, but the dynamic_shapes spec says the first dim
`n` may be as small as 2 (Dim("n", min=2)). Tracing adds the guard `s.. > 2`, which
contradicts the declared range, so export raises torch.fx.experimental.symbolic_shapes.
ConstraintViolationError (wrapped in a UserError by torch.export). The program exports
twice, strict=False (make_fx tracing, no Dynamo frame) and strict=True (through Dynamo),
catches each error and prints it, so the process exits 0 and the trace is complete.

Only TORCH_TRACE is needed: the failure is logged by the strict export, as a
compilation_metrics record (no compile id) with fail_type ConstraintViolationError and a
fail_reason quoting the generated guard; both exports log create_symbol and
guard_added_fast (`s.. > 2`). TORCH_DTRACE would add only `export` ("start!") records,
guard_added and some 190 expression_created records, and no record of the non-strict
failure either, so the scenario runs under TORCH_TRACE.

Expected records: guard_added_fast, a compilation_metrics with fail_type
ConstraintViolationError whose fail_reason names the generated guard.
"""

import torch
from torch.export import Dim


class Branchy(torch.nn.Module):
    """Data-independent control flow on a dynamic size: a guard on n."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 2:
            return x.sin() + 1
        return x.cos() - 1


def try_export(strict: bool) -> None:
    """Export with a range the branch contradicts; report (not raise) the failure."""
    x = torch.randn(4, 3)
    spec = {"x": {0: Dim("n", min=2, max=64)}}
    try:
        torch.export.export(Branchy(), (x,), dynamic_shapes=spec, strict=strict)
    except Exception as exc:  # noqa: BLE001 - the failure is the point
        print(f"strict={strict}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    else:
        raise SystemExit(f"strict={strict}: export unexpectedly succeeded")


def main() -> None:
    try_export(strict=False)
    try_export(strict=True)
    print("export_failure ok")


if __name__ == "__main__":
    main()
