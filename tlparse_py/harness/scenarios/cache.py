"""Scenario `cache`: the FX graph cache and the AOTAutograd cache, cold then warm.

The harness runs this program twice, in two processes that share one
TORCHINDUCTOR_CACHE_DIR, and both logs land in the same directory. The first process
misses both caches and fills them; the second hits them.

Expected records: fx_graph_cache_miss / aotautograd_cache_miss artifacts in the first log;
fx_graph_cache_hit / aotautograd_cache_hit artifacts (and the cache-hit forms of
inductor_post_grad_graph / inductor_output_code) in the second.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")

# Both caches are on by default; set them explicitly so the scenario does not depend on
# the defaults of a future release (or on TORCHINDUCTOR_FX_GRAPH_CACHE=0 in the env).
torch._inductor.config.fx_graph_cache = True
torch._functorch.config.enable_autograd_cache = True


class TinyNet(torch.nn.Module):
    """Linear -> tanh -> Linear, trained one step (forward and backward graphs)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x)))


def main() -> None:
    """One training step; identical in both processes so the cache keys match."""
    torch.manual_seed(0)
    model = TinyNet().to(DEVICE)
    compiled = torch.compile(model, backend="inductor")
    x = torch.randn(4, 8, device=DEVICE)
    y = torch.randn(4, 1, device=DEVICE)
    loss = torch.nn.functional.mse_loss(compiled(x), y)
    loss.backward()
    print("cache run ok, loss", loss.item())


if __name__ == "__main__":
    main()
