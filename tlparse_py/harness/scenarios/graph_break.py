"""Scenario `graph_break`: graph breaks inside an inlined helper.

The compiled function calls a helper that prints and then calls
torch._dynamo.graph_break(). Dynamo cannot break inside an inlined frame, so it restarts
analysis (attempt 1) and resumes after the break in generated functions named
torch_dynamo_resume_in_<fn>_at_<line>.

Expected records: dynamo_graph_break_reason artifacts, compilation_metrics with
restart_reasons, attempt 1 records, *_ORIGINAL_BYTECODE / *_MODIFIED_BYTECODE artifacts and
several frames (frame_id 0, 1, ...).
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def helper(x: torch.Tensor) -> torch.Tensor:
    """Inlined into `fn`; the print and the explicit break both split the graph."""
    x = x.sin() + 1
    print("helper: side effect that Dynamo cannot trace")
    x = x.cos() * 2
    torch._dynamo.graph_break()
    return x.relu()


def fn(x: torch.Tensor) -> torch.Tensor:
    """The compiled entry point; the break happens one frame below it."""
    y = x * 3
    y = helper(y)
    return y - 1


def main() -> None:
    """Compile `fn` and call it twice (the second call reuses every resume function)."""
    compiled = torch.compile(fn, backend="inductor")
    x = torch.randn(8, device=DEVICE)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), fn(x))
    print("graph_break ok")


if __name__ == "__main__":
    main()
