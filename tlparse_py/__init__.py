"""tlparse-py: static HTML reports from PyTorch TORCH_TRACE structured logs.

    import tlparse_py
    analysis = tlparse_py.analyze("/tmp/trace")   # a log, a .gz or a TORCH_TRACE folder; writes nothing
    analysis.to_dict()                            # exactly what the report's summary.json holds
    tlparse_py.build("/tmp/trace", "tl_out")      # the HTML report (returns the same analysis)

A folder of rank logs (torchrun's) gives a `RanksAnalysis`: each rank's analysis and what diverges
across the ranks; `build` writes the multi-rank report the command line writes.

In a notebook an analysis shows itself as a summary; `tlparse_py.show(path)` shows the report
inline, and `with tlparse_py.trace() as t:` traces the compiles of a block (see `notebook`).
"""

from __future__ import annotations

from ._version import __version__

__all__ = ["__version__", "analyze", "build", "show", "trace"]

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing is a tenth of `--version`
if TYPE_CHECKING:  # imported when used: `tlparse-py --version` loads this package and little else
    from contextlib import AbstractContextManager
    from pathlib import Path
    from typing import Any

    from .analysis.compiles import Analysis
    from .multirank.ranks_analysis import RanksAnalysis
    from .notebook import Shown, Traced


def analyze(path: str | Path, *, export: bool = False, latest: bool = False, all_runs: bool = False) -> Analysis | RanksAnalysis:
    """The analysis of a trace (log file, `.gz` or folder), read the way `tlparse-py PATH` reads it
    (`all_runs`: every log of a folder, as `--all-runs`). A folder of several ranks' logs gives a
    `RanksAnalysis` (each rank's analysis and their comparison), as `tlparse-py PATH` gives a
    multi-rank report."""
    from pathlib import Path

    from .reading.inputs import SeveralRanks, choose_input
    from .analysis.kinds import load_plugins
    from .pipeline import Options, analyze_logs, source_of

    from . import notebook  # noqa: F401  (registers how an analysis shows itself in a notebook)

    load_plugins()
    try:
        chosen = choose_input(Path(path), latest, export, all_runs)
    except SeveralRanks:
        chosen = None  # a folder of rank logs (read outside this handler: its errors are its own)
    if chosen is None:
        from .multirank.ranks_analysis import analyze_ranks

        return analyze_ranks(Path(path), Options(export=export))
    return analyze_logs(chosen.logs, Options(export=export), source_of(chosen.logs, chosen.others, chosen.left_out, chosen.every_log))


def build(path: str | Path, out: str | Path, *, overwrite: bool = False, all_runs: bool = False, **options: Any) -> Analysis | RanksAnalysis:
    """Write the HTML report of a trace to `out`; `options` are `pipeline.Options` fields (`all_runs`:
    every log of a folder, as `--all-runs`). A folder of several ranks' logs gets the multi-rank
    report, and its `RanksAnalysis` is returned."""
    from pathlib import Path

    from .reading.inputs import SeveralRanks, choose_input
    from .analysis.kinds import load_plugins
    from .pipeline import Options, source_of, write_report

    from . import notebook  # noqa: F401  (registers how an analysis shows itself in a notebook)

    load_plugins()
    try:
        chosen = choose_input(Path(path), False, bool(options.get("export")), all_runs)
    except SeveralRanks:
        chosen = None  # a folder of rank logs (written outside this handler: its errors are its own)
    if chosen is None:
        from .multirank.ranks_analysis import build_ranks

        return build_ranks(Path(path), Path(out), overwrite, Options(**options))
    return write_report(chosen.logs, Path(out), overwrite=overwrite, options=Options(**options),
                        source=source_of(chosen.logs, chosen.others, chosen.left_out, chosen.every_log))


def show(path: str | Path, out: str | Path | None = None, *, height: int = 720) -> Shown:
    """Write the report of a trace (to `out`, else a temporary folder) and show it inline in a notebook."""
    from .notebook import show as show_report

    return show_report(path, out, height=height)


def trace(folder: str | Path | None = None) -> AbstractContextManager[Traced]:
    """`with tlparse_py.trace() as t:` traces the compiles of the block in this process; `t.analysis` after."""
    from .notebook import trace as trace_block

    return trace_block(folder)
