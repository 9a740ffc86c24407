"""Scenario `retry_fullgraph`: a compile with fullgraph=True fails, then the same function compiles without it.

`f` has a graph break. With fullgraph=True Dynamo raises Unsupported ([0/0], a failed compile);
the program catches it and compiles `f` again without fullgraph: Dynamo numbers that compile [0/1]
although no guard failed (it logs no recompile reason): a retry, not a recompile.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def f(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos()


def main() -> None:
    x = torch.randn(4, device=DEVICE)
    try:
        torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    except torch._dynamo.exc.Unsupported as exc:
        print("fullgraph compile failed, as expected:", type(exc).__name__)
    torch.testing.assert_close(torch.compile(f, backend="aot_eager")(x), f(x))
    print("retry ok")


if __name__ == "__main__":
    main()
