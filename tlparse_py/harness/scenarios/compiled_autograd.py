"""Scenario `compiled_autograd`: the backward pass captured by compiled autograd.

torch._dynamo.config.compiled_autograd = True makes torch.compile trace the autograd graph
at .backward() time and compile it like a forward graph. A new batch size on the third
step misses the compiled-autograd cache, so a second compiled-autograd graph (id 1) is made.

Expected records: records carrying `compiled_autograd_id` (0 and 1),
`compiled_autograd_graph`, `compiled_autograd_compile_reasons`, and `dump_file` for the
generated eval_with_key code.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")

torch._dynamo.config.compiled_autograd = True
# torch 2.13 writes the compiled_autograd_compile_reasons artifact only while the
# verbose compiled-autograd logger is on (it also prints the graphs to stderr).
torch._logging.set_logs(compiled_autograd_verbose=True)


class TinyNet(torch.nn.Module):
    """Linear -> gelu -> Linear: a backward with a handful of nodes."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


@torch.compile(backend="inductor")
def train_step(model: TinyNet, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Forward, loss and backward in one compiled region."""
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss.detach()


def main() -> None:
    """Compile, reuse, then change the batch size to force a compiled-autograd cache miss."""
    torch.manual_seed(0)
    model = TinyNet().to(DEVICE)
    for batch in (4, 4, 6):
        x = torch.randn(batch, 8, device=DEVICE)
        y = torch.randn(batch, 1, device=DEVICE)
        model.zero_grad(set_to_none=True)
        loss = train_step(model, x, y)
    print("compiled_autograd ok, loss", float(loss))


if __name__ == "__main__":
    main()
