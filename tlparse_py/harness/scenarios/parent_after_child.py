"""Scenario `parent_after_child`: a program whose spawned child compiles first, the program itself only
after the child ended (training in a child, then an evaluation); run twice into one trace folder.

Each run: the program starts a child by multiprocessing's spawn method and waits for it; the child
compiles `child_step` ([0/0]); then the program compiles `main_step` ([0/0]). The child's log ends
before the program's begins, so in time the child looks like the run before its parent. The harness
runs the program twice into the same folder: two separate runs, four logs, none overlapping.

Expected records: 4 pids, a log each, one compile each; the children's first `dynamo_start` stacks
start in multiprocessing's spawn start-up. The truth: two runs of 2 compiles each, the second run's
child and program being the newest run.
"""

import multiprocessing

import torch


def main_step(x: torch.Tensor) -> torch.Tensor:
    return x.tanh() * 2


def child_step(x: torch.Tensor) -> torch.Tensor:
    return x.sigmoid() + 1


def compile_once(fn) -> None:
    x = torch.randn(4)
    torch.testing.assert_close(torch.compile(fn, backend="eager")(x), fn(x))


def child() -> None:
    compile_once(child_step)


def main() -> None:
    process = multiprocessing.get_context("spawn").Process(target=child)
    process.start()
    process.join()
    assert process.exitcode == 0, process.exitcode
    compile_once(main_step)
    print("parent_after_child ok")


if __name__ == "__main__":
    main()
