"""Scenario `optimizer_step`: a compiled optimizer step meets torch's own graph break.

`step` calls `opt.step()` under torch.compile. torch's optimizers wrap `step` in
`_use_grad_for_differentiable` (torch/optim/optimizer.py), which calls `torch._dynamo.graph_break()`
on purpose, so that AOTAutograd sees the update as an inference graph (pytorch/pytorch#104053).
Dynamo logs that break under the user's `step` and under the optimizer's `wrapper`, with torch's
hint "Remove the `torch._dynamo.graph_break()` call", a call that is not the user's to remove.
The model runs eagerly; only the step is compiled (aot_eager keeps the log small).

Expected records: dynamo_graph_break_reason artifacts naming torch/optim/optimizer.py, and the
compiled update (`SGD.step`'s frame) with compilation_metrics.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def main() -> None:
    """Two training steps of a tiny model, the optimizer step compiled."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch.compile(backend="aot_eager")
    def step() -> None:
        opt.step()

    x = torch.randn(3, 4, device=DEVICE)
    for _ in range(2):
        model(x).pow(2).mean().backward()
        step()
        opt.zero_grad(set_to_none=True)
    print("optimizer_step ok")


if __name__ == "__main__":
    main()
