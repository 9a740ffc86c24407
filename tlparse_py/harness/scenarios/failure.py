"""Scenario `failure`: compile failures, both raised and suppressed.

Part 1: a custom backend that raises. torch.compile wraps the error in
BackendCompilerFailed, records it in compilation_metrics (fail_type / fail_reason) and a
`dynamo_error` artifact, then re-raises; the program catches it.
Part 2: fullgraph=True on a function with a graph break: Dynamo itself fails with
Unsupported before any backend runs (a second fail_type); the program catches it.
Part 3: the failing backend with torch._dynamo.config.suppress_errors = True: Dynamo
logs the failure and falls back to eager, so the call succeeds.

The process itself must exit 0.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


class HarnessBackendError(RuntimeError):
    """Raised on purpose by `exploding_backend`."""


def exploding_backend(gm: torch.fx.GraphModule, example_inputs: list) -> None:
    """A backend that always fails, as a broken third-party compiler would."""
    raise HarnessBackendError(
        f"harness: backend refuses graph with {len(gm.graph.nodes)} nodes"
    )


def raised_failure(x: torch.Tensor) -> torch.Tensor:
    """Compiled with errors propagating to the caller."""
    return torch.relu(x) + 1


def fullgraph_failure(x: torch.Tensor) -> torch.Tensor:
    """A graph break, which fullgraph=True turns into a hard error."""
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


def suppressed_failure(x: torch.Tensor) -> torch.Tensor:
    """Compiled with suppress_errors: the failure is logged and eager runs instead."""
    return torch.sigmoid(x) * 3


def run_raised_failure(x: torch.Tensor) -> None:
    """The backend error surfaces as BackendCompilerFailed; catch it so we exit 0."""
    compiled = torch.compile(raised_failure, backend=exploding_backend)
    try:
        compiled(x)
    except torch._dynamo.exc.BackendCompilerFailed as exc:
        print("caught expected BackendCompilerFailed:", type(exc.inner_exception).__name__)
    else:
        raise SystemExit("expected BackendCompilerFailed was not raised")


def run_fullgraph_failure(x: torch.Tensor) -> None:
    """Dynamo raises Unsupported for the graph break; catch it so we exit 0."""
    compiled = torch.compile(fullgraph_failure, backend="eager", fullgraph=True)
    try:
        compiled(x)
    except torch._dynamo.exc.Unsupported as exc:
        print("caught expected Unsupported:", str(exc).splitlines()[0])
    else:
        raise SystemExit("expected Unsupported was not raised")


def run_suppressed_failure(x: torch.Tensor) -> None:
    """With suppress_errors the call falls back to eager and returns a correct result."""
    torch._dynamo.config.suppress_errors = True
    compiled = torch.compile(suppressed_failure, backend=exploding_backend)
    torch.testing.assert_close(compiled(x), suppressed_failure(x))
    print("suppressed failure fell back to eager")


def main() -> None:
    """Run the raised failures first: suppress_errors is global once set."""
    x = torch.randn(4, device=DEVICE)
    run_raised_failure(x)
    run_fullgraph_failure(x)
    run_suppressed_failure(x)
    print("failure ok")


if __name__ == "__main__":
    main()
