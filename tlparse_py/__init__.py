"""tlparse-py: static HTML reports from PyTorch TORCH_TRACE structured logs.

    import tlparse_py
    analysis = tlparse_py.analyze("/tmp/trace")   # a log, a .gz or a TORCH_TRACE folder; writes nothing
    analysis.to_dict()                            # exactly what the report's summary.json holds
    tlparse_py.build("/tmp/trace", "tl_out")      # the HTML report (returns the same analysis)
"""

from __future__ import annotations

from ._version import __version__

__all__ = ["__version__", "analyze", "build"]

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing is a tenth of `--version`
if TYPE_CHECKING:  # imported when used: `tlparse-py --version` loads this package and little else
    from pathlib import Path
    from typing import Any

    from .analysis.compiles import Analysis


def analyze(path: str | Path, *, export: bool = False, latest: bool = False) -> Analysis:
    """The analysis of a trace (log file, `.gz` or folder), read the way `tlparse-py PATH` reads it."""
    from pathlib import Path

    from .reading.inputs import choose_input
    from .analysis.kinds import load_plugins
    from .pipeline import Options, analyze_logs, source_of

    load_plugins()
    chosen = choose_input(Path(path), latest, export)
    return analyze_logs(chosen.logs, Options(export=export), source_of(chosen.logs))


def build(path: str | Path, out: str | Path, *, overwrite: bool = False, **options: Any) -> Analysis:
    """Write the HTML report of a trace to `out`; `options` are `pipeline.Options` fields."""
    from pathlib import Path

    from .reading.inputs import choose_input
    from .analysis.kinds import load_plugins
    from .pipeline import Options, source_of, write_report

    load_plugins()
    chosen = choose_input(Path(path), False, bool(options.get("export")))
    return write_report(chosen.logs, Path(out), overwrite=overwrite, options=Options(**options), source=source_of(chosen.logs))
