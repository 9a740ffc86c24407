"""Scenario `recompile_restart`: a recompile that Dynamo then restarts at a graph break.

`step` is compiled with dynamic=False. Called with 8 elements it compiles as [0/0] (no break: the
`.item()` branch is not taken). Called with 12 it fails [0/0]'s guard on the size of `x` (recompile
reason "tensor 'x' size mismatch at index 0. expected 8, actual 12") and recompiles as [0/1], which
takes the branch: `.item()` is a graph break (capture_scalar_outputs is off), so Dynamo restarts the
analysis as [0/1_1] (restart_reasons) and compiles the code after the break as frame 1
(`torch_dynamo_resume_in_step_at_...`, [1/0]). One recompile, one restart, one graph break.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def step(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    if x.shape[0] > 10:
        v = y.sum().item()
        return y + v
    return y + 1


def main() -> None:
    compiled = torch.compile(step, backend="eager", dynamic=False)
    for n in (8, 12):
        x = torch.randn(n, device=DEVICE)
        torch.testing.assert_close(compiled(x), step(x))
    print("recompile_restart ok")


if __name__ == "__main__":
    main()
