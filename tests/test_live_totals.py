"""A live report's totals are the declarations' (issue 48): each `Total` says how a live run keeps
it (`Total.live`), the live index tells every total the compiles that changed and shows what the
totals say, and what it shows after the last update is what the final report's summary.json says.

Nothing here lists the totals: every check goes over `totals.TOTALS`, so a new declaration is
checked as it is declared.
"""

from __future__ import annotations

import ast
import json
import random
from pathlib import Path

import pytest
from msgspec.structs import replace

from conftest import TRACES
from test_live import fixture_bytes
from tlparse_py.analysis import totals
from tlparse_py.analysis.summary import UNKNOWN_TIME, CompileSummary
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.analysis.totals import TOTALS, nested, totals_of
from tlparse_py.live import LiveReport
from tlparse_py.options import Options
from tlparse_py.pipeline import write_report
from tlparse_py.report.views import live_index

# real traces whose totals move as they are read: many frames, recompiles, frames again after
# reset(), a compile killed before its time was logged, backward compile times that come in after
# their compile, several processes, a compile at the limit
TRACES_READ = ["many_small", "recompile", "reset_phases", "killed_midcompile", "dynamic_backward", "processes", "recompile_limit",
               "ddp_cache_race"]


def follow_totals(live: LiveReport) -> list[dict]:
    """The totals each update's index shows (summary.json's shape: dotted names nested)."""
    shown: list[dict] = []
    make = live._index_page

    def page(changes, touched):
        made = make(changes, touched)
        shown.append(made.totals)
        return made

    live._index_page = page  # type: ignore[method-assign]
    return shown


def read_in_pieces(live: LiveReport, log: Path, data: bytes, seed: int, each=None) -> int:
    pieces, position, updates = random.Random(seed), 0, 0
    while position < len(data):
        size = pieces.choice([max(300, len(data) // n) for n in (40, 12, 5)])
        with open(log, "ab") as handle:
            handle.write(data[position : position + size])
        position += size
        live.update("test", live.read())
        updates += 1
        if each is not None:
            each()
    return updates


def new_log(tmp_path: Path) -> Path:
    log = tmp_path / "trace" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    log.write_bytes(b"")
    return log


@pytest.mark.parametrize("name", TRACES_READ)
def test_the_live_totals_are_the_final_reports_after_every_piece(tmp_path, name):
    log = new_log(tmp_path)
    live = LiveReport(log, tmp_path / "live", Options())
    shown = follow_totals(live)
    every_compile = lambda: shown[-1] == nested(totals_of(live.compiles.compiles))  # noqa: E731
    checks: list[bool] = []
    updates = read_in_pieces(live, log, fixture_bytes(name), seed=5, each=lambda: checks.append(every_compile()))
    assert updates > 4 and all(checks), "each update shows the totals of the compiles read so far"
    live.finish()
    live.close()
    summary = json.loads((tmp_path / "live" / "summary.json").read_text())
    assert shown[-1] == summary["totals"], "the last update's totals are the final report's"
    write_report(log, tmp_path / "one_shot")
    assert json.loads((tmp_path / "one_shot" / "summary.json").read_text())["totals"] == summary["totals"]


class Told:
    """A total's live rule in a test: its tally is told the compiles, and says `answer`."""

    def __init__(self, answer: int, told: list[tuple[str, int, CompileSummary]], name: str):
        self.answer, self.told, self.name = answer, told, name

    def tally(self, total):
        return self

    def put(self, position: int, compile_: CompileSummary) -> None:
        self.told.append((self.name, position, compile_))

    def value(self) -> int:
        return self.answer


def test_every_total_the_live_index_shows_is_what_its_declaration_says(tmp_path, monkeypatch):
    """Each total is declared to say a number no computation over the compiles gives: the index shows
    those numbers, so it computed none itself, and each declaration was told every compile."""
    told: list[tuple[str, int, CompileSummary]] = []
    answers = {total.name: 10_000 + n for n, total in enumerate(TOTALS)}
    monkeypatch.setattr(totals, "TOTALS", tuple(replace(t, live=Told(answers[t.name], told, t.name)) for t in TOTALS))
    log = new_log(tmp_path)
    live = LiveReport(log, tmp_path / "live", Options())
    shown = follow_totals(live)
    read_in_pieces(live, log, fixture_bytes("training"), seed=2)
    assert shown and all(values == nested(answers) for values in shown)
    compiles = live.compiles.compiles
    for total in TOTALS:
        last = {position: compile_ for name, position, compile_ in told if name == total.name}
        assert sorted(last) == list(range(len(compiles))) and all(last[p] is c for p, c in enumerate(compiles)), total.name
    live.close()


def test_the_live_index_names_no_total_and_computes_none():
    """views/live_index.py asks the declarations (`Total.tally`) and nothing else of the totals: it
    names no total and calls no computation of one."""
    tree = ast.parse(Path(live_index.__file__).read_text())
    names = {total.name for total in TOTALS} | {part for total in TOTALS for part in total.name.split(".")}
    asked = [node.comparators + [node.left] for node in ast.walk(tree) if isinstance(node, ast.Compare)]  # name == "frames"
    asked += [[node.slice] for node in ast.walk(tree) if isinstance(node, ast.Subscript)]  # values["frames"]
    asked += [node.args for node in ast.walk(tree) if isinstance(node, ast.Call)]  # values.get("frames")
    strings = {part.value for parts in asked for part in parts if isinstance(part, ast.Constant) and isinstance(part.value, str)}
    assert strings & names == set()
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    used |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert used & {"compute", "over", "totals_of", "TOTALS", "BY_NAME", "additive"} == set()


@pytest.fixture(scope="module")
def compiles(tmp_path_factory) -> list[CompileSummary]:
    found: list[CompileSummary] = []
    for name in TRACES_READ:
        log = next(p for p in sorted((TRACES / name).iterdir()) if p.name.startswith("dedicated_log"))
        out = tmp_path_factory.mktemp(name)
        write_report(log, out / "report")
        found += load_summary(json.loads((out / "report" / "summary.json").read_text())).compiles
    # and each as a compile that logged no time, and as one that logged no frame id
    return found + [replace(c, compile_time_s=UNKNOWN_TIME) for c in found] + [replace(c, key=c.key._replace(frame_id=None)) for c in found]


@pytest.mark.parametrize("seed", range(4))
def test_each_tally_is_its_total_over_the_compiles_as_they_arrive_and_are_built_again(compiles, seed):
    """Compiles put at new positions and put again at old ones (built again): after every step
    each total's tally says what the total computed over the compiles now held says."""
    pick = random.Random(seed)
    held: list[CompileSummary] = []
    tallies = {total.name: total.tally() for total in TOTALS}
    for _ in range(150):
        for _ in range(pick.randint(1, 4)):  # an update tells several compiles, then asks
            position = len(held) if not held or pick.random() < 0.5 else pick.randrange(len(held))
            compile_ = pick.choice(compiles)
            if position == len(held):
                held.append(compile_)
            held[position] = compile_
            for tally in tallies.values():
                tally.put(position, compile_)
        for total in TOTALS:
            assert tallies[total.name].value() == total.compute(held), total.name
    assert {c.compile_time_s.total is None for c in held} == {c.frame_identity is None for c in held} == {True, False}
