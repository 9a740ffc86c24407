"""Scenario `unbacked`: data-dependent values captured by torch.compile.

With capture_scalar_outputs, `.item()` stays in the graph as an unbacked SymInt (u0);
with capture_dynamic_output_shape_ops, `nonzero()` gets an unbacked output size.
torch._check tells the compiler what it needs to know about them.

Expected records: create_unbacked_symbol (for .item() and nonzero), guard_added_fast /
deferred runtime asserts, and an Inductor graph with unbacked sizes.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")

torch._dynamo.config.capture_scalar_outputs = True
torch._dynamo.config.capture_dynamic_output_shape_ops = True


def take_first_k(x: torch.Tensor, k_tensor: torch.Tensor) -> torch.Tensor:
    """Slice by a data-dependent length read with .item()."""
    k = k_tensor.item()
    torch._check(k >= 1)
    torch._check(k <= x.shape[0])
    return x[:k] * 2


def positive_values(x: torch.Tensor) -> torch.Tensor:
    """nonzero() has an output size that depends on the data."""
    idx = torch.nonzero(x > 0).squeeze(1)
    return x[idx] + 1


def main() -> None:
    """Compile both functions and check them against eager."""
    x = torch.randn(8, device=DEVICE)
    k = torch.tensor(3, device=DEVICE)
    compiled_take = torch.compile(take_first_k, backend="inductor", fullgraph=True)
    torch.testing.assert_close(compiled_take(x, k), take_first_k(x, k))
    compiled_pos = torch.compile(positive_values, backend="inductor", fullgraph=True)
    torch.testing.assert_close(compiled_pos(x), positive_values(x))
    print("unbacked ok")


if __name__ == "__main__":
    main()
