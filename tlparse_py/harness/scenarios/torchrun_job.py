"""Scenarios `torchrun_*`: 2-rank jobs launched by torchrun (gloo, CPU), as people train.

Run as a scenario, this program launches itself under `python -m torch.distributed.run
--nproc-per-node 2`; each rank then runs `rank_body(MODE)`. MODE picks the job:

* `ddp`: DDP around a small model, compiled with `torch.compile(ddp)`. Only rank 1 takes a
  debug branch that prints inside `forward` (a graph break only it has), and only rank 1's
  last batch has another size (a recompile only it has).
* `fsdp2`: FSDP2 (`fully_shard`) around the same model; rank 1's last batch differs (a
  recompile only it has).
* `rank_fails`: the model without DDP (its gradients all-reduced by hand), compiled with
  `fullgraph=True`; rank 1's debug print makes its compile raise, the rank exits with the
  error, and torchrun stops rank 0 (still compiling, or waiting at the all_reduce).
* `rank_killed`: rank 1 starts once rank 0 ran its first forward, and is SIGKILLed during Inductor code generation (as by
  the OOM killer): its log ends mid-compile; torchrun stops rank 0, which had compiled its
  forward and was waiting for rank 1 at DDP's gradient all-reduce.

The ranks join the process group before their first compile, so their logs are named
dedicated_log_torch_trace_rank_<N>_*.log and every record carries "rank". In the last two
modes torchrun exits non-zero by design: that is this scenario's success.
"""

import os
import signal
import socket
import subprocess
import sys

EXPECTED_TO_FAIL = {"rank_fails", "rank_killed"}
WORLD_SIZE = 2
STEPS = 4
FORWARD_DONE = "rank 0 ran its first forward"  # a key in the process group's store (`rank_killed`)


def free_port() -> int:
    """A free localhost port (a small race; fine for a harness)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(mode: str, script: str) -> None:
    """Run this file under torchrun with 2 ranks; fail unless the job ended as MODE expects."""
    cmd = [
        sys.executable, "-m", "torch.distributed.run",
        f"--nproc-per-node={WORLD_SIZE}", "--master-addr=127.0.0.1", f"--master-port={free_port()}",
        # each rank runs `python -P`, as the harness runs scenarios: without -P this folder would be
        # first on sys.path, and scenario files named like packages (triton.py) would shadow them
        "--no-python", sys.executable, "-P", script, mode,
    ]
    code = subprocess.call(cmd)
    if mode in EXPECTED_TO_FAIL and code == 0:
        raise SystemExit(f"torchrun exited 0, but mode {mode} should end with a failed rank")
    if mode not in EXPECTED_TO_FAIL and code != 0:
        raise SystemExit(f"torchrun exited {code}")
    print(f"torchrun {mode} ended as expected (exit {code})")


def rank_body(mode: str) -> None:
    import torch
    import torch.distributed as dist

    class Net(torch.nn.Module):
        def __init__(self, debug: bool) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(16, 32)
            self.fc2 = torch.nn.Linear(32, 4)
            self.debug = debug

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.fc1(x))
            if self.debug:
                print("mean activation", h.mean())
            return self.fc2(h)

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Net(debug=rank == 1 and mode in ("ddp", "rank_fails"))
    if mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        fully_shard(model.fc1)
        fully_shard(model.fc2)
        fully_shard(model)
        wrapped: torch.nn.Module = model
    elif mode == "rank_fails":
        # no DDP: its hooks break every graph, which fullgraph=True would refuse on both ranks;
        # the gradients are averaged by hand after backward (the ranks meet at the all_reduce)
        wrapped = model
    else:
        from torch.nn.parallel import DistributedDataParallel as DDP

        wrapped = DDP(model)
    if mode == "rank_killed" and rank == 1:
        import torch._inductor.graph

        # rank 1 starts only once rank 0 has compiled and run its forward (as behind a slow data
        # loader), so rank 0 waits at DDP's gradient all-reduce when rank 1 dies mid-compile
        dist.distributed_c10d._get_default_store().wait([FORWARD_DONE])

        def killed(*args: object, **kwargs: object) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        # no cache: rank 0's compile of the same graph would be a hit, and a hit generates no code
        torch._inductor.config.force_disable_caches = True
        torch._inductor.graph.GraphLowering.codegen = killed  # type: ignore[method-assign, assignment, unused-ignore]  # the kill point, on purpose
    compiled = torch.compile(wrapped, fullgraph=mode == "rank_fails")
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    for step in range(STEPS):
        last = step == STEPS - 1
        batch = 5 if last and rank == 1 and mode in ("ddp", "fsdp2") else 8
        loss = compiled(torch.randn(batch, 16)).sum()
        if mode == "rank_killed" and rank == 0 and step == 0:
            dist.distributed_c10d._get_default_store().set(FORWARD_DONE, "1")
        loss.backward()
        if mode == "rank_fails":
            for p in model.parameters():
                dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad()
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} ok")


if __name__ == "__main__":
    if "LOCAL_RANK" in os.environ:  # a rank, started by torchrun
        rank_body(sys.argv[1])
    else:
        launch(globals().get("MODE") or sys.argv[1], os.path.abspath(__file__))
