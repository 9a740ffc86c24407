"""torch's graph breaks: torch's own `torch._dynamo.graph_break()` inside torch, counted apart from the user's.

The optimizer_step fixture compiles `opt.step()`: torch's `_use_grad_for_differentiable`
(torch/optim/optimizer.py:79) calls `torch._dynamo.graph_break()` on purpose, under the user's `step`
([0/0]) and the optimizer's `wrapper` ([1/0]). The raw facts are read from the fixture text with
test_new_scenarios' parser; every view must show those two breaks as torch's, with their location,
count them in `torch_graph_breaks` and not in `graph_breaks`, and give no "Remove the call" advice.
A break inside torch for another reason (DDP's) and the user's own graph_break() stay the user's.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from click.testing import CliRunner

import tlparse_py
from conftest import TRACES, read_json
from test_new_scenarios import artifacts, logs, parse
from tlparse_py.analysis.summary import GraphBreak, is_torch_break
from tlparse_py.cli import main
from tlparse_py.notebook import summary_view

OPTIMIZER_LINE = "/site-packages/torch/optim/optimizer.py:79"
HINT = "Remove the `torch._dynamo.graph_break()` call."
CALL = "Call to `torch._dynamo.graph_break()`"
OWNER = "torch's own break (optimizer.py:79)"


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def report(tmp_path: Path, *args: object) -> Path:
    out = tmp_path / "out"
    result = run(TRACES / "optimizer_step", "-o", out, "--no-browser", *args)
    assert result.exit_code == 0, result.output
    return out


def test_the_log_holds_torchs_own_break_twice():
    (log,) = logs("optimizer_step")
    breaks = artifacts(parse(log), "dynamo_graph_break_reason")
    assert [b.cid for b in breaks] == ["[0/0]", "[1/0]"]
    for brk in breaks:
        assert brk.payload.startswith(f"Graph break in user code at {OPTIMIZER_LINE}\n")
        assert f"\n{CALL}\n" in brk.payload and HINT in brk.payload


def test_summary_json_counts_them_apart(tmp_path):
    summary = read_json(report(tmp_path) / "summary.json")
    totals = summary["totals"]
    assert (totals["graph_breaks"], totals["torch_graph_breaks"], totals["compiles"], totals["restarts"]) == (0, 2, 4, 2)
    by_id = {c["id"]: c for c in summary["compiles"]}
    assert [(c["id"], c["frame"], c["status"]) for c in summary["compiles"]] == [
        ("[0/0]", "step", "break"), ("[1/0]", "wrapper", "break"), ("[2/0]", "step", "ok"),
        ("[3/0]", "torch_dynamo_resume_in_wrapper_at_530", "empty")]
    for compile_id in ("[0/0]", "[1/0]"):
        (brk,) = by_id[compile_id]["graph_breaks"]
        assert brk["torch_break"] is True and brk["reason"] == CALL and brk["registry_id"] == "GB0025"
        assert brk["library_location"] == OPTIMIZER_LINE
        assert brk["user_location"] == "/work/scenarios/optimizer_step.py:29" and brk["user_source"] == "opt.step()"
        assert brk["hints"] == [HINT]  # torch's words, kept as logged: the views do not offer them to the user
    assert tlparse_py.analyze(TRACES / "optimizer_step").to_dict()["totals"] == totals


def test_the_index_shows_them_as_torchs(tmp_path):
    page = (report(tmp_path) / "index.html").read_text(encoding="utf-8")
    cards = dict((html.unescape(label), n) for n, label in
                 re.findall(r'<span class="n">(.*?)</span>(?:</a>)?<span class="t">(.*?)</span>', page))
    assert cards["graph breaks (0 distinct)"] == "0"
    assert cards["torch's graph breaks (by design)"] == "2"
    section = html.unescape(re.sub(r"<[^>]+>", "", re.search(r'<h2 id="graph-breaks">.*?(?=<h2 )', page, re.S)[0]))
    assert "No graph breaks were logged." not in section
    assert OWNER in section and "inside torch: " + OPTIMIZER_LINE in section and "optimizer_step.py:29" in section
    assert "Hint:" not in section and "User-inserted" not in section


def test_the_compile_page_shows_the_break_as_torchs(tmp_path):
    page = html.unescape((report(tmp_path) / "-_0_0_1" / "index.html").read_text(encoding="utf-8"))
    section = re.search(r'<details class="section" id="graph-breaks".*?</details>', page, re.S)[0]
    table = re.sub(r"<[^>]+>", "", section[section.index("<table>"):])
    assert OWNER in table and "on purpose" in table and "Hint:" not in table


def test_summary_md_shows_them_apart_without_the_hint(tmp_path):
    text = (report(tmp_path) / "summary.md").read_text(encoding="utf-8").replace("\\", "")
    lines = text.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("| compiles |"))
    row = dict(zip((h.strip() for h in lines[at].strip("|").split("|")), (c.strip() for c in lines[at + 2].strip("|").split("|"))))
    assert (row["graph breaks"], row["torch's graph breaks"]) == ("0", "2")
    (gb,) = [l for l in lines if l.startswith("| 2 | GB0025")]
    assert OWNER in gb and "(inside torch)" in gb and HINT not in gb


def test_the_gates(tmp_path):
    assert run(TRACES / "optimizer_step", "-o", tmp_path / "a", "--no-browser", "--fail-on", "graph_breaks>0").exit_code == 0
    held = run(TRACES / "optimizer_step", "-o", tmp_path / "b", "--no-browser", "--fail-on", "torch_graph_breaks>0")
    assert held.exit_code == 3
    assert (f"--fail-on torch_graph_breaks>0: torch_graph_breaks is 2 (compiles: [0/0] ({OWNER}), [1/0] ({OWNER}))"
            in held.stderr)


def test_over_ranks_each_rank_has_its_own(tmp_path):
    folder = tmp_path / "ranks"
    folder.mkdir()
    (log,) = logs("optimizer_step")
    for rank in (0, 1):
        (folder / f"dedicated_log_torch_trace_rank_{rank}_x.log.gz").write_bytes(log.read_bytes())
    result = run(folder, "-o", tmp_path / "out", "--no-browser", "--fail-on", "graph_breaks>0,torch_graph_breaks>=2")
    assert result.exit_code == 3
    assert "--fail-on torch_graph_breaks>=2: torch_graph_breaks is 2 on the rank with the most" in result.stderr
    assert "graph_breaks>0:" not in result.stderr
    landing = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8").replace("\\", "")
    head, _, *rows = [l for l in landing.splitlines() if l.startswith("| ")]
    columns = [h.strip() for h in head.strip("|").split("|")]
    every = dict(zip(columns, (c.strip() for c in rows[-1].strip("|").split("|"))))
    assert (every["graph breaks"], every["torch's graph breaks"]) == ("0 on every rank", "2 on every rank")


def test_the_diff_does_not_gate_on_torchs_breaks(tmp_path):
    out, md = tmp_path / "diff", tmp_path / "diff.md"
    result = run("diff", TRACES / "inference", TRACES / "optimizer_step", "-o", out, "--markdown", md,
                 "--fail-on", "new_graph_breaks>0")
    assert result.exit_code == 0, result.output
    comparison = read_json(out / "diff.json")["comparison"]
    (row,) = comparison["graph_breaks"]["new"]
    assert row["torch_break"] is True and row["count"]["new"] == 2 and row["compiles"] == ["[0/0]", "[1/0]"]
    assert comparison["totals"]["torch_graph_breaks"] == {"base": 0, "new": 2, "delta": 2}
    assert comparison["totals"]["graph_breaks"] == {"base": 0, "new": 0, "delta": 0}
    text = md.read_text(encoding="utf-8").replace("\\", "")
    assert "**New graph breaks (0, and 1 of torch's own)**" in text and "new torch's own graph break GB0025" in text
    assert HINT not in text
    page = html.unescape((out / "index.html").read_text(encoding="utf-8"))
    assert "torch's own break" in page and HINT not in page


def test_the_notebook_summary_gives_no_advice():
    (row,) = summary_view(tlparse_py.analyze(TRACES / "optimizer_step"))["graph_breaks"]
    assert (row["count"], row["owner"], row["hint"], row["inside"]) == (2, OWNER, "", "torch")


def test_breaks_inside_torch_for_another_reason_and_the_users_own_call_stay_the_users():
    # graph_break.py's helper calls torch._dynamo.graph_break() itself
    user_call = tlparse_py.analyze(TRACES / "graph_break").to_dict()["totals"]
    assert (user_call["graph_breaks"], user_call["torch_graph_breaks"]) == (3, 0)
    # DDP's break inside torch/nn/parallel/distributed.py (and in contextlib): the user's code meets what Dynamo cannot trace
    (rank_0, _) = sorted((TRACES / "distributed").glob("*.log.gz"))
    ddp = tlparse_py.analyze(rank_0).to_dict()
    assert [(b["library_location"], b["torch_break"]) for c in ddp["compiles"] for b in c["graph_breaks"]] == [
        ("/site-packages/torch/nn/parallel/distributed.py:1757", False), ("/stdlib/contextlib.py:105", False),
        ("/stdlib/contextlib.py:105", False)]
    assert (ddp["totals"]["graph_breaks"], ddp["totals"]["torch_graph_breaks"]) == (3, 0)
    # the user's own graph_break(), in their code or in another library
    assert not is_torch_break(CALL, "GB0025", "")
    assert not is_torch_break(CALL, "GB0025", "/site-packages/accelerate/utils.py:12")
    # another registry id under the same headline is not torch's call
    assert not is_torch_break(CALL, "GB0099", OPTIMIZER_LINE)
    assert is_torch_break(CALL, "", OPTIMIZER_LINE)  # a log without registry ids (older torch)
    brk = GraphBreak(CALL, "/work/train.py:9", registry_id="GB0025", hints=(HINT,), library_location=OPTIMIZER_LINE)
    assert (brk.torch_break, brk.owner, brk.advice) == (True, OWNER, ())
