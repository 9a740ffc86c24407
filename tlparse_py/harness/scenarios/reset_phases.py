"""Scenario `reset_phases`: two functions compiled, torch._dynamo.reset(), the two compiled again
in the other order, then a recompile after the reset.

reset() makes torch number compile ids from [0/0] again, for the whole process: every compile
after it is in generation 1, whether its id was used before the reset or not. Each function
breaks its graph once (torch._dynamo.graph_break()), so each call compiles the function and
then its resume function (torch_dynamo_resume_in_<fn>_at_<line>), a frame of its own. The
backend is "eager": Dynamo's records are the point, and the fixture stays small.

Expected records, in log order (dynamo_start then compilation_metrics of each; co_name):

    generation 0   [0/0] first_fn       [1/0] resume in first_fn
                   [2/0] second_fn      [3/0] resume in second_fn
    reset()
    generation 1   [0/0] second_fn      [1/0] resume in second_fn
                   [2/0] first_fn       [3/0] resume in first_fn
                   [2/1] first_fn       [3/1] resume in first_fn   (a 2-D input: recompiles)

[2/1] is a recompile of first_fn (its generation-1 [2/0]), not of generation 0's [2/0] (second_fn).
[0/0] and [2/0] of generation 0, and [0/0], [2/0] and [2/1] of generation 1, log a graph break and
restart at it: their compilation_metrics is logged under attempt 1 ([0/0_1]), not a reuse of the id.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def first_fn(x: torch.Tensor) -> torch.Tensor:
    """A graph break between two pointwise ops."""
    y = x.sin() + 1
    torch._dynamo.graph_break()
    return y * 2


def second_fn(x: torch.Tensor) -> torch.Tensor:
    """Another function, with a graph break of its own."""
    y = x.cos() - 1
    torch._dynamo.graph_break()
    return y / 2


def compile_both(order: tuple) -> dict:
    """Compile each function of `order` (in that order) by calling it once on a 1-D input."""
    compiled = {fn.__name__: torch.compile(fn, backend="eager") for fn in order}
    x = torch.randn(4, device=DEVICE)
    for fn in order:
        torch.testing.assert_close(compiled[fn.__name__](x), fn(x))
    return compiled


def main() -> None:
    """first_fn then second_fn; reset(); second_fn then first_fn, then first_fn on a 2-D input."""
    compile_both((first_fn, second_fn))
    torch._dynamo.reset()
    compiled = compile_both((second_fn, first_fn))
    x = torch.randn(4, 4, device=DEVICE)
    torch.testing.assert_close(compiled["first_fn"](x), first_fn(x))
    print("reset_phases ok")


if __name__ == "__main__":
    main()
