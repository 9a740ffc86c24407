"""Scenario `quiet_parent`: a program compiles once, goes quiet, then starts children one at a time,
each compiling into the same trace folder: one run whose logs never overlap in time.

The program compiles `main_step` ([0/0]) and logs nothing after it, as a launcher that waits on its
workers does. Then, each started and waited for before the next, so that no two of these logs
overlap the program's or each other's (the two DataLoader workers overlap each other):

- a multiprocessing child by spawn compiles `spawned_step`;
- one by fork compiles `forked_step`;
- one by forkserver compiles `forkserver_step`;
- a Pool of one worker (fork) compiles `pool_step`;
- a DataLoader with two workers (fork) loads two items, each worker compiling `load_item` for its one.

Expected records: 7 pids, a log each, one compile each. Each child's first `dynamo_start` stack starts
in multiprocessing's start-up (`multiprocessing/process.py` `_bootstrap`, reached through
`spawn.py`, `popen_fork.py` or `forkserver.py`; the Pool's through `pool.py` `worker`, the DataLoader's
through `torch/utils/data/_utils/worker.py` `_worker_loop`). The truth: one run, 7 compiles.
"""

import multiprocessing
import time

import torch
from torch.utils.data import DataLoader, Dataset

QUIET_S = 1.0  # the program's log ends this long, at least, before its first child's begins


def main_step(x: torch.Tensor) -> torch.Tensor:
    return x.sin() + 1


def spawned_step(x: torch.Tensor) -> torch.Tensor:
    return x.cos() - 1


def forked_step(x: torch.Tensor) -> torch.Tensor:
    return x * 3 + 1


def forkserver_step(x: torch.Tensor) -> torch.Tensor:
    return x.abs() + 2


def pool_step(x: torch.Tensor) -> torch.Tensor:
    return x.exp() - 1


def load_item(x: torch.Tensor) -> torch.Tensor:
    return x * x + 1


class Items(Dataset):
    """Each item made by a compiled function, in the worker that loads it (round-robin: one each)."""

    def __init__(self) -> None:
        self.make = torch.compile(load_item, backend="eager")

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.make(torch.full((3,), float(index)))


def compile_once(fn) -> None:
    x = torch.randn(4)
    torch.testing.assert_close(torch.compile(fn, backend="eager")(x), fn(x))


def spawned() -> None:
    compile_once(spawned_step)


def forked() -> None:
    compile_once(forked_step)


def forkserved() -> None:
    compile_once(forkserver_step)


def pooled(_: int) -> None:
    compile_once(pool_step)


def child(process: multiprocessing.process.BaseProcess) -> None:
    """Start a child and wait for it: the next begins only once it ended."""
    process.start()
    process.join()
    assert process.exitcode == 0, process.exitcode


def main() -> None:
    compile_once(main_step)
    time.sleep(QUIET_S)
    child(multiprocessing.get_context("spawn").Process(target=spawned))
    child(multiprocessing.get_context("fork").Process(target=forked))
    child(multiprocessing.get_context("forkserver").Process(target=forkserved))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        pool.map(pooled, [0])
    loaded = list(DataLoader(Items(), batch_size=1, num_workers=2, multiprocessing_context="fork"))
    assert len(loaded) == 2
    print("quiet_parent ok")


if __name__ == "__main__":
    main()
