"""Scenario `reset_reuse`: torch._dynamo.reset() between two unrelated compiles.

reset() clears Dynamo's frame counter, so the second function -- another name, another
line, another graph -- is logged under compile id [0/0] again. A reader therefore sees a
`dynamo_start` for an id whose `compilation_metrics` it has already had.

Expected records: two dynamo_start and two compilation_metrics with frame_id 0 and
frame_compile_id 0, whose co_name are `first_fn` and `second_fn`.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def first_fn(x: torch.Tensor) -> torch.Tensor:
    """A pointwise chain: one fused kernel."""
    return (x * 2 + 1).sin()


def second_fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A matmul and a reduction: a different graph from first_fn's."""
    return torch.relu(x @ w).sum(dim=0)


def main() -> None:
    """Compile first_fn, reset Dynamo, compile second_fn."""
    x = torch.randn(4, 4, device=DEVICE)
    torch.testing.assert_close(torch.compile(first_fn, backend="inductor")(x), first_fn(x))
    torch._dynamo.reset()
    w = torch.randn(4, 3, device=DEVICE)
    torch.testing.assert_close(torch.compile(second_fn, backend="inductor")(x, w), second_fn(x, w))
    print("reset_reuse ok")


if __name__ == "__main__":
    main()
