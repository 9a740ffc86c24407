"""Scenario `processes`: one program whose children compile too, all logging into one trace folder.

The main process compiles `main_step` on a 1-d input ([0/0]). It then iterates a DataLoader with
one worker, forked (DataLoader's default on Linux): the worker writes a log of its own, compiling
`load_item` under a frame id counted on from its parent's. Then it starts a child with
multiprocessing's spawn method: a fresh interpreter that writes a log of its own into the same
folder, compiling `child_step` twice (a 1-d, then a 2-d input: a recompile, [0/0] and [0/1]).
Last the main process compiles `main_step` again on a 2-d input: a recompile, [0/1], logged after
its children ended, so its log spans their lives, as a training loop's does.

Expected records: three pids in three logs whose time spans overlap; each process numbers its own
frames, so `[0/0]` and `[0/1]` are in two logs. The truth: 5 compiles, 2 recompiles.
"""

import multiprocessing
import os

import torch
from torch.utils.data import DataLoader, Dataset

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def main_step(x: torch.Tensor) -> torch.Tensor:
    return (x.sin() + 1) * 2


def child_step(x: torch.Tensor) -> torch.Tensor:
    return x.cos() - x


def load_item(x: torch.Tensor) -> torch.Tensor:
    return x * x + 1


class Items(Dataset):
    """Each item made by a compiled function, in the worker process that loads it."""

    def __init__(self) -> None:
        self.make = torch.compile(load_item, backend="eager")

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.make(torch.full((3,), float(index)))


def child() -> None:
    """A spawned process: compiles child_step on a 1-d, then a 2-d input."""
    compiled = torch.compile(child_step, backend="eager")
    for shape in ((4,), (4, 2)):
        x = torch.randn(*shape, device=DEVICE)
        torch.testing.assert_close(compiled(x), child_step(x))


def main() -> None:
    compiled = torch.compile(main_step, backend="eager")
    x = torch.randn(4, device=DEVICE)
    torch.testing.assert_close(compiled(x), main_step(x))
    loaded = [batch for batch in DataLoader(Items(), batch_size=1, num_workers=1, multiprocessing_context="fork")]
    assert len(loaded) == 2
    process = multiprocessing.get_context("spawn").Process(target=child)
    process.start()
    process.join()
    assert process.exitcode == 0, process.exitcode
    x = torch.randn(4, 2, device=DEVICE)
    torch.testing.assert_close(compiled(x), main_step(x))
    print("processes ok")


if __name__ == "__main__":
    main()
