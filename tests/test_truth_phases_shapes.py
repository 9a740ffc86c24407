"""Issue 43, items 8-10: the phases of a compile that ran no Inductor, the symbols of dynamic inputs,
the names Dynamo made up in guards, the fix of a recompile limit reached on a Python int, and one rule
for a reason's headline.

Every expected value is computed here from the fixture's text with the raw-record helper of
test_new_scenarios (glog header, JSON envelope, payload lines) or `logs.envelopes_of`, never with
tlparse_py's reader. The report's compile pages, index, summary.json and summary.md must say the same.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

import tlparse_py
from conftest import read_json
from logs import cid, envelopes_of, line, metrics, start, write_log
from test_new_scenarios import Rec, artifacts, kind, logs, parse
from test_truth_round3 import run, text_of
from tlparse_py.units import format_seconds

PACKAGE = Path(tlparse_py.__file__).resolve().parent
# phase fixtures: (scenario, its log among the scenario's, by README order)
PHASE_LOGS = {"custom_backend": 0, "inference": 0, "tensorify_restart": 0, "train_warm": 1}
INDUCTOR_SPANS = {"inductor_compile", "compile_fx_inner", "fx_codegen_and_compile"}


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """A report of each phase fixture's log (train_warm: its warm process, whose AOTAutograd cache hits)."""
    root = tmp_path_factory.mktemp("phases")
    return {name: run(root, str(logs(name)[at]), name=name)[0] for name, at in PHASE_LOGS.items()}


def page_of(rec: Rec) -> str:
    """The compile page of a record's compile id: `-_1_0_0/index.html`."""
    env = rec.env
    return f"-_{env['frame_id']}_{env['frame_compile_id']}_{env.get('attempt') or 0}/index.html"


def span_names(recs: list[Rec]) -> dict[tuple[int, int], set[str]]:
    """(frame id, frame compile id) → the names of the chromium spans that compile opened."""
    names: dict[tuple[int, int], set[str]] = {}
    for rec in kind(recs, "chromium_event"):
        event = json.loads(rec.payload)
        if event.get("ph") != "B":
            continue
        said = (event.get("args") or {}).get("compile_id")
        if isinstance(said, str) and re.fullmatch(r"\d+/\d+", said):
            frame, compile_ = map(int, said.split("/"))
        elif rec.env.get("frame_id") is not None:
            frame, compile_ = rec.env["frame_id"], rec.env["frame_compile_id"]
        else:
            continue
        names.setdefault((frame, compile_), set()).add(event["name"])
    return names


def expected_phases(fields: dict, spans: set[str]) -> tuple[list[str], list[str]]:
    """(the phases of a compile's forward time, those that did not run), from what its metrics time and
    its spans show ran: Dynamo; the backend, AOTAutograd's only where AOTAutograd's span is there; then
    Inductor and code generation, only where timed or spanned."""
    ran, not_run = ["Dynamo"], []
    if fields["backend_compile_time_s"] is None and "backend_compile" not in spans:
        return ran, ["Backend", "Inductor", "Code generation"]
    if "create_aot_dispatcher_function" in spans:
        ran.append("AOTAutograd")
    elif any(name.startswith("AOTAutogradCache.") for name in spans):
        ran.append("AOTAutograd cache load")
    else:
        ran.append("Backend")
        not_run.append("AOTAutograd")
    for name, time, span in (("Inductor", "inductor_compile_time_s", INDUCTOR_SPANS), ("Code generation", "code_gen_time_s", {"code_gen"})):
        if fields[time] is None and not span & spans:
            return ran, not_run + (["Inductor", "Code generation"] if name == "Inductor" else ["Code generation"])
        ran.append(name)
    return ran, not_run


def caption(page: Path) -> str:
    """The text under a compile page's time bar."""
    html = page.read_text()
    return text_of_html(html[html.index("<figcaption>"): html.index("</figcaption>")])


def text_of_html(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


PHASE = re.compile(r"(Dynamo|AOTAutograd cache load|AOTAutograd|Backend|Inductor|Code generation) (\S+ m?s) \(\d+%\)")


# -- 8. the phases of a compile are what its log says ran --------------------------------------------


@pytest.mark.parametrize("scenario", list(PHASE_LOGS))
def test_phases_are_named_by_what_ran_and_the_rest_is_not_zero(reports, scenario):
    """Each compile page's time bar names the phases its metrics time or its chromium spans show, no
    other: a backend of the program's own is "Backend", never "AOTAutograd", and Inductor and code
    generation where they did not run are "not run", never "0.0 ms"."""
    recs = parse(logs(scenario)[PHASE_LOGS[scenario]])
    spans = span_names(recs)
    checked = 0
    for rec in kind(recs, "compilation_metrics"):
        fields = rec.body
        if not fields.get("entire_frame_compile_time_s"):
            continue
        ran, not_run = expected_phases(fields, spans.get((rec.env["frame_id"], rec.env["frame_compile_id"]), set()))
        shown = caption(reports[scenario] / page_of(rec))
        assert [name for name, _ in PHASE.findall(shown)] == ran, (rec, shown)
        assert (f"not run: {', '.join(not_run)}" in shown) == bool(not_run) and ("not run" in shown) == bool(not_run), (rec, shown)
        backend = fields["backend_compile_time_s"]
        if backend is not None:  # Dynamo's own time: the frame's less the backend's
            assert dict(PHASE.findall(shown))["Dynamo"] == format_seconds(fields["entire_frame_compile_time_s"] - backend)
        for absent in not_run:
            assert not re.search(rf"{absent} \S+ m?s", shown.split("not run")[0]), (rec, shown)
        checked += 1
    assert checked


def test_a_backend_of_the_programs_own_runs_neither_aotautograd_nor_inductor(reports):
    """custom_backend's `shift`: its spans hold `backend_compile` and no AOTAutograd or Inductor span,
    its metrics no Inductor time, so its backend time is the backend's."""
    recs = parse(logs("custom_backend")[0])
    first = next(r for r in kind(recs, "compilation_metrics") if r.body["co_name"] == "shift")
    spans = span_names(recs)[(first.env["frame_id"], first.env["frame_compile_id"])]
    assert "backend_compile" in spans and "create_aot_dispatcher_function" not in spans and not INDUCTOR_SPANS & spans
    assert first.body["inductor_compile_time_s"] is None and first.body["code_gen_time_s"] is None
    shown = caption(reports["custom_backend"] / page_of(first))
    backend = format_seconds(first.body["backend_compile_time_s"])
    assert f"Backend {backend}" in shown and "AOTAutograd" not in shown.split("not run")[0]
    assert "not run: AOTAutograd, Inductor, Code generation" in shown and "0.0 ms (0%)" not in shown


def test_a_phase_its_spans_show_but_no_time_is_unknown_not_zero():
    """A backend span with no backend time logged: the backend ran, for a time the log does not say,
    so Dynamo's own time is unknown too; the bar draws neither, the caption says "unknown"."""
    from tlparse_py.analysis import phases
    from tlparse_py.analysis.store import MetricsEntry
    from tlparse_py.model import CompileId
    from tlparse_py.report.views.compile import time_bar

    entry = MetricsEntry(CompileId(None, 0, 0, 0), "", {"entire_frame_compile_time_s": 1.0, "backend_compile_time_s": None})
    split = phases.time_split(entry, {"backend_compile"})
    assert split is not None and [(p.name, p.seconds) for p in split.phases] == [("Dynamo", None), ("Backend", None)]
    assert split.not_run == ("AOTAutograd", "Inductor", "Code generation")
    assert [(s["known"], s["width"]) for s in time_bar(split)["segments"]] == [(False, 0.0), (False, 0.0)]
    # without any span, a logged Inductor time is reached through AOTAutograd, as torch.compile does
    entry = MetricsEntry(CompileId(None, 0, 0, 0), "", {"entire_frame_compile_time_s": 2.0, "backend_compile_time_s": 1.5,
                                                         "inductor_compile_time_s": 1.0, "code_gen_time_s": None})
    split = phases.time_split(entry)
    assert [(p.name, p.seconds) for p in split.phases] == [("Dynamo", 0.5), ("AOTAutograd", 0.5), ("Inductor", 1.0)]
    assert split.not_run == ("Code generation",)


# -- 9. dynamic inputs, Dynamo's made-up names, the fix for an int --------------------------------


def test_a_marked_dynamic_input_shows_the_symbol_the_compile_knew(reports):
    """`total`'s input has dimension 0 marked dynamic: describe_tensor logs the sizes of the input it was
    traced with, create_symbol the symbol of `L['x'].size()[0]`. The input table shows the symbol."""
    recs = parse(logs("custom_backend")[0])
    tensor = next(r for r in kind(recs, "describe_tensor") if r.body.get("dynamo_dynamic_indices"))
    source = next(r.body["source"] for r in kind(recs, "describe_source")
                  if r.cid == tensor.cid and (r.body["describer_id"], r.body["id"]) == (tensor.body["describer_id"], tensor.body["id"]))
    symbols = {r.body["source"]: r.body["symbol"] for r in kind(recs, "create_symbol") if r.cid == tensor.cid}
    sizes = tensor.body["size"]
    shape = "[" + ", ".join(symbols.get(f"{source}.size()[{i}]", str(size)) for i, size in enumerate(sizes)) + "]"
    assert shape != json.dumps(sizes) and tensor.body["dynamo_dynamic_indices"] == [0]
    page = text_of(reports["custom_backend"] / page_of(tensor))
    assert f"{source} {shape} (traced with {json.dumps(sizes)} )" in page
    assert "marked dynamic: 0" in page
    # a static input is shown as logged, with no symbol and no note
    static = next(r for r in kind(recs, "describe_tensor") if r.cid != tensor.cid)
    assert "(traced with" not in text_of(reports["custom_backend"] / page_of(static))


def resume_guards(recs: list[Rec]) -> list[Rec]:
    return [r for r in kind(recs, "dynamo_cpp_guards_str") if "___stack0" in r.payload]


def test_a_guard_on_a_value_dynamo_handed_over_the_graph_break_is_explained(reports):
    """The resume function after the `.item()` break guards on `___stack0`, in its guards and (after
    another value) in its recompile reason: its page says what the name is, after which break, and the
    break's reason; the index's recompiles say it too."""
    recs = parse(logs("custom_backend")[0])
    guarded = resume_guards(recs)
    assert guarded
    brk = next(a for a in artifacts(recs, "dynamo_graph_break_reason"))
    reason_lines = [line for line in brk.payload.splitlines() if line.strip()]
    for rec in guarded:
        metrics_rec = next(r for r in kind(recs, "compilation_metrics") if r.cid == rec.cid)
        function, at = re.fullmatch(r"torch_dynamo_resume_in_(\w+?)_at_(\d+)", metrics_rec.body["co_name"]).groups()
        page = text_of(reports["custom_backend"] / page_of(rec))
        assert f"___stack0: not a variable of your program but a value Dynamo passed to the resume function after the graph break in {function} at line {at}" in page
        assert "Unsupported Tensor.item() call" in page and any("Unsupported Tensor.item() call" in l for l in reason_lines)
    recompiled = [a for a in artifacts(recs, "recompile_reasons") if "___stack0" in a.payload]
    assert recompiled
    index = text_of(reports["custom_backend"] / "index.html")
    recompiles = index[index.index("Recompiles"):]
    assert "___stack0: not a variable of your program" in recompiles


def test_the_limit_on_an_int_argument_is_fixed_by_a_tensor_not_mark_dynamic(reports):
    """`scaled(x, k)` with dynamic=False: the reasons of the compile over the limit are guards on the
    Python int `k` (`k == N`), no tensor size, so the fix names k, a tensor and dynamic=False, and
    suggests no mark_dynamic call."""
    recs = parse(logs("custom_backend")[0])
    over = next(r for r in kind(recs, "compilation_metrics") if "recompile limit" in (r.body.get("fail_reason") or ""))
    reasons = [reason for a in artifacts(recs, "recompile_reasons") if a.cid == over.cid for reason in json.loads(a.payload)]
    guards = {re.sub(r"^\d+/\d+: ", "", r.split("\n")[0]).split("#")[0].strip() for r in reasons}
    assert guards and all(re.fullmatch(r"k == \d+", g) for g in guards)
    index = reports["custom_backend"] / "index.html"
    html = index.read_text()
    problem = text_of_html(html[html.index('<div class="note problem problem-limit"'):])
    fix = problem[problem.index("Fix:"):]
    fix = fix[: fix.index(".", fix.index("if each is worth"))]
    assert "pass k as a tensor" in fix and "dynamic=False" in fix and "mark_dynamic does not apply" in fix
    assert "torch._dynamo.mark_dynamic(" not in fix


def test_a_limit_fix_follows_what_the_guard_is_on():
    """A guard on a tensor's size keeps its fix, the dimension marked dynamic; one on a value Dynamo
    handed a resume function over a graph break is fixed by the break, and the value is explained."""
    from tlparse_py.analysis.compile_groups import LimitHit
    from tlparse_py.analysis.summary import UNKNOWN_TIME, CompileSummary, Failure
    from tlparse_py.model import CompileId

    def compile_(n: int, reasons: list[str], failure: Failure | None = None) -> CompileSummary:
        return CompileSummary(CompileId(None, 0, n, 0), f"[0/{n}]", None, 0, [f"[0/{n}]"], "f", "m.py:3", "ok", UNKNOWN_TIME,
                              recompile_reasons=reasons, failure=failure)

    limit = Failure("Unsupported", "Dynamo recompile limit exceeded")
    size = ["0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"]
    hit = LimitHit(compile_(1, size, limit), [compile_(0, []), compile_(1, size)])
    assert hit.fixes[0].startswith("mark the dimension dynamic") and "torch._dynamo.mark_dynamic(x, 0)" in hit.fixes[0]
    assert hit.name_notes == []
    # a resume function at the limit on the value handed over the break: fix the break, and say what ___stack0 is
    passed = ["0/1: ___stack0 == 2.0                                # return x * v  # m.py:14 in torch_dynamo_resume_in_f_at_13",
              "0/0: ___stack0 == 1.0                                # return x * v  # m.py:14 in torch_dynamo_resume_in_f_at_13"]
    resume = [compile_(0, []), compile_(1, passed[1:]), compile_(2, passed, limit)]
    for c in resume:
        c.frame = "torch_dynamo_resume_in_f_at_13"
    hit = LimitHit(resume[-1], resume)
    assert hit.fixes[0].startswith("fix the graph break before this resume function: ___stack0 is a value") and "mark_dynamic" not in " ".join(hit.fixes)
    assert len(hit.name_notes) == 1 and hit.name_notes[0].startswith(
        "___stack0: not a variable of your program but a value Dynamo passed to the resume function after the graph break in f at line 13")


# -- 10. one reason, one headline ------------------------------------------------------------------


def package_sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(PACKAGE.rglob("*.py"))}


def test_there_is_one_first_line_and_every_caller_imports_it():
    """One definition of a reason's headline, in the analysis (`summary.first_line`); no other
    helper shortens a reason to its first line, and every module that calls `first_line` imports it
    from there."""
    sources = package_sources()
    defined = [(path.relative_to(PACKAGE).as_posix(), name) for path, text in sources.items()
               for name in re.findall(r"^\s*def (\w*first\w*line\w*)\(", text, flags=re.M)]
    assert sorted(defined) == [("analysis/summary.py", "after_first_line"), ("analysis/summary.py", "first_line")]
    ad_hoc = re.compile(r"""\.(?:split\(\s*["']\\n["']\s*,\s*1\s*\)|partition\(\s*["']\\n["']\s*\))\[0\]""")
    assert [path.name for path, text in sources.items() if ad_hoc.search(text) and path.name != "summary.py"] == []
    for path, text in sources.items():
        if path.name == "summary.py" or not re.search(r"(?<![\w.])first_line\(", text):
            continue
        imported = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ImportFrom)
                    and any(alias.name == "first_line" for alias in node.names)]
        assert imported and all((node.module or "").endswith("summary") for node in imported), path


def test_every_view_shows_one_headline_of_a_reason(tmp_path, report_of):
    """A recompile reason with a blank first line and trailing blanks: the index's compiles table and
    recompiles, the compile page and summary.md all show its first non-blank line, trimmed, whole;
    summary.json keeps the reason as logged."""
    reason = "\n   0/0: L['x'] == 3   \nUser stack trace:\n  File x.py"
    log = write_log(tmp_path / "a.log", [
        start(0, 0), metrics(0, 0),
        start(0, 1), line({"artifact": {"name": "recompile_reasons", "encoding": "json"}, **cid(0, 1)}, json.dumps([reason])),
        metrics(0, 1),
    ])
    headline = "0/0: L['x'] == 3"
    report, out = report_of(log)
    summary = read_json(out / "summary.json")
    assert next(c for c in summary["compiles"] if c["id"] == "[0/1]")["recompile_reasons"] == [reason]
    index = (out / "index.html").read_text()
    assert f"<code>{headline.replace(chr(39), '&#39;')}</code>" in index  # the recompiles list
    assert f"recompiled: {headline.replace(chr(39), '&#39;')}</td>" in index  # the compiles table
    page = (out / "-_0_1_0" / "index.html").read_text()
    assert f"<li><code>{headline.replace(chr(39), '&#39;')}</code><details>" in page
    markdown = (out / "summary.md").read_text()
    assert "first reason: 0/0: L\\['x'\\] == 3" in markdown or f"first reason: {headline}" in markdown


def test_first_line_rule():
    from tlparse_py.analysis.summary import after_first_line, first_line

    assert first_line("\n\n  head  \r\nrest\nmore") == "head"
    assert after_first_line("\n\n  head  \nrest\nmore") == "rest\nmore"
    assert first_line(None) == "" and first_line("") == "" and after_first_line(None) == ""
    long = "x" * 300
    assert first_line(long) == long  # no silent cut
    assert first_line(long, 200) == "x" * 199 + "…" and first_line("short", 200) == "short"


def test_envelopes_agree_with_the_records_read_here():
    """The two raw readers of these tests agree on the metrics they see (envelopes_of is line-based)."""
    log = logs("custom_backend")[0]
    assert [m["co_name"] for m in envelopes_of(log, "compilation_metrics")] == [r.body["co_name"] for r in kind(parse(log), "compilation_metrics")]
