"""Scenario `config_patch`: the first compile of a frame runs under a config patch, its recompile without it.

`f` calls `.item()`. Its first call runs inside `torch._dynamo.config.patch(capture_scalar_outputs
=True)`: [0/0] captures the scalar, no graph break. The second call (another size) is outside the
patch: [0/1] recompiles on the size, and with capture_scalar_outputs back to False `.item()` is a
graph break ("Unsupported Tensor.item() call with capture_scalar_outputs=False"), so Dynamo restarts
it ([0/1_1]) and compiles the rest as frame 1 ([1/0]). The third call runs under
`torch.compiler.set_stance("force_eager")`: nothing compiles and nothing is logged. The fourth
(another size) recompiles frame 1 ([1/1]). Each compilation_metrics logs torch's whole config:
only [0/0]'s says capture_scalar_outputs is True.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def f(x: torch.Tensor) -> torch.Tensor:
    n = x.sum().item()
    return x * n


def main() -> None:
    compiled = torch.compile(f, backend="aot_eager")
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        x = torch.randn(4, device=DEVICE)
        torch.testing.assert_close(compiled(x), f(x))
    x = torch.randn(5, device=DEVICE)
    torch.testing.assert_close(compiled(x), f(x))
    with torch.compiler.set_stance("force_eager"):
        x = torch.randn(6, device=DEVICE)
        torch.testing.assert_close(compiled(x), f(x))
    x = torch.randn(7, device=DEVICE)
    torch.testing.assert_close(compiled(x), f(x))
    print("config_patch ok")


if __name__ == "__main__":
    main()
