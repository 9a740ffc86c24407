"""Library frames: a compile Dynamo started in torch's, the standard library's or a package's code is
located at the user's line that led into it, with the library frame kept beside it, in summary.json,
the index, the compile page, summary.md and the diff; read off real fixture traces (`torchrun_ddp`,
`distributed`: contextlib's frames around DistributedDataParallel's forward; `optimizer_step`: a
compiled `opt.step()`, whose optimizer `wrapper`, `step` and resume function are torch's)."""

from __future__ import annotations

import gzip
import html
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TRACES, read_json
from tlparse_py.analysis.compiles import _follow
from tlparse_py.analysis.stacks import library_of, library_path
from tlparse_py.analysis.summary import UNKNOWN_TIME, CompileSummary, LibraryFrame, Summary
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.cli import main
from tlparse_py.model import CompileId

DDP_FILE = "/site-packages/torch/nn/parallel/distributed.py"
OPTIMIZER = "/site-packages/torch/optim/optimizer.py"


def library(frame: str, location: str, kind: str, caller: tuple[str, str] | None = None) -> dict:
    """summary.json's `library_frame` of a library frame that is not torch's wrapper."""
    return {"frame": frame, "location": location, "kind": kind, "module": None,
            "caller_frame": caller[0] if caller else None, "caller_location": caller[1] if caller else None}


def contextlib_frames(call_line: str) -> list[tuple[str, str, dict]]:
    """What DDP's forward made Dynamo compile in contextlib (its `_inside_ddp_forward()` context manager),
    each at the user's line that called the DDP model. Before [1/0]'s `helper` its stack holds only torch's
    machinery for calling a module (the frames of DDP's forward are not in it): no caller is named."""
    return [
        ("helper", call_line, library("helper", "/stdlib/contextlib.py:299", "stdlib")),
        ("__init__", call_line, library("__init__", "/stdlib/contextlib.py:104", "stdlib", ("forward", f"{DDP_FILE}:1890"))),
        ("torch_dynamo_resume_in___init___at_105", call_line,
         library("torch_dynamo_resume_in___init___at_105", "/stdlib/contextlib.py:105", "stdlib", ("_run_ddp_forward", f"{DDP_FILE}:1714"))),
    ]


def the_log(scenario: str, marker: str = "") -> Path:
    (log,) = [p for p in (TRACES / scenario).iterdir() if p.name.startswith("dedicated_log") and marker in p.name]
    return log


def compiles_of(out: Path) -> dict[str, dict]:
    return {c["id"]: c for c in read_json(out / "summary.json")["compiles"]}


def located(compiles: dict[str, dict], *labels: str) -> list[tuple[str, str, dict | None]]:
    return [(compiles[label]["frame"], compiles[label]["user_location"], compiles[label]["library_frame"]) for label in labels]


def page_text(path: Path) -> str:
    """A page's text: tags dropped, entities read, white space folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8"))).split())


def write(log: Path, out: Path) -> Path:
    result = CliRunner().invoke(main, [str(log), "-o", str(out), "--no-browser"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def torchrun_ddp(tmp_path_factory) -> Path:
    return write(TRACES / "torchrun_ddp", tmp_path_factory.mktemp("library") / "torchrun_ddp")


@pytest.fixture(scope="module")
def optimizer_step(tmp_path_factory) -> Path:
    return write(TRACES / "optimizer_step", tmp_path_factory.mktemp("library") / "optimizer_step")


@pytest.mark.parametrize("rank", [0, 1])
def test_ddp_contextlib_frames_are_at_the_model_call(torchrun_ddp, rank):
    compiles = compiles_of(torchrun_ddp / f"rank_{rank}")
    assert located(compiles, "[1/0]", "[2/0]", "[3/0]") == contextlib_frames("/work/scenarios/torchrun_job.py:106")
    assert compiles["[0/0]"]["library_frame"]["kind"] == "torch_wrapper"  # DistributedDataParallel.forward, via torch's inner
    assert located(compiles, "[4/0]") == [("forward", "/work/scenarios/torchrun_job.py:68", None)]  # the user's own model


@pytest.mark.parametrize("rank", [0, 1])
def test_ddp_contextlib_frames_in_the_distributed_fixture(report_of, rank):
    _, out = report_of(the_log("distributed", f"rank_{rank}_"))
    compiles = compiles_of(out)
    assert located(compiles, "[1/0]", "[2/0]", "[3/0]") == contextlib_frames("/work/scenarios/distributed.py:77")


def test_a_compiled_optimizer_step_is_at_the_user_lines(optimizer_step):
    """The optimizer's frames are torch's: located at the user's line that led there (`step()` in main, for
    the `wrapper` and its resume function; `opt.step()` in the user's compiled step, for SGD's `step`)."""
    compiles = compiles_of(optimizer_step)
    assert located(compiles, "[0/0]", "[1/0]", "[2/0]", "[3/0]") == [
        ("step", "/work/scenarios/optimizer_step.py:27", None),  # the user's own compiled function
        ("wrapper", "/work/scenarios/optimizer_step.py:34", library("wrapper", f"{OPTIMIZER}:509", "torch")),
        ("step", "/work/scenarios/optimizer_step.py:29", library("step", "/site-packages/torch/optim/sgd.py:105", "torch")),
        ("torch_dynamo_resume_in_wrapper_at_530", "/work/scenarios/optimizer_step.py:34",
         library("torch_dynamo_resume_in_wrapper_at_530", f"{OPTIMIZER}:530", "torch")),
    ]


def test_summary_json_reads_the_library_frame_back(torchrun_ddp):
    loaded = load_summary(read_json(torchrun_ddp / "rank_1" / "summary.json"))
    assert isinstance(loaded, Summary)
    init = next(c for c in loaded.compiles if c.id == "[2/0]")
    assert init.library_frame == LibraryFrame("__init__", "/stdlib/contextlib.py:104", "stdlib",
                                              caller_frame="forward", caller_location=f"{DDP_FILE}:1890")
    assert init.via == "inside the standard library: contextlib.py:104, under torch's forward (torch/nn/parallel/distributed.py:1890)"
    assert init.inside == "the standard library"


def test_index_compiles_table_names_the_library_frame(torchrun_ddp):
    text = page_text(torchrun_ddp / "rank_1" / "index.html")
    assert ("helper called at /work/scenarios/torchrun_job.py:106 , inside the standard library: contextlib.py:299 125.2 ms") in text
    assert ("torch_dynamo_resume_in___init___at_105 called at /work/scenarios/torchrun_job.py:106 , inside the standard library: "
            "contextlib.py:105, under torch's _run_ddp_forward (torch/nn/parallel/distributed.py:1714) 11.2 ms") in text
    assert "/stdlib/contextlib.py:299 in helper" in text  # the stack trie: the stacks as logged


def test_compile_page_says_where_the_user_code_led(optimizer_step):
    text = page_text(optimizer_step / "-_1_0_0" / "index.html")
    assert ("Compiled wrapper , called at /work/scenarios/optimizer_step.py:34 : inside torch: torch/optim/optimizer.py:509. "
            "Dynamo started this compile in library code, not yours") in text


def test_summary_md_marks_library_frames(optimizer_step):
    md = (optimizer_step / "summary.md").read_text(encoding="utf-8")
    rows = [line for line in md.splitlines() if line.startswith("| [\\[")]
    frames = {row.split(" | ")[0]: row.split(" | ")[1] for row in rows}
    assert frames == {"| [\\[0/0\\]](-_0_0_1/index.html)": "step",
                      "| [\\[1/0\\]](-_1_0_1/index.html)": "wrapper (inside torch)",
                      "| [\\[2/0\\]](-_2_0_0/index.html)": "step (inside torch)",
                      "| [\\[3/0\\]](-_3_0_0/index.html)": "torch\\_dynamo\\_resume\\_in\\_wrapper\\_at\\_530 (inside torch)"}


def test_a_diff_pairs_library_frames_and_names_their_library(tmp_path, torchrun_ddp):
    out = tmp_path / "diff"
    result = CliRunner().invoke(main, ["diff", str(torchrun_ddp / "rank_0"), str(torchrun_ddp / "rank_1"), "-o", str(out), "--no-browser"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = read_json(out / "diff.json")["comparison"]["frames"]
    assert [(r["frame"], r["user_location"], r["inside"], r["base_frame"], r["pairing"]) for r in rows[:4]] == [
        ("DistributedDataParallel.forward", "/work/scenarios/torchrun_job.py:106", "", "DistributedDataParallel.forward", "same"),
        ("helper", "/work/scenarios/torchrun_job.py:106", "the standard library", "helper", "same"),
        ("__init__", "/work/scenarios/torchrun_job.py:106", "the standard library", "__init__", "same"),
        ("torch_dynamo_resume_in___init___at_105", "/work/scenarios/torchrun_job.py:106", "the standard library",
         "torch_dynamo_resume_in___init___at_105", "same"),
    ]
    # the page names the user's line relative to the run's root, as every view of the diff does (diff.json keeps it as logged)
    assert [r["where"] for r in rows[:4]] == ["torchrun_job.py:106"] * 4
    assert "helper (inside the standard library) torchrun_job.py:106" in page_text(out / "index.html")


def without_user_frames(log: Path, out: Path) -> Path:
    """The log with the user's frames taken out of the optimizer `wrapper`'s start stack ([1/0])."""
    text = gzip.open(log, "rt", encoding="utf-8").read()
    user = '{"line": 40, "name": "<module>", "filename": 1, "loc": "main()"}, {"line": 34, "name": "main", "filename": 1, "loc": "step()"}, '
    marker = user + '{"line": 509, "name": "wrapper", "filename": 2}'
    assert text.count(marker) == 1
    out.write_text(text.replace(marker, '{"line": 509, "name": "wrapper", "filename": 2}'), encoding="utf-8")
    return out


def test_a_stack_without_user_code_keeps_the_library_line(report_of, tmp_path):
    _, out = report_of(without_user_frames(the_log("optimizer_step"), tmp_path / "dedicated_log_torch_trace_x.log"))
    compiles = compiles_of(out)
    assert located(compiles, "[1/0]") == [("wrapper", f"{OPTIMIZER}:509", None)]  # never a line guessed
    assert located(compiles, "[3/0]")[0][1] == "/work/scenarios/optimizer_step.py:34"  # its resume function's stack still names it


def test_a_compile_without_a_stack_keeps_the_library_line_not_another_call():
    """The compile over the recompile limit logs no stack: after a compile of a library frame it keeps the
    frame's name and the library's line, never the user line of the compile before it (one library
    function is called from many places)."""
    def compile_(frame_compile_id: int, **fields) -> CompileSummary:
        return CompileSummary(key=CompileId(None, 1, frame_compile_id, 0), id=f"[1/{frame_compile_id}]", url=None, generation=0,
                              attempts=[f"[1/{frame_compile_id}]"], status="limit", compile_time_s=UNKNOWN_TIME, **fields)

    helper = LibraryFrame("helper", "/stdlib/contextlib.py:299", "stdlib")
    before = compile_(0, frame="helper", user_location="/work/scenarios/torchrun_job.py:106", library_frame=helper)
    over = compile_(1, frame=None, user_location=None)
    _follow(over, before)
    assert (over.frame, over.user_location, over.library_frame) == ("helper", "/stdlib/contextlib.py:299", None)


@pytest.mark.parametrize(("path", "kind", "inside"), [
    ("/usr/lib/python3.11/contextlib.py", "stdlib", "contextlib.py"),
    ("/opt/conda/lib/python3.12/concurrent/futures/thread.py", "stdlib", "concurrent/futures/thread.py"),
    ("/work/venv/lib/python3.11/site-packages/torch/optim/adam.py", "torch", "torch/optim/adam.py"),
    ("/usr/lib/python3/dist-packages/numpy/core/numeric.py", "package", "numpy/core/numeric.py"),
    ("/home/me/pytorch/torch/nn/modules/module.py", "torch", "torch/nn/modules/module.py"),
    ("/site-packages/torchvision/models/resnet.py", "package", "torchvision/models/resnet.py"),
    ("/work/scenarios/torchrun_job.py", None, "/work/scenarios/torchrun_job.py"),
    ("<eval_with_key>.7", None, "<eval_with_key>.7"),
])
def test_whose_code_a_file_is(path, kind, inside):
    assert (library_of(path), library_path(path)) == (kind, inside)
