"""The program of the `gb_base` / `gb_extra` pair, which differ by exactly one graph break.

Not a scenario itself: gb_base.py and gb_extra.py both run this file (runpy), with
EXTRA_BREAK False and True, so their logs share file name, line numbers and the whole user
stack. `step` calls `prepare` and `head`; `prepare` has one graph break
(torch._dynamo.graph_break()), so Dynamo compiles `step`, `prepare` and resume functions.
With EXTRA_BREAK, `head` breaks once more; without it Dynamo folds the `if` away.

The backend is aot_eager: the pair is about frames and graph breaks, and Inductor's records
would make each log several times bigger without adding any.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")
EXTRA_BREAK = globals()["EXTRA_BREAK"]


def prepare(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    torch._dynamo.graph_break()
    return y + 1


def head(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    if EXTRA_BREAK:
        torch._dynamo.graph_break()
    return y.cos() * 3


def step(x: torch.Tensor) -> torch.Tensor:
    return head(prepare(x)).sum()


def main() -> None:
    x = torch.randn(4, device=DEVICE)
    torch.testing.assert_close(torch.compile(step, backend="aot_eager")(x), step(x))
    print("gb ok, extra break:", EXTRA_BREAK)


if __name__ == "__main__":
    main()
