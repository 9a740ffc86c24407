"""Scenario `train_warm`: a training step, cold then warm, in two processes.

The harness runs this program twice, sharing one TORCHINDUCTOR_CACHE_DIR (like `cache`).
Each process compiles a small model and runs two optimizer steps. In the first (cold)
process the forward is compiled at the first call and the backward lazily at the first
.backward(), which logs a `bwd_compilation_metrics` record; both miss the FX graph and
AOTAutograd caches and fill them. In the second (warm) process the AOTAutograd cache hit
brings the compiled backward along with the forward (both FX graphs hit), so torch 2.13
logs no lazy backward compile there: no bwd_compilation_metrics in the warm log.

Expected records: bwd_compilation_metrics (with inductor_compile_time_s) and
fx_graph_cache_miss / aotautograd_cache_miss in the first log; fx_graph_cache_hit /
aotautograd_cache_hit in the second.
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")

torch._inductor.config.fx_graph_cache = True
torch._functorch.config.enable_autograd_cache = True


class Net(torch.nn.Module):
    """Linear -> gelu -> LayerNorm -> Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.fc2 = torch.nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.norm(torch.nn.functional.gelu(self.fc1(x))))


def main() -> None:
    """Two SGD steps; identical in both processes so the cache keys match."""
    torch.manual_seed(0)
    model = Net().to(DEVICE)
    compiled = torch.compile(model, backend="inductor")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8, device=DEVICE)
    y = torch.randn(4, 2, device=DEVICE)
    for _ in range(2):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
    print("train_warm ok, loss", float(loss))


if __name__ == "__main__":
    main()
