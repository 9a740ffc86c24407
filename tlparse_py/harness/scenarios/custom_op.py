"""Scenario `custom_op`: custom operators with good, missing and wrong fake kernels.

Runs under TORCH_DTRACE.
Part 1: torch.compile of a model calling `harness::scaled_add`, which has a correct
register_fake kernel (the op shows up in the graphs and in compliant_custom_ops).
Part 2: plain (non-strict) torch.export of a model calling `harness::no_fake` (no fake
kernel) and `harness::bad_fake` fails; the program catches the error and still exits 0.
Part 3: draft_export of the same model. draft_export runs the real kernels, so it records
`missing_fake_kernel` and `mismatched_fake_kernel` (the wrong output shape) instead of
failing; it writes them to its own capture file next to the main log.

draft_export goes last: in torch 2.13 it removes the trace handler while it runs and does
not put it back, so nothing logged after it reaches the main trace file.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


@torch.library.custom_op("harness::scaled_add", mutates_args=())
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """x + alpha * y, computed eagerly (opaque to the compiler)."""
    return x + alpha * y


@scaled_add.register_fake
def _(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """Correct fake kernel: same shape as x."""
    return torch.empty_like(x)


@torch.library.custom_op("harness::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    """An op without any fake kernel: tracing cannot know its output shape."""
    return x.clone() * 2


@torch.library.custom_op("harness::bad_fake", mutates_args=())
def bad_fake(x: torch.Tensor) -> torch.Tensor:
    """An op whose real output has x's shape ..."""
    return x + 1


@bad_fake.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    """... but whose fake kernel claims one extra row (a wrong output shape)."""
    return x.new_empty(x.shape[0] + 1, *x.shape[1:])


class GoodModel(torch.nn.Module):
    """Only uses the op with a correct fake kernel."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(scaled_add(x, y, 0.5))


class BrokenFakes(torch.nn.Module):
    """Uses both ops with missing and wrong fake kernels."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return no_fake(x) + bad_fake(x)


def compile_good_op(x: torch.Tensor, y: torch.Tensor) -> None:
    """torch.compile treats the custom op as an extern call in the graph."""
    compiled = torch.compile(GoodModel(), backend="inductor")
    torch.testing.assert_close(compiled(x, y), GoodModel()(x, y))
    print("compiled custom op ok")


def draft_export_broken(x: torch.Tensor) -> None:
    """draft_export reports the missing and the mismatched fake kernel."""
    ep = torch.export.draft_export(BrokenFakes(), (x,))
    kinds = sorted({f.failure_type.name for f in ep._report.failures})  # type: ignore[attr-defined, unused-ignore]  # set by draft_export; unused without torch installed
    print("draft_export failures:", kinds)


def export_missing_fake(x: torch.Tensor) -> None:
    """Plain export of an op without a fake kernel is an error; it is expected."""
    try:
        torch.export.export(BrokenFakes(), (x,), strict=False)
    except Exception as exc:  # the exact type varies between releases
        print("caught expected export error:", type(exc).__name__)
    else:
        print("export unexpectedly succeeded")


def main() -> None:
    """Compile the good op, export the broken ones plainly, then draft-export them."""
    x = torch.randn(4, 3, device=DEVICE)
    y = torch.randn(4, 3, device=DEVICE)
    compile_good_op(x, y)
    export_missing_fake(x)
    draft_export_broken(x)
    print("custom_op ok")


if __name__ == "__main__":
    main()
