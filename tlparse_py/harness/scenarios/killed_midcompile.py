"""Scenario `killed_midcompile`: the process is SIGKILLed during Inductor code generation.

The first function compiles normally ([0/0] is complete). The second is traced by Dynamo
and lowered by Inductor, but GraphLowering.codegen is patched to send SIGKILL to the
process itself on its first call, so the log ends mid-compile: [1/0] has a dynamo_start
(and the graphs logged before codegen) but no compilation_metrics. Nothing can be flushed
or closed after a SIGKILL; the trace handler flushes every record, so the log holds all
that was written before.

The registry marks this scenario expect_killed: the runner takes death by SIGKILL as
success and a clean exit as failure.

Expected records: two dynamo_start, one compilation_metrics.
"""

import os
import signal

import torch
import torch._inductor.graph

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def finished(x: torch.Tensor) -> torch.Tensor:
    return (x + 1).relu()


def interrupted(x: torch.Tensor) -> torch.Tensor:
    return (x * x).tanh().sum()


def kill_self(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    x = torch.randn(8, device=DEVICE)
    torch.compile(finished, backend="inductor")(x)
    torch._inductor.graph.GraphLowering.codegen = kill_self  # type: ignore[method-assign, unused-ignore]  # the kill point, on purpose; unused without torch installed
    torch.compile(interrupted, backend="inductor")(x)
    raise SystemExit("still alive after the compile that should have killed the process")


if __name__ == "__main__":
    main()
