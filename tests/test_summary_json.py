"""summary.json written in pieces is byte for byte the summary's dict dumped whole.

The writer (`report.summary_json`) dumps the dict without its lists of one entry per compile, then
splices in each list a batch at a time: these tests hold it to the whole dump on real traces, with
batches of every size (1, 2, the last one short), with no compile, and with no timeline (a summary
loaded back from an older summary.json).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from msgspec.structs import replace

from tlparse_py.analysis.compiles import summary_dict
from tlparse_py.pipeline import analyze_logs
from tlparse_py.report import summary_json as pieces

TRACES = Path(__file__).parent / "fixtures" / "traces"
WHOLE = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS


def logs_of(name: str) -> list[Path]:
    return sorted(p for p in (TRACES / name).iterdir() if p.name.startswith("dedicated_log"))


@pytest.fixture(scope="module", params=["recompile", "graph_break", "failure", "many_small", "processes", "export"])
def summary(request):
    return analyze_logs(logs_of(request.param)).summary()


@pytest.mark.parametrize("batch", [1, 2, 7, pieces.BATCH])
def test_the_pieces_are_the_whole_dump(summary, batch, monkeypatch):
    monkeypatch.setattr(pieces, "BATCH", batch)
    assert summary.compiles and summary.timeline
    assert b"".join(pieces.summary_json(summary)) == orjson.dumps(summary_dict(summary), option=WHOLE)


def test_no_compile_and_no_timeline(summary):
    for changed in (replace(summary, compiles=[], timeline=[]), replace(summary, timeline=None),
                    replace(summary, compiles=[], timeline=None)):
        written = b"".join(pieces.summary_json(changed))
        assert written == orjson.dumps(summary_dict(changed), option=WHOLE)
        assert orjson.loads(written)["compiles"] == [orjson.loads(orjson.dumps(c.to_dict())) for c in changed.compiles]


def test_no_piece_holds_every_compile(summary, monkeypatch):
    monkeypatch.setattr(pieces, "BATCH", 2)
    written = list(pieces.summary_json(summary))
    assert max(piece.count(b'"url"') for piece in written) <= 2 * max(1, max(len(c.to_dict().get("graph_breaks") or []) for c in summary.compiles) + 1)
