"""Scenario `transformer`: a 4-layer transformer encoder trained for two steps at two lengths.

A realistic mid-size trace: attention + MLP blocks give large joint/forward/backward graphs and
output code, the second sequence length makes Dynamo recompile with a dynamic dimension, and the
backward compiles lazily (bwd_compilation_metrics).
"""

import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


class Block(torch.nn.Module):
    """Pre-norm attention + MLP, the shape of most transformer layers."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(dim)
        self.attn = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(), torch.nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(16, 2) for _ in range(4)]).to(DEVICE)
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for length in (4, 8):
        x = torch.randn(2, length, 16, device=DEVICE)
        opt.zero_grad()
        loss = compiled(x).pow(2).mean()
        loss.backward()
        opt.step()
    print("transformer ok, loss", float(loss))


if __name__ == "__main__":
    main()
