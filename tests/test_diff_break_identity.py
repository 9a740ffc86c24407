"""`tlparse-py diff` pairs graph breaks, and the resume functions after them, by the break's identity.

On real traces of one program before and after a pull request (tlparse_py/harness/scenarios/
edit_program.py): edit_itembreak breaks `prepare` on `.item()`; edit_otherbreak replaces that by a
`print()` break one line down. They are different breaks, of different kinds: the base's break and
its resume function are gone, the new ones new; nothing of them is "moved" or "edited". edit_shifted
moves the unchanged break of edit_base four lines down: that one, and its resume function, moved.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from click.testing import CliRunner

from tlparse_py.analysis.pairing import Frame, pair_frames
from tlparse_py.cli import main

TRACES = Path(__file__).parent / "fixtures" / "traces"


def diff(tmp_path: Path, base: str, new: str) -> tuple[dict, str]:
    out = tmp_path / f"{base}-{new}"
    result = CliRunner().invoke(main, ["diff", str(TRACES / base), str(TRACES / new), "-o", str(out), "--no-browser",
                                       "--markdown", str(tmp_path / f"{base}-{new}.md")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads((out / "diff.json").read_text()), (tmp_path / f"{base}-{new}.md").read_text()


def log_breaks(scenario: str) -> set[tuple[int, str]]:
    """Independently of the tool: (user line, registry id) of every graph break the log records."""
    text = "".join((gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()).decode("utf-8", "replace")
                   for p in sorted((TRACES / scenario).glob("dedicated_log*")))
    found = re.findall(r"Graph break in user code at \S+/model\.py:(\d+)\n.*?/gb/(gb\d+)\.html", text, flags=re.S)
    return {(int(line), gb.upper()) for line, gb in found}


def line_of(location: str | None) -> int:
    assert location is not None
    return int(location.rsplit(":", 1)[1])


def test_the_logs_hold_an_item_break_replaced_by_a_print_break_one_line_down():
    assert log_breaks("edit_itembreak") == {(10, "GB0124")}  # Tensor.item() with capture_scalar_outputs=False
    assert log_breaks("edit_otherbreak") == {(11, "GB0059")}  # Failed to trace builtin operator (print)


def test_a_break_of_another_kind_one_line_down_is_gone_plus_new_never_moved(tmp_path):
    data, md = diff(tmp_path, "edit_itembreak", "edit_otherbreak")
    breaks = data["comparison"]["graph_breaks"]
    assert [(line_of(g["user_location"]), g["registry_id"]) for g in breaks["gone"]] == [(10, "GB0124")]
    assert [(line_of(g["user_location"]), g["registry_id"]) for g in breaks["new"]] == [(11, "GB0059")]
    assert breaks["moved"] == [] and breaks["changed"] == []
    assert all(g["moved"] is None for kind in breaks.values() for g in kind)
    assert data["metrics"]["new_graph_breaks"] == 1
    assert "new graph break GB0059" in md and "10 → 11" not in md


def test_the_resume_function_after_another_kind_of_break_is_gone_plus_new(tmp_path):
    data, _ = diff(tmp_path, "edit_itembreak", "edit_otherbreak")
    frames = {(f["base_frame"] if f["presence"] == "gone" else f["frame"]): f for f in data["comparison"]["frames"]}
    gone, new = frames["torch_dynamo_resume_in_prepare_at_10"], frames["torch_dynamo_resume_in_prepare_at_11"]
    assert (gone["presence"], gone["pairing"], gone["moved"]) == ("gone", "gone", None)
    assert (new["presence"], new["pairing"], new["moved"]) == ("new", "new", None)
    # the frames around them still pair: nothing else of the program changed but the line numbers below the edit
    paired = {(f["base_frame"], f["frame"]): (f["pairing"], f["moved"]) for f in data["comparison"]["frames"] if f["presence"] == "both"}
    assert paired == {
        ("step", "step"): ("moved", {"from": 19, "to": 20}),
        ("prepare", "prepare"): ("same", None),
        # step resumes after its call to prepare, whose break the log places in prepare: it pairs by its function
        ("torch_dynamo_resume_in_step_at_20", "torch_dynamo_resume_in_step_at_21"): ("moved", {"from": 20, "to": 21}),
    }


def test_a_break_that_only_moved_and_its_resume_function_stay_moved(tmp_path):
    data, _ = diff(tmp_path, "edit_base", "edit_shifted")
    assert log_breaks("edit_base") == {(10, "GB0025")} and log_breaks("edit_shifted") == {(14, "GB0025")}
    breaks = data["comparison"]["graph_breaks"]
    assert breaks["new"] == [] and breaks["gone"] == []
    assert [(g["registry_id"], g["moved"]) for g in breaks["moved"]] == [("GB0025", {"from": 10, "to": 14})]
    [resume] = [f for f in data["comparison"]["frames"] if f["base_frame"] == "torch_dynamo_resume_in_prepare_at_10"]
    assert (resume["frame"], resume["pairing"], resume["moved"]) == ("torch_dynamo_resume_in_prepare_at_14", "moved", {"from": 10, "to": 14})


def frame(name: str, line: int, after: str = "", anchor: str = "") -> Frame:
    return Frame("model.py", name, line, anchor, after)


def test_a_resume_function_renamed_in_place_pairs_only_after_the_same_kind_of_break():
    """Between frames that kept their function, a block replaced one for one is "renamed", but never
    a resume function for one after another kind of break."""
    def pairings(after_new: str) -> list[tuple[str, str | None, str]]:
        base = [frame("step", 19), frame("resume in prepare", 10, "GB0124", "scale = y.sum().item()"), frame("head", 14)]
        new = [frame("step", 19), frame("resume in prepare_input", 10, after_new, "scale = y.sum().item()"), frame("head", 14)]
        return [(p.base.name if p.base else "", p.new.name if p.new else None, p.how) for p in pair_frames(base, new, {})]

    assert pairings("GB0124") == [("step", "step", "same"), ("resume in prepare", "resume in prepare_input", "renamed"), ("head", "head", "same")]
    assert pairings("GB0059") == [("step", "step", "same"), ("resume in prepare", None, "gone"), ("head", "head", "same"),
                                  ("", "resume in prepare_input", "new")]
