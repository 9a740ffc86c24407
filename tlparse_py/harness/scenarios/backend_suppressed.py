"""Scenario `backend_suppressed`: a backend that raises, under torch._dynamo.config.suppress_errors = True.

`h` is compiled with a backend that raises RuntimeError. torch wraps it in BackendCompilerFailed and
logs it in [0/0]'s compilation_metrics (fail_type BackendCompilerFailed, fail_reason
"backend='broken_backend' raised:" and on the next line "RuntimeError: ...", no fail_user_frame,
config_suppress_errors true), but does not raise it: the frame runs eagerly and the call returns
eager's result. Still one failed compile (the compile failed; torch hid it from the program).
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")

torch._dynamo.config.suppress_errors = True


def broken_backend(gm: torch.fx.GraphModule, example_inputs: list) -> None:
    """A backend that always fails, as a broken third-party compiler would."""
    raise RuntimeError("harness: this backend is broken")


def h(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def main() -> None:
    x = torch.randn(3, device=DEVICE)
    torch.testing.assert_close(torch.compile(h, backend=broken_backend)(x), h(x))
    print("backend_suppressed ok")


if __name__ == "__main__":
    main()
