"""The `tlparse-py` script (and `python -m tlparse_py`).

`--version` is answered before click is imported: that import is most of a tenth of a second on a
small machine. Everything else goes to the command line in `cli.py`.
"""

from __future__ import annotations

import os
import sys

from ._version import __version__

VERSION_FLAGS = (["--version"], ["-V"])


def main() -> None:
    if sys.argv[1:] in VERSION_FLAGS:
        sys.stdout.write(f"tlparse-py {__version__}\n")  # what click's version option prints
        return
    from .cli import main as command_line

    try:
        command_line(prog_name="tlparse-py")
    except SystemExit as leaving:  # click always leaves this way
        leave_now(leaving.code)
        raise


def leave_now(code: object) -> None:
    """Exit without tearing the interpreter down, when the command is over and nothing runs beside it.

    Freeing every module and object of a finished run one by one took ~35 ms on 2 cores, a sixth of
    a run on a small log (A/B of alternating runs), and saves nothing: the process ends. What an exit must still do is
    done here: atexit hooks (temporary folders' finalizers, worker pools) and flushing stdout and
    stderr. Files the run wrote are closed by then (every write is in a `with`). Where a thread
    that Python would wait for is alive (not a daemon), or a stream cannot be flushed, this returns
    and Python exits as usual.
    """
    threading = sys.modules.get("threading")
    waited_for = threading is not None and any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread())
    if waited_for or not (code is None or isinstance(code, int)):
        return
    import atexit

    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code or 0)
