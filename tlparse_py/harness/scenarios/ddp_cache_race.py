"""Scenario `ddp_cache_race`: 2-rank DDP (gloo, DDPOptimizer) whose ranks share one compile cache.

As `distributed`, but rank 1 starts its first step only once rank 0's first forward (and with it
the compile of its graphs) is done, as a slower host would: rank 0 compiles first and fills the
shared Inductor cache (misses), rank 1 then finds its graphs there (hits). The graphs, shapes and collectives are the same on both ranks: the ranks
differ in cache results and compile time only.
"""

import os
import socket
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD_SIZE = 2
BUCKET_CAP_MB = 1  # see distributed.py: one 512x512 layer per bucket
WIDTH = 512
LAYERS = 3
WAIT_LIMIT_S = 300.0  # rank 1 gives up waiting for rank 0's signal (the race is then lost, not hung)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def wait_for(signal: str) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not os.path.exists(signal) and time.monotonic() < deadline:
        time.sleep(0.2)


def run_rank(rank: int, signal: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    try:
        torch._dynamo.config.optimize_ddp = True
        torch.manual_seed(0)
        model = DDP(Stack(), bucket_cap_mb=BUCKET_CAP_MB)
        compiled = torch.compile(model, backend="inductor")
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        if rank == 1:
            wait_for(signal)  # rank 0 compiles (and fills the cache) meanwhile
        x = torch.ones(4, WIDTH)
        for step in range(2):
            opt.zero_grad()
            out = compiled(x)  # forward and backward graphs are compiled here
            if rank == 0 and step == 0:
                open(signal, "w").close()
            out.sum().backward()
            opt.step()
        dist.barrier()
        print(f"rank {rank} ok")
    finally:
        dist.destroy_process_group()


def main() -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    signal = os.path.join(tempfile.mkdtemp(), "rank0_compiled")
    mp.spawn(run_rank, args=(signal,), nprocs=WORLD_SIZE, join=True)
    print("ddp cache race ok")


if __name__ == "__main__":
    main()
