"""Scenario `custom_backend`: a backend of the program's own, a mark_dynamic input, a name Dynamo
made up in a guard, and the recompile limit reached on a Python int. Every function compiles with
`my_backend`, which returns the graph's forward unchanged.

- `shift`: neither AOTAutograd nor Inductor runs (no `create_aot_dispatcher_function` nor
  `inductor_compile` span, `inductor_compile_time_s` null): the compile's time is Dynamo's and the
  backend's.
- `total`: an input whose dimension 0 is marked dynamic (`torch._dynamo.mark_dynamic`):
  `describe_tensor` logs its sizes `[4, 3]` with `dynamo_dynamic_indices: [0]`, and `create_symbol`
  the symbol of `L['x'].size()[0]`.
- `scaled_by_sum`: `.item()` breaks the graph; the resume function gets the value as `___stack0`
  and guards on it, so a call with another value recompiles it (recompile reason `___stack0 == ...`).
- `scaled`, with `dynamic=False`, is called with the ints 0, 1 and 2: a guard `k == N` each time,
  until recompile_limit (2) is reached.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")

torch._dynamo.config.recompile_limit = 2


def my_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
    """A backend of the program's own: the graph runs as Dynamo captured it."""
    return gm.forward


def shift(x: torch.Tensor) -> torch.Tensor:
    return x.relu() + 1


def total(x: torch.Tensor) -> torch.Tensor:
    return x.sum(0) * 2


def scaled_by_sum(x: torch.Tensor) -> torch.Tensor:
    v = x.sum().item()
    return x * v


def scaled(x: torch.Tensor, k: int) -> torch.Tensor:
    return x * k


def main() -> None:
    x = torch.randn(4, 3, device=DEVICE)
    torch.testing.assert_close(torch.compile(shift, backend=my_backend)(x), shift(x))

    marked = torch.randn(4, 3, device=DEVICE)
    torch._dynamo.mark_dynamic(marked, 0)
    torch.testing.assert_close(torch.compile(total, backend=my_backend)(marked), total(marked))

    compiled_sum = torch.compile(scaled_by_sum, backend=my_backend)
    for value in (1.0, 2.0):
        y = torch.full((3,), value, device=DEVICE)
        torch.testing.assert_close(compiled_sum(y), scaled_by_sum(y))

    compiled_scaled = torch.compile(scaled, backend=my_backend, dynamic=False)
    for k in range(3):
        torch.testing.assert_close(compiled_scaled(x, k), scaled(x, k))
    print("custom backend ok")


if __name__ == "__main__":
    main()
