"""Scenario `live_steps`: a long run as `tlparse-py watch` sees it: a compile, a compile that hangs, more.

Step 1 compiles `train_step`. A new input shape then recompiles it ([0/1]), and the backend holds
that compile open until the file named by TLPARSE_HARNESS_GATE exists, when that variable is set
(at most 120 s): a test reads the live report meanwhile, which must say what is compiling. Then
a graph break splits `log_metrics` in two.

Expected records: [0/0] and [0/1] (recompile reasons), a graph break under [1/0].
"""

import os
import time
from pathlib import Path

import torch

compiles: list[torch.fx.GraphModule] = []


def gated_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    """Dynamo's eager backend, except that its second compile waits for the gate."""
    compiles.append(gm)
    if len(compiles) == 2:
        wait_for_gate()
    return gm.forward


def train_step(x: torch.Tensor) -> torch.Tensor:
    return (x * 2 + 1).relu().sum()


def log_metrics(x: torch.Tensor) -> torch.Tensor:
    y = x.cos()
    torch._dynamo.graph_break()
    return y + 1


def wait_for_gate() -> None:
    gate = os.environ.get("TLPARSE_HARNESS_GATE")
    if not gate:
        return
    deadline = time.monotonic() + 120
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    step = torch.compile(train_step, backend=gated_backend)
    step(torch.ones(4))
    step(torch.ones(8))  # a recompile, held open by the backend until the gate opens
    torch.compile(log_metrics, backend="eager")(torch.ones(3))


if __name__ == "__main__":
    main()
