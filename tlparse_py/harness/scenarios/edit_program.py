"""The program of the `edit_*` scenarios: one model, and the edits a pull request makes to it.

Not a scenario itself: each edit_*.py scenario writes its version of the program to
`<checkout>/model.py` under its working directory and runs it (runpy), as a CI job runs the
program of the base branch and of the pull request, checked out at two different paths.
`edit_base` is the base; `edit_shifted` adds lines above the model (every line number moves, no
code changes); `edit_renamed` renames `prepare`; `edit_fixed` removes the graph break;
`edit_newbreak` adds a graph break in `head`. `edit_itembreak` breaks `prepare` on `.item()`
instead, and `edit_otherbreak` (its pull request) replaces that break by a `print()` break one line
down: a different break, of a different kind, whose resume frame is not the one before. `step` is
compiled twice (a second input size recompiles it), so each run has recompiles as well as graph breaks.

The backend is aot_eager: the edits are about frames and graph breaks, and Inductor's records
would make each log several times bigger without adding any.
"""

import os
import re
import runpy
from pathlib import Path

BASE = '''import os

import torch

DEVICE = os.environ.get("TLPARSE_HARNESS_DEVICE", "cpu")


def prepare(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    torch._dynamo.graph_break()
    return y + 1


def head(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    return y.cos() * 3


def step(x: torch.Tensor) -> torch.Tensor:
    return head(prepare(x)).sum()


def main() -> None:
    compiled = torch.compile(step, backend="aot_eager")
    for size in (4, 8):  # the second size makes Dynamo recompile with a dynamic size
        x = torch.randn(size, device=DEVICE)
        torch.testing.assert_close(compiled(x), step(x))
    print("edit program ok")


if __name__ == "__main__":
    main()
'''

EDITS = {
    "base": lambda source: source,
    # an unrelated edit above the model: every line below it moves down by four
    "shifted": lambda source: source.replace("import os\n", "import os\nimport math  # unused: an edit above the model\n\n# A comment block\n# that moves every line.\n", 1),
    "renamed": lambda source: re.sub(r"\bprepare\b", "prepare_input", source),
    "fixed": lambda source: source.replace("    torch._dynamo.graph_break()\n", "", 1),
    "newbreak": lambda source: source.replace("    y = x.sin()\n", "    y = x.sin()\n    torch._dynamo.graph_break()\n", 1),
    # `prepare` breaks on `.item()` (capture_scalar_outputs is off) ...
    "itembreak": lambda source: source.replace("    torch._dynamo.graph_break()\n    return y + 1\n",
                                               "    scale = y.sum().item()\n    return y + scale\n", 1),
    # ... and the pull request drops the `.item()` for a `print()` one line down: another break, of another kind
    "otherbreak": lambda source: source.replace("    torch._dynamo.graph_break()\n    return y + 1\n",
                                                "    scale = 1.0\n    print(\"prepared\")\n    return y + scale\n", 1),
}


def run(edit: str, checkout: str) -> None:
    """Write the `edit` version of the program to `<cwd>/<checkout>/model.py` and run it."""
    folder = Path.cwd() / checkout
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "model.py"
    program.write_text(EDITS[edit](BASE))
    runpy.run_path(os.fspath(program), run_name="__main__")


if __name__ == "__main__":
    run(globals()["EDIT"], globals()["CHECKOUT"])
