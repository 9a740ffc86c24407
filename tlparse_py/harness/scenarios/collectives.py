"""Scenario `collectives`: 2 CPU ranks compiling with Dynamo's compiler collectives.

torch._dynamo.config.enable_compiler_collectives = True makes the ranks exchange what each
would make dynamic (an all_gather_object on a dedicated process group) before compiling, so
inputs of different sizes on different ranks (f32[4] on rank 0, f32[5] on rank 1) give one
dynamic graph on both. Each rank joins the process group before its first compile, so its
log is dedicated_log_torch_trace_rank_<N>_*.log and every record carries "rank".

On CPU, torch 2.13's compiler collective does not work with a plain "gloo" process group:
OutputGraph.run_compiler_collective insists on exactly one device type in the group, a
plain "gloo" group has two (cpu and cuda), and formatting that assertion's message joins
torch.device objects as strings, so the compile fails with "TypeError: sequence item 0:
expected str instance, torch.device found". With the backend string "cpu:gloo" there is one
device type, but the collective then enters
`get_interface_for_device("cpu").device(rank % torch.accelerator.device_count())`, and on
CPU the count is 0 and CpuInterface has no device context; `patch_for_cpu` makes
torch.accelerator.device_count return 1 and CpuInterface.device a null context.

This file also serves three variants, each a scenario of its own whose program runs this
file (runpy) with another MODE, so their logs share file name and line numbers:

* `collectives` (MODE "sync"): both ranks compile `sync_fn` ([0/0]) and call it twice.
* `collectives_desync` (MODE "desync"): as "sync", then under the same compile id [1/0]
  rank 0 compiles `rank0_fn` (x.sin() + 1) and rank 1 compiles `rank1_fn`
  ((x.cos() * 3).sum()): the ranks' logs disagree about what [1/0] is.
* `collectives_gloo_fail` (MODE "gloo_fail"): plain "gloo" and no patches; the compile of
  [0/0] fails on every rank (a real failure trace). Each rank catches the error and prints
  it, so the process exits 0.
* `collectives_shapes` (MODE "shapes"): plain "gloo", compiler collectives off; rank 0
  compiles sync_fn for f32[4], rank 1 for f32[5]: static graphs that differ per rank.
"""

import contextlib
import io
import os
import socket
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD_SIZE = 2
MODE = globals().get("MODE", "sync")
MODES = ("sync", "desync", "gloo_fail", "shapes")


def free_port() -> int:
    """Ask the OS for a free localhost port (there is a small race; fine for a harness)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def patch_for_cpu() -> None:
    """Let the compiler collective run on CPU: one "accelerator", a no-op device context."""
    torch.accelerator.device_count = lambda: 1
    # a CPU stand-in for the device context torch expects (a class attribute torch declares as a type)
    torch._dynamo.device_interface.CpuInterface.device = staticmethod(lambda *a, **k: contextlib.nullcontext())  # type: ignore[misc, assignment, unused-ignore]  # unused without torch installed


def patch_all_gather_object() -> None:
    """dist.all_gather_object (the compiler collective's exchange) without numpy.

    torch 2.13 unpickles each gathered object from `tensor.numpy().tobytes()`, and the
    harness does not install numpy; the bytes can be had from the uint8 tensor directly.
    """
    c10d = dist.distributed_c10d

    def tensor_to_object(tensor, tensor_size, group):
        buf = bytes(tensor.cpu().tolist()[: int(tensor_size)])
        return c10d._unpickler(io.BytesIO(buf)).load()

    c10d._tensor_to_object = tensor_to_object


def sync_fn(x: torch.Tensor) -> torch.Tensor:
    return x.sin() + 1


def rank0_fn(x: torch.Tensor) -> torch.Tensor:
    return x.sin() + 1


def rank1_fn(x: torch.Tensor) -> torch.Tensor:
    return (x.cos() * 3).sum()


def body(rank: int, mode: str) -> None:
    """What each rank compiles; rank r's input is f32[4 + r]."""
    x = torch.randn(4 + rank)
    compiled = torch.compile(sync_fn, backend="inductor")
    torch.testing.assert_close(compiled(x), sync_fn(x))
    torch.testing.assert_close(compiled(x * 2), sync_fn(x * 2))
    if mode == "desync":
        fn = rank0_fn if rank == 0 else rank1_fn
        torch.testing.assert_close(torch.compile(fn, backend="inductor")(x), fn(x))


def run_rank(rank: int, mode: str) -> None:
    """One rank: join the group, compile, tear down."""
    torch.set_num_threads(1)
    plain = mode in ("gloo_fail", "shapes")
    patch_all_gather_object()
    if not plain:
        patch_for_cpu()
    torch._dynamo.config.enable_compiler_collectives = mode != "shapes"
    dist.init_process_group("gloo" if plain else "cpu:gloo", rank=rank, world_size=WORLD_SIZE)
    try:
        if mode == "gloo_fail":
            try:
                body(rank, mode)
            except Exception as exc:  # noqa: BLE001 - the failure is the point
                traceback.print_exc()
                print(f"rank {rank}: compile failed as expected: {type(exc).__name__}: {exc}")
            else:
                raise SystemExit(f"rank {rank}: plain gloo compiled; the failure is gone")
        else:
            body(rank, mode)
        dist.barrier()
        print(f"rank {rank} ok ({mode})")
    finally:
        dist.destroy_process_group()


def main() -> None:
    """Spawn the ranks; mp.spawn raises if any rank fails, which fails the scenario."""
    assert MODE in MODES, MODE
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(run_rank, args=(MODE,), nprocs=WORLD_SIZE, join=True)
    print(f"collectives ok ({MODE})")


if __name__ == "__main__":
    main()
