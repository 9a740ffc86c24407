"""Scenario `tensorify_restart`: Dynamo restarts a compile to turn a Python float into a tensor.

`g(x, s)` uses a float argument in `int(s * 2)`. The second call (another float) recompiles with
the float unspecialised; Dynamo then restarts that compile (TensorifyScalarRestartAnalysis) and
specialises it: a restart, not a graph break.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def g(x: torch.Tensor, s: float) -> torch.Tensor:
    return x + int(s * 2)


def main() -> None:
    compiled = torch.compile(g, backend="aot_eager")
    x = torch.randn(2, device=DEVICE)
    for s in (2.5, 3.5):
        torch.testing.assert_close(compiled(x, s), g(x, s))
    print("tensorify restart ok")


if __name__ == "__main__":
    main()
