"""Scenario `hops`: higher-order operators, each compiled with Inductor on CPU.

* torch.cond with two branch functions (subgraphs true_graph_0 / false_graph_0),
* torch._higher_order_ops.while_loop (cond_fn / body_fn subgraphs),
* flex_attention with a score_mod and a block mask (score_mod / mask_mod subgraphs),
* torch.compiler.nested_compile_region called twice (one invoke_subgraph subgraph).

Each is its own function, so each is its own frame: compile ids [0/0] .. [3/0].
All four run on CPU in torch 2.13 (flex_attention through Inductor's C++ template).

Expected records: the HOP subgraphs in dynamo_output_graph / aot graphs.
"""

import os

import torch
from torch._higher_order_ops import while_loop
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def use_cond(x: torch.Tensor) -> torch.Tensor:
    def true_fn(t):
        return t.sin()

    def false_fn(t):
        return t.cos()

    return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


def use_while_loop(x: torch.Tensor) -> torch.Tensor:
    def cond_fn(i, t):
        return i < 3

    def body_fn(i, t):
        return i + 1, t * 2 + 1

    _, out = while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64, device=x.device), x))
    return out


def relative_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def use_flex_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask) -> torch.Tensor:
    return flex_attention(q, k, v, score_mod=relative_bias, block_mask=block_mask)


@torch.compiler.nested_compile_region
def block(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 2


def use_nested_region(x: torch.Tensor) -> torch.Tensor:
    return block(block(x) + 1)


def main() -> None:
    """Compile each function once. No eager reference runs: eager torch.cond, while_loop
    and flex_attention go through Dynamo themselves and would add frames to the log."""
    x = torch.randn(4, 4, device=DEVICE)
    assert torch.compile(use_cond, backend="inductor")(x).shape == (4, 4)
    torch.testing.assert_close(torch.compile(use_while_loop, backend="inductor")(x), x * 8 + 7)
    torch.testing.assert_close(torch.compile(use_nested_region, backend="inductor")(x), use_nested_region(x))
    # 1 batch, 1 head, 128 tokens (one flex block), head dim 16.
    q, k, v = (torch.randn(1, 1, 128, 16, device=DEVICE) for _ in range(3))
    mask = create_block_mask(causal, 1, 1, 128, 128, device=DEVICE)
    assert torch.compile(use_flex_attention, backend="inductor")(q, k, v, mask).shape == (1, 1, 128, 16)
    print("hops ok")


if __name__ == "__main__":
    main()
