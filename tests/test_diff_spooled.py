"""A diff of a huge summary.json: its compiles and rows kept in scratch files (issue 34 item 17).

What a diff says must not depend on where it kept things: every test here compares a diff made with
the spools forced (a spool from the first compile and row, tiny batches) with the same diff made in
memory, byte for byte, on real reports and on the benchmark's generated summaries, laid out as the
tool writes summary.json and laid out otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import orjson
import pytest

from conftest import TRACES
from tlparse_py.analysis import comparison, spools, totals
from tlparse_py.analysis.spools import SpooledCompiles, SpooledFrames, SpooledRows
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.diff import load as loading
from tlparse_py.diff.output import diff_json, write_diff
from tlparse_py.pipeline import Options, write_report

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def memory_diff():
    spec = importlib.util.spec_from_file_location("bench_memory_diff", BENCHMARKS / "memory_diff.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def force_spools(monkeypatch) -> None:
    monkeypatch.setattr(loading, "COMPILES_IN_MEMORY", 0)
    monkeypatch.setattr(loading, "BATCH", 3)
    monkeypatch.setattr(comparison, "ROWS_IN_MEMORY", 0)
    monkeypatch.setattr(totals, "TOTALS_BATCH", 2)
    monkeypatch.setattr(spools, "READ_CHUNK", 700)  # several reads an iteration


def log_of(name: str) -> Path:
    path = TRACES / name
    return path if path.is_file() else next(p for p in sorted(path.iterdir()) if p.name.startswith("dedicated_log"))


def diffed(base: Path, new: Path, out: Path) -> tuple[bytes, bytes, dict]:
    """(diff.json, the page, the diff) of two summary.json files, as the diff command makes them."""
    result = comparison.diff(loading.load(base, "BASE").summary, loading.load(new, "NEW").summary, "BASE", "NEW")
    write_diff(result, out, overwrite=True)
    return (out / "diff.json").read_bytes(), (out / "index.html").read_bytes(), result


# -- the same diff, spooled or not ---------------------------------------------------------------------


PAIRS = [
    ("train_warm/dedicated_log_torch_trace_7nvvy7q4.log.gz", "train_warm/dedicated_log_torch_trace_pnf633u3.log"),
    ("edit_base", "edit_renamed"),
    ("skip_base", "skip_nan"),
    ("gb_base", "gb_extra"),
    ("recompile_limit", "recompile"),
]


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{a.split('/')[0]}-{b.split('/')[0]}" for a, b in PAIRS])
def test_real_reports_diffed_through_spools_say_the_same(tmp_path, monkeypatch, pair):
    reports = []
    for i, name in enumerate(pair):
        out = tmp_path / f"report{i}"
        write_report(log_of(name), out, options=Options())
        reports.append(out / "summary.json")
    in_memory = diffed(*reports, tmp_path / "memory")
    force_spools(monkeypatch)
    spooled = diffed(*reports, tmp_path / "spooled")
    assert spooled[2].comparison is not None and isinstance(spooled[2].comparison.frames, SpooledFrames)
    assert spooled[0] == in_memory[0]
    assert spooled[1].replace(b"spooled", b"memory") == in_memory[1]


@pytest.mark.parametrize("layout", ["as written", "minified", "indented by 4"])
def test_generated_summaries_diffed_through_spools_say_the_same(tmp_path, monkeypatch, layout):
    bench = memory_diff()
    base = bench.write_summary(tmp_path / "base" / "summary.json", 400)
    new = bench.write_summary(tmp_path / "new" / "summary.json", 430, new=True)
    for path in (base, new):
        data = json.loads(path.read_bytes())
        if layout == "minified":
            path.write_text(json.dumps(data))
        elif layout == "indented by 4":
            path.write_text(json.dumps(data, indent=4))
    in_memory = diffed(base, new, tmp_path / "memory")
    force_spools(monkeypatch)
    spooled = diffed(base, new, tmp_path / "spooled")
    assert spooled[0] == in_memory[0]
    assert spooled[1].replace(b"spooled", b"memory") == in_memory[1]
    whole = comparison.diff(load_summary(json.loads(base.read_bytes())), load_summary(json.loads(new.read_bytes())), "BASE", "NEW")
    assert diff_json(whole) == in_memory[0]
    frames = json.loads(in_memory[0])["comparison"]["frames"]
    assert sum(len(f["pairs"]) for f in frames) >= 430  # every compile of either run is in a row


def test_a_summary_as_the_tool_writes_it_is_never_read_whole(tmp_path, monkeypatch, report_of):
    """The streaming reader, not the whole-file one, reads the summary.json a report writes."""
    _, out = report_of(log_of("recompile"))

    def whole(*_):
        raise AssertionError("read whole")

    monkeypatch.setattr(loading, "_in_batches", whole)
    monkeypatch.setattr(loading.Path, "read_bytes", whole)
    summary = loading.load(out, "BASE").summary
    expected = load_summary(json.loads((out / "summary.json").read_text()))
    assert [c.id for c in summary.compiles] == [c.id for c in expected.compiles]
    assert summary.inputs == expected.inputs and summary.torch_version == expected.torch_version


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.999])
def test_a_cut_summary_is_refused_with_its_reason(tmp_path, report_of, cut):
    _, out = report_of(log_of("recompile"))
    data = (out / "summary.json").read_bytes()
    (out / "summary.json").write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(loading.LoadError, match="is not valid JSON"):
        loading.load(out, "BASE")


def test_a_summary_whose_layout_only_looks_like_the_tools_is_read_right(tmp_path):
    """A compile whose text holds what the reader splits on (in a string, or deeper) stays whole."""
    bench = memory_diff()
    path = bench.write_summary(tmp_path / "s" / "summary.json", 20)
    data = json.loads(path.read_bytes())
    data["compiles"][3]["frame"] = 'f\n    },\n  ]'  # escaped in JSON: no newline reaches the file
    data["compiles"][5]["recompile_reasons"] = ["}" * 50]
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    summary = loading.load(path).summary
    assert [c.frame for c in summary.compiles] == [c["frame"] for c in data["compiles"]]
    assert summary.compiles[5].recompile_reasons == ["}" * 50]


# -- the spools themselves ----------------------------------------------------------------------------


def test_a_spool_reads_like_the_list_it_was_given(monkeypatch):
    monkeypatch.setattr(spools, "IN_MEMORY", 1000)  # to disk early
    monkeypatch.setattr(spools, "READ_CHUNK", 300)
    rnd = random.Random(7)
    rows = [{"i": i, "text": "é" * rnd.randint(0, 400), "nested": {"a": [i, None, 2.5]}} for i in range(200)]
    spool = SpooledRows()
    for i, row in enumerate(rows):
        spool.append(row)
        if i % 37 == 0:  # reads between appends
            assert spool[i] == row and spool[-1] == row
    assert spool._file._rolled  # it went to disk
    assert len(spool) == 200 and list(spool) == rows and spool == rows and spool != rows[:-1]
    assert spool[3:9] == rows[3:9] and spool[::-50] == rows[::-50] and spool[-2] == rows[-2]
    with pytest.raises(IndexError):
        spool[200]
    assert [r["i"] for r in spool if r["i"] % 50 == 0] == [0, 50, 100, 150]
    assert orjson.loads(diff_json({"rows": spool})) == {"rows": rows}
    assert SpooledRows() == [] and not SpooledRows()


def test_a_row_bigger_than_a_read_chunk_is_read_whole(monkeypatch):
    monkeypatch.setattr(spools, "READ_CHUNK", 100)
    rows = [{"big": "x" * 1000}, {"small": 1}, {"big": "y" * 5000}]
    assert list(SpooledRows(rows)) == rows


def test_spooled_compiles_come_back_equal(report_of):
    report, out = report_of(log_of("training"))
    compiles = load_summary(json.loads((out / "summary.json").read_text())).compiles
    spooled = SpooledCompiles(compiles)
    assert list(spooled) == list(compiles) and spooled[-1] == compiles[-1]


# -- totals added up a batch at a time ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["training", "recompile_limit", "graph_break", "processes", "compiled_autograd", "failure"])
def test_totals_in_batches_are_each_totals_own_figure(monkeypatch, report_of, name):
    """The additive totals are added up per batch; each must equal the total computed over every
    compile at once (a total declared additive that is not would differ here)."""
    _, out = report_of(log_of(name))
    compiles = load_summary(json.loads((out / "summary.json").read_text())).compiles
    whole = {t.name: t.compute(compiles) for t in totals.TOTALS}
    for size in (1, 2, 5):
        monkeypatch.setattr(totals, "TOTALS_BATCH", size)
        assert totals.totals_of(compiles) == whole
        assert totals.totals_of(SpooledCompiles(compiles)) == whole
