"""Scenario `recompile_limit`: one frame recompiled until torch._dynamo.config.recompile_limit.

recompile_limit is set to 2. `scale` is called with float32, float64, float16 and bfloat16
inputs of the same shape: each dtype fails the tensor guard of every cached entry, so the
frame is compiled as [0/0], then [0/1]; the third dtype hits the limit, Dynamo logs a
compilation_metrics whose fail_reason names the limit and runs that call (and the fourth)
in eager.

Expected records: frame_compile_id 1, a `recompile_reasons` artifact, and a
compilation_metrics with fail_reason "Dynamo recompile limit exceeded".
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")

torch._dynamo.config.recompile_limit = 2


def scale(x: torch.Tensor) -> torch.Tensor:
    """A pointwise function; Dynamo guards on the input's dtype."""
    return (x * 3).cos() + 1


def main() -> None:
    """Four dtypes through one compiled function: two compiles, then the limit."""
    compiled = torch.compile(scale, backend="inductor")
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        x = torch.randn(8, device=DEVICE).to(dtype)
        torch.testing.assert_close(compiled(x), scale(x))
    print("recompile_limit ok")


if __name__ == "__main__":
    main()
