"""The `tlparse-py` script (and `python -m tlparse_py`).

`--version` is answered before click is imported: that import is most of a tenth of a second on a
small machine. Everything else goes to the command line in `cli.py`.
"""

from __future__ import annotations

import sys

from ._version import __version__

VERSION_FLAGS = (["--version"], ["-V"])


def main() -> None:
    if sys.argv[1:] in VERSION_FLAGS:
        sys.stdout.write(f"tlparse-py {__version__}\n")  # what click's version option prints
        return
    from .cli import main as command_line

    command_line(prog_name="tlparse-py")
