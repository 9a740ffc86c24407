"""Scenario `skipped_frame`: a frame Dynamo gives up on and runs eagerly, as designed.

`Model.forward` calls a submodule whose forward is wrapped in `torch.compiler.disable`, and has a
`torch._dynamo.graph_break()` inside a loop. Dynamo cannot resume inside a loop, so it skips the
whole frame ("Skipping the frame and falling back to eager"): the program runs correctly, eagerly.

Expected records: a dynamo_graph_break_reason whose headline is torch's wrapper ("Failed to handle
graph break gracefully ...") and a compilation_metrics with fail_type Unsupported and "frame skipped".
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


class Inner(torch.nn.Module):
    @torch.compiler.disable
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inner(self.linear(x))
        for _ in range(2):
            x = x + 1
            torch._dynamo.graph_break()
        return x.relu()


def main() -> None:
    model = Model().to(DEVICE)
    x = torch.randn(2, 4, device=DEVICE)
    torch.testing.assert_close(torch.compile(model, backend="aot_eager")(x), model(x))
    print("skipped frame ok: ran eagerly")


if __name__ == "__main__":
    main()
