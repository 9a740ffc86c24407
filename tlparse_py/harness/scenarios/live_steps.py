"""Scenario `live_steps`: a long run as `tlparse-py watch` sees it: a compile, a pause, more compiles.

Step 1 compiles `train_step` once. The program then waits for the file named by
TLPARSE_HARNESS_GATE, when that variable is set (at most 120 s): a test holds it there while it
reads the live report. Then a new input shape recompiles `train_step` (automatic dynamic) and a
graph break splits `log_metrics` in two.

Expected records: [0/0] and [0/1] (recompile reasons), a graph break under [1/0].
"""

import os
import time
from pathlib import Path

import torch


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
    step = torch.compile(train_step, backend="eager")
    step(torch.ones(4))
    wait_for_gate()
    step(torch.ones(8))
    torch.compile(log_metrics, backend="eager")(torch.ones(3))


if __name__ == "__main__":
    main()
