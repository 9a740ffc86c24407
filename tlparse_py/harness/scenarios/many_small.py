"""Scenario `many_small`: a program that compiles many small functions, one compile each.

Long jobs make logs of this shape: a model's many small helpers (layer norms, activations,
projections, each its own Python function) compiled one by one, most of them once. Each function
here is its own code object (written out at import time, as a code generator or a large model
file would hold them), so every one is a new frame: a `dynamo_start`, a small Dynamo graph,
its guards and its `compilation_metrics`. A few are called again with another shape, so some
frames recompile, as in real jobs. `eager` keeps the compiles small, the shape the speed
benchmarks scale up (`benchmarks/make_logs.py --small-compiles`).
"""

import torch

HELPERS = 24  # distinct functions; the benchmark copies the trace to reach thousands of frames

# One small helper per "layer": distinct source, so distinct code objects, so distinct frames.
SOURCE = "\n".join(
    f"def helper_{i}(x):\n    return (x * {i + 1} + {i}).relu() - x.mean() * {i % 3}\n" for i in range(HELPERS)
)
NAMESPACE: dict = {}
exec(compile(SOURCE, "many_small_helpers.py", "exec"), NAMESPACE)


def main() -> None:
    x = torch.randn(8)
    for i in range(HELPERS):
        helper = NAMESPACE[f"helper_{i}"]
        compiled = torch.compile(helper, backend="eager")
        torch.testing.assert_close(compiled(x), helper(x))
        if i % 8 == 0:  # a few frames meet a second shape: a recompile
            y = torch.randn(3, 5)
            torch.testing.assert_close(compiled(y), helper(y))
    print("many_small ok")


if __name__ == "__main__":
    main()
