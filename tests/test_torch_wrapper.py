"""torch's wrapper: `torch.compile(model)` of a model whose forward is torch's own compiles through
`inner` (torch/_dynamo/external_utils.py). Its compiles are named after the model's forward, at the
user's line that called the model, with torch's frame kept beside, in summary.json, the index, the
compile page, search and diff; read off real fixture traces (`transformer`: a compiled
nn.Sequential that recompiles; `distributed`: a compiled DistributedDataParallel)."""

from __future__ import annotations

import gzip
import html
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TRACES, read_json
from tlparse_py.analysis.compiles import _follow
from tlparse_py.analysis.summary import UNKNOWN_TIME, CompileSummary, LibraryFrame, Summary
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.cli import main
from tlparse_py.model import CompileId

WRAPPER_AT = "/site-packages/torch/_dynamo/external_utils.py:67"
SEQUENTIAL = LibraryFrame("inner", WRAPPER_AT, "torch_wrapper", "torch.nn.modules.container.Sequential")
VIA = "via torch's inner at torch/_dynamo/external_utils.py:67"


def wrapper_dict(module: str | None) -> dict:
    """summary.json's `library_frame` of a compile that started in torch's wrapper."""
    return {"frame": "inner", "location": WRAPPER_AT, "kind": "torch_wrapper", "module": module, "caller_frame": None, "caller_location": None}


def the_log(scenario: str, marker: str = "") -> Path:
    (log,) = [p for p in (TRACES / scenario).iterdir() if p.name.startswith("dedicated_log") and marker in p.name]
    return log


def compiles_of(out: Path) -> dict[str, dict]:
    return {c["id"]: c for c in read_json(out / "summary.json")["compiles"]}


def page_text(path: Path) -> str:
    """A page's text: tags dropped, entities read, white space folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8"))).split())


@pytest.fixture(scope="module")
def transformer(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wrapper") / "transformer"
    result = CliRunner().invoke(main, [str(TRACES / "transformer"), "-o", str(out), "--no-browser"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def test_summary_names_the_model_at_the_call_line(transformer):
    compiles = compiles_of(transformer)
    for label in ("[0/0]", "[0/1]"):
        assert compiles[label]["frame"] == "Sequential.forward"
        assert compiles[label]["user_location"] == "/work/scenarios/transformer.py:39"  # loss = compiled(x).pow(2).mean()
        assert compiles[label]["library_frame"] == wrapper_dict("torch.nn.modules.container.Sequential")


def test_summary_json_reads_the_wrapper_back(transformer):
    loaded = load_summary(read_json(transformer / "summary.json"))
    assert isinstance(loaded, Summary)
    assert [(c.frame, c.library_frame) for c in loaded.compiles] == [("Sequential.forward", SEQUENTIAL)] * 2
    assert loaded.compiles[1].via == VIA


def test_index_compiles_table_and_recompile_list(transformer):
    text = page_text(transformer / "index.html")
    row = f"Sequential.forward called at /work/scenarios/transformer.py:39 , {VIA}"
    assert text.count(row) == 2  # both compiles' rows of the compiles table
    assert f"Frame 0 Sequential.forward ({VIA}) compiled 2 times: [0/0] [0/1]" in text
    assert f"{WRAPPER_AT} in inner" in text  # the stack trie: the stacks as logged


def test_compile_page_says_what_it_compiled_and_keeps_torch_frame(transformer):
    text = page_text(transformer / "-_0_1_0" / "index.html")
    assert (f"Compiled Sequential.forward , called at /work/scenarios/transformer.py:39 : {VIA}. torch compiles a model whose "
            "forward is its own") in text
    assert "the model is the one this compile's guards name for the wrapper's fn : torch.nn.modules.container.Sequential ." in text
    assert f"Frame inner at {WRAPPER_AT}" in text  # the metrics, as torch logged them


def test_a_diff_row_names_the_model(tmp_path, transformer):
    out = tmp_path / "diff"
    result = CliRunner().invoke(main, ["diff", str(transformer), str(TRACES / "transformer"), "-o", str(out), "--no-browser"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (row,) = read_json(out / "diff.json")["comparison"]["frames"]
    assert (row["frame"], row["user_location"], row["base_frame"], row["base_user_location"], row["pairing"]) == (
        "Sequential.forward", "/work/scenarios/transformer.py:39", "Sequential.forward", "/work/scenarios/transformer.py:39", "same")


@pytest.mark.parametrize("rank", [0, 1])
def test_ddp_is_named_at_the_call_line(report_of, rank):
    _, out = report_of(the_log("distributed", f"rank_{rank}_"))
    first = compiles_of(out)["[0/0]"]
    assert (first["frame"], first["user_location"]) == ("DistributedDataParallel.forward", "/work/scenarios/distributed.py:77")
    assert first["library_frame"] == wrapper_dict("torch.nn.parallel.distributed.DistributedDataParallel")
    # DDP's own frames Dynamo compiled (contextlib's, around its forward) are library frames, not torch's
    # wrapper: not named after the model (tests/test_library_frames.py)


def without_guards_of(log: Path, frame_compile_id: int, out: Path) -> Path:
    """The log without the installed guards of one compile of frame 0 (as for a compile that failed before
    installing them): the record's line and its payload lines after it."""
    kept, skipping = [], False
    marker = f'"dynamo_cpp_guards_str": {{}}, "frame_id": 0, "frame_compile_id": {frame_compile_id}, '
    with gzip.open(log, "rt", encoding="utf-8") as lines:
        for line in lines:
            if skipping and line.startswith("\t"):
                continue
            skipping = marker in line
            if not skipping:
                kept.append(line)
    assert len(kept) < sum(1 for _ in gzip.open(log, "rt", encoding="utf-8"))
    out.write_text("".join(kept), encoding="utf-8")
    return out


def test_without_its_guards_a_compile_keeps_torch_name_at_the_call_line(report_of, tmp_path):
    _, out = report_of(without_guards_of(the_log("transformer"), 1, tmp_path / "dedicated_log_torch_trace_x.log"))
    compiles = compiles_of(out)
    assert compiles["[0/0]"]["frame"] == "Sequential.forward"  # its own guards name the model
    unknown = compiles["[0/1]"]  # never the class of another compile of the wrapper: it serves every model
    assert (unknown["frame"], unknown["user_location"]) == ("inner", "/work/scenarios/transformer.py:39")
    assert unknown["library_frame"] == wrapper_dict(None)
    text = page_text(out / "index.html")
    assert ("inner called at /work/scenarios/transformer.py:39 , torch's wrapper inner at torch/_dynamo/external_utils.py:67: "
            "the log does not name what it called") in text


def test_search_finds_the_model_and_torch_frame(transformer):
    entries = "".join(p.read_text(encoding="utf-8") for p in (transformer / "static" / "search").glob("index-*.js"))
    (compile_entry,) = re.findall(r'\["compile","Compile \[0/1\]","-_0_1_0/index.html",("(?:[^"\\]|\\.)*")\]', entries)
    assert json.loads(compile_entry).splitlines()[:4] == ["[0/1]", "Sequential.forward", "/work/scenarios/transformer.py:39", VIA]


def test_a_compile_without_a_stack_takes_no_model_from_the_wrapper_before_it():
    """The compile over the recompile limit logs no stack: after a compile of torch's wrapper it keeps
    torch's frame, never the model or call line of the compile before it (the wrapper serves every model)."""
    def compile_(frame_compile_id: int, **fields) -> CompileSummary:
        return CompileSummary(key=CompileId(None, 0, frame_compile_id, 0), id=f"[0/{frame_compile_id}]", url=None, generation=0,
                              attempts=[f"[0/{frame_compile_id}]"], status="limit", compile_time_s=UNKNOWN_TIME, **fields)

    before = compile_(0, frame="Sequential.forward", user_location="/work/scenarios/transformer.py:39", library_frame=SEQUENTIAL)
    over = compile_(1, frame=None, user_location=None)
    _follow(over, before)
    assert (over.frame, over.user_location, over.library_frame) == ("inner", None, LibraryFrame("inner", WRAPPER_AT, "torch_wrapper"))
    assert over.via == "torch's wrapper inner at torch/_dynamo/external_utils.py:67: the log does not name what it called"
