"""Scenario `recompile`: guard failures that force Dynamo to compile a frame again.

Part 1 (`scale_shape`): a shape change (4 -> 8) makes automatic dynamic shapes mark the
dimension dynamic (recompile 1, create_symbol, `automatic_dynamic` chromium event), a
third shape reuses the dynamic graph, and a dtype change (float32 -> float64) forces
recompile 2.
Part 2 (`scale_tag`): a Python string constant is baked into the graph, so every new value
is a recompile; strings never become dynamic. With recompile_limit = 3 the fourth distinct
value hits the limit and Dynamo falls back to eager for that frame.

Expected records: frame_compile_id 1 and 2, `recompile_reasons` artifacts, and
compilation_metrics whose fail_reason / recompile_reason mentions the recompile limit.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")

# Small on purpose: `scale_shape` needs exactly 3 cache entries, `scale_tag` needs more.
torch._dynamo.config.recompile_limit = 3


def scale_shape(x: torch.Tensor) -> torch.Tensor:
    """Shape- and dtype-polymorphic pointwise function."""
    return (x * 2 + 1).sin()


def scale_tag(x: torch.Tensor, tag: str) -> torch.Tensor:
    """`tag` is a Python constant: Dynamo guards on its exact value."""
    return x * len(tag) + 1


def run_shape_and_dtype_changes() -> None:
    """Static compile, automatic-dynamic recompile, cache reuse, then a dtype recompile."""
    compiled = torch.compile(scale_shape, backend="inductor")
    for size in (4, 8, 16):
        x = torch.randn(size, device=DEVICE)
        torch.testing.assert_close(compiled(x), scale_shape(x))
    x64 = torch.randn(8, device=DEVICE, dtype=torch.float64)
    torch.testing.assert_close(compiled(x64), scale_shape(x64))


def run_constant_changes_until_limit() -> None:
    """Distinct string constants recompile until the recompile limit is hit."""
    compiled = torch.compile(scale_tag, backend="inductor")
    x = torch.randn(4, device=DEVICE)
    for tag in ("a", "bb", "ccc", "dddd", "eeeee"):
        torch.testing.assert_close(compiled(x, tag), scale_tag(x, tag))


def main() -> None:
    """Run both parts in one process so the log holds several frames."""
    run_shape_and_dtype_changes()
    run_constant_changes_until_limit()
    print("recompile ok")


if __name__ == "__main__":
    main()
