"""Scenario `backend_raises`: a backend that raises, the error reaching the program; then a frame
recompiled until torch._dynamo.config.recompile_limit = 3.

`h` is compiled with a backend that raises RuntimeError. torch wraps it in BackendCompilerFailed,
logs it in [0/0]'s compilation_metrics (fail_type BackendCompilerFailed, fail_reason
"backend='broken_backend' raised:" and on the next line "RuntimeError: ...", no fail_user_frame,
config_suppress_errors false) and raises it; the program catches it. One failed compile.

`scaled(x, k)` is compiled with dynamic=False and called with k = 0 .. 5: each new int fails the
guard `k == ...` of every cached compile, so the frame compiles as [1/0], recompiles as [1/1] and
[1/2], and the fourth call is over the limit: [1/3] logs a compilation_metrics with fail_reason
"Dynamo recompile limit exceeded" and no dynamo_start, compiles nothing, and the frame runs
eagerly from then on. Two recompiles, one recompile-limit hit (no failure), frame 1 compiled 3 times.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")

torch._dynamo.config.recompile_limit = 3


def broken_backend(gm: torch.fx.GraphModule, example_inputs: list) -> None:
    """A backend that always fails, as a broken third-party compiler would."""
    raise RuntimeError("harness: this backend is broken")


def h(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def scaled(x: torch.Tensor, k: int) -> torch.Tensor:
    return x * k


def main() -> None:
    x = torch.randn(3, device=DEVICE)
    try:
        torch.compile(h, backend=broken_backend)(x)
    except torch._dynamo.exc.BackendCompilerFailed as exc:
        print("caught expected BackendCompilerFailed:", type(exc.inner_exception).__name__)
    else:
        raise SystemExit("expected BackendCompilerFailed was not raised")
    compiled = torch.compile(scaled, backend="eager", dynamic=False)
    for k in range(6):
        torch.testing.assert_close(compiled(x, k), scaled(x, k))
    print("backend_raises ok")


if __name__ == "__main__":
    main()
