"""An example tlparse-py plugin: one internal record kind, `my_team_pass_report`.

Our (hypothetical) team runs a custom FX pass inside torch.compile and logs what it did with
`torch._logging.trace_structured("my_team_pass_report", metadata_fn=..., payload_fn=...)`. Without
this plugin tlparse-py still shows the text, as an "unknown record kind"; with it the record gets a
title, its own numbered file and a heading in the "other" section of its compile page.
"""

from __future__ import annotations

import re

from tlparse_py.kinds import PAYLOAD, Output, ParseContext, declare
from tlparse_py.model import Record

KIND = "my_team_pass_report"


def parse_pass_report(record: Record, ctx: ParseContext) -> list[Output]:
    """The payload, verbatim, in a numbered file named after the pass (one file per pass run)."""
    # text_field counts a non-string `pass_name` as a damaged field instead of failing the record
    pass_name = ctx.text_field(record, KIND, "pass_name") or "unnamed"
    # the name ends up in a file name: keep it to characters every file system accepts
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", pass_name)
    return [Output(PAYLOAD, f"{KIND}_{safe}.txt")]


def register() -> None:
    """Declare the kind (the entry point's target: importing the module alone declares nothing)."""
    declare(
        KIND,
        "My team's FX pass: what it rewrote, node by node",
        parse=parse_pass_report,
        section="other",
        label="My team: pass report",
    )

