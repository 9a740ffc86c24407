"""Scenario `distributed`: 2-rank DDP on CPU (gloo) with the DDPOptimizer.

The program spawns two ranks with torch.multiprocessing. Each rank joins a gloo process
group *before* its first compile (so its trace file is named
dedicated_log_torch_trace_rank_<N>_*.log and every record carries "rank"), wraps a small
multi-layer model in DDP with a tiny bucket_cap_mb, and compiles it with
torch._dynamo.config.optimize_ddp = True. The DDPOptimizer then splits the Dynamo graph at
bucket boundaries, one submodule per bucket.

Expected records: one log per rank, `"rank": 0` / `"rank": 1`, optimize_ddp_split_graph and
optimize_ddp_split_child records.
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD_SIZE = 2
# The DDPOptimizer insists that the first bucket (fixed at 1 MB by DDP) is no bigger than
# the others, so the cap cannot go below 1 MB. A 512x512 Linear holds just over 1 MB of
# float32 parameters, so a 1 MB cap puts each layer in a bucket of its own and the
# DDPOptimizer has something to split.
BUCKET_CAP_MB = 1
WIDTH = 512
LAYERS = 3


def free_port() -> int:
    """Ask the OS for a free localhost port (there is a small race; fine for a harness)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Stack(torch.nn.Module):
    """A stack of Linear+ReLU layers.

    A user-defined module on purpose: Dynamo does not start a frame inside torch.nn's own
    files (nn.Sequential.forward), so DDP around a bare Sequential compiles nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def make_model() -> torch.nn.Module:
    """The same weights on every rank (same seed)."""
    torch.manual_seed(0)
    return Stack()


def run_rank(rank: int) -> None:
    """Body of one rank: init the group, compile DDP, train two steps, tear down."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    try:
        torch._dynamo.config.optimize_ddp = True
        model = DDP(make_model(), bucket_cap_mb=BUCKET_CAP_MB)
        compiled = torch.compile(model, backend="inductor")
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        torch.manual_seed(rank)
        x = torch.randn(4, WIDTH)
        for _ in range(2):
            opt.zero_grad()
            compiled(x).sum().backward()
            opt.step()
        dist.barrier()
        print(f"rank {rank} ok")
    finally:
        dist.destroy_process_group()


def main() -> None:
    """Spawn the ranks; mp.spawn raises if any rank fails, which fails the scenario."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(run_rank, nprocs=WORLD_SIZE, join=True)
    print("distributed ok")


if __name__ == "__main__":
    main()
