"""The program exit: how the program `tlparse-py run` ran ended (README, "program exit").

A fact of the run, not of its log: torch logs nothing when its process exits, is killed, or crashes
between two compiles, so a report read from a log alone has none (null, never 0). `run` notes it
once the program is gone, and every view (the index's header, summary.json `program`, summary.md
and --markdown, the multi-rank landing, the terminal's last line, the diff's loaded summaries)
reads this one object and its words.
"""

from __future__ import annotations

import shlex
import signal as signals
from collections.abc import Sequence
from typing import Any

from msgspec import Struct


class ProgramExit(Struct, frozen=True):
    """How the program ended: it exited with `exit_code` (`signal` None), or the signal named
    `signal` ended it (`exit_code` None: a process a signal ends has no exit code). For a launcher
    (`torchrun`) these are the launcher's own: a rank it ran that failed shows as its exit code."""

    command: str  # the command line `run` ran, as a shell would quote it
    exit_code: int | None
    signal: str | None  # "SIGKILL"; "signal 40" for a number this Python has no name for

    @classmethod
    def of(cls, command: Sequence[str], returncode: int) -> ProgramExit:
        """From a `subprocess` return code: a negative one is the signal that ended the process."""
        if returncode >= 0:
            return cls(shlex.join(command), returncode, None)
        return cls(shlex.join(command), None, signal_name(-returncode))

    @property
    def failed(self) -> bool:
        """Whether the program failed: it exited with another code than 0, or a signal ended it."""
        return self.signal is not None or self.exit_code not in (0, None)

    @property
    def outcome(self) -> str:
        """`exited with 3`, `was killed by SIGKILL`: what comes after the program's name."""
        if self.signal is not None:
            return f"was killed by {self.signal}"
        if self.exit_code is None:  # a summary.json that names neither: not one `run` wrote
            return "ended, how is not known"
        return f"exited with {self.exit_code}"

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "exit_code": self.exit_code, "signal": self.signal}


def signal_name(number: int) -> str:
    """`SIGKILL` for 9; `signal 40` for a number without a name here (a real-time signal)."""
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"
