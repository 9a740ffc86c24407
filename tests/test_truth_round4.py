"""Issue 33, items 2-4: what the report concludes of compiled autograd's captures, of times no record
logged, and of the recompile limit, checked against the raw log.

Every expected value is computed here from the fixture's text with the raw-record helper of
test_new_scenarios (glog header, JSON envelope, payload lines; not tlparse_py's reader), or from a log
the test writes. The report's summary.json, stdout, index, compile pages, summary.md and gates must
say the same.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import tlparse_py
from conftest import TRACES, read_json
from logs import cid, line, write_log
from test_new_scenarios import Rec, artifacts, kind, logs, parse
from test_truth_round3 import cards, compiles_by_id, run, text_of
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.analysis.totals import totals_of
from tlparse_py.cli import main

SCHEMA = Path(tlparse_py.__file__).resolve().parent / "summary.schema.json"


def frame_compile(rec: Rec) -> str:
    """The frame compile a record belongs to, as summary.json names it: `[0/1]`, `[!0/1/0]` (any attempt)."""
    env = rec.env
    ca = f"!{env['compiled_autograd_id']}/" if env.get("compiled_autograd_id") is not None else ""
    return f"[{ca}{env['frame_id']}/{env['frame_compile_id']}]"


def is_frame_compile(rec: Rec) -> bool:
    return rec.env.get("frame_id") is not None and rec.env.get("frame_compile_id") is not None


def invoke(*args: str) -> tuple[int, str, str]:
    """(exit code, everything the command printed, its stderr)."""
    result = CliRunner().invoke(main, [*args, "--no-browser"], catch_exceptions=False)
    return result.exit_code, result.output, result.stderr


def last_line(output: str) -> str:
    """The command's line of the report's totals ("Report: ...: compiles 3, ..."): its last, but for gate lines."""
    return [l for l in output.strip().splitlines() if not l.startswith("--fail-on")][-1]


def validate(summary: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(summary)


# -- 2. compiled autograd's capture is no compile ------------------------------------------------


def test_a_compiled_autograd_capture_is_shown_as_its_graph_s_capture_and_counted_as_no_compile(tmp_path):
    (log,) = logs("compiled_autograd")
    recs = parse(log)
    captures = {r.env["compiled_autograd_id"] for r in recs if r.env.get("compiled_autograd_id") is not None and r.env.get("frame_id") is None}
    captured_graphs = {r.env["compiled_autograd_id"] for r in kind(recs, "compiled_autograd_graph")}
    compiles = list(dict.fromkeys(frame_compile(r) for r in recs if is_frame_compile(r)))
    with_metrics = {frame_compile(r) for r in kind(recs, "compilation_metrics") if is_frame_compile(r)}
    backward = {c: int(c[2:].split("/")[0]) for c in compiles if c.startswith("[!")}
    assert captures and captures == captured_graphs and set(backward.values()) == captures  # each graph captured, then compiled
    assert set(compiles) == with_metrics  # every compile logged its metrics: none is "missing"

    # `--fail-on compiles>N` holds at the log's N compiles: a capture counted as a compile trips it
    out, stdout = run(tmp_path, str(log), "--fail-on", f"compiles>{len(compiles)}")
    summary = read_json(out / "summary.json")
    assert [c["id"] for c in summary["compiles"]] == compiles
    assert summary["totals"]["compiles"] == len(compiles)
    assert not [c for c in summary["compiles"] if c["status"] == "missing" or "/-/-]" in c["id"]]
    assert f"compiles {len(compiles)}," in last_line(stdout)
    assert f"{len(compiles)} compiles" in cards(out / "index.html")

    index = (out / "index.html").read_text()
    legend = re.search(r'<p class="legend">.*?</p>', index).group(0)
    assert "status-missing" not in index.replace(legend, "")  # nothing says "Metrics were missing"
    for graph in sorted(captures):
        section = index.split(f'<section class="compile" id="cid-{graph}_-_-_0">', 1)[1].split("</section>", 1)[0]
        assert f"compiled autograd graph {graph}: the capture of the backward graph, not a compile" in text_of_html(section)
        compiled = [c for c, g in backward.items() if g == graph]
        for c in compiled:
            assert f">{c}</a>" in section  # "Compiled as [!0/1/0]"
        page = (out / f"{graph}_-_-_0" / "index.html").read_text()
        assert f"Compiled autograd graph {graph}: capture of the backward graph" in text_of_html(page.split("</h1>", 1)[0])
        assert "A capture is not a compile" in page and all(f">{c}</a>" in page for c in compiled)
        for c in compiled:
            frame, number = c[2:-1].split("/")[1:]
            compiled_page = (out / f"{graph}_{frame}_{number}_0" / "index.html").read_text()
            assert f'href="../{graph}_-_-_0/index.html"' in compiled_page  # the compile names the capture of its graph


def text_of_html(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#39;", "'").replace("&quot;", '"').strip()


# -- 3. a time no record logged is unknown, never 0 -----------------------------------------------

LOGS = sorted(p for p in TRACES.glob("*/*") if p.is_file() and p.name.startswith("dedicated_log"))


def logged_times(recs: list[Rec]) -> tuple[set[str], set[str]]:
    """The frame compiles whose records hold a forward time (compilation_metrics.entire_frame_compile_time_s,
    what the analysis reads as a compile's time) and those holding a lazy backward time
    (bwd_compilation_metrics.inductor_compile_time_s)."""
    def timed(kind_name: str, field: str) -> set[str]:
        return {frame_compile(r) for r in kind(recs, kind_name) if is_frame_compile(r) and isinstance(r.body, dict)
                and isinstance(r.body.get(field), (int, float)) and not isinstance(r.body.get(field), bool)}
    return timed("compilation_metrics", "entire_frame_compile_time_s"), timed("bwd_compilation_metrics", "inductor_compile_time_s")


@pytest.mark.parametrize("log", LOGS, ids=[f"{p.parent.name}/{p.name}" for p in LOGS])
def test_no_fixture_shows_0_for_a_time_no_record_logged(log):
    forward, backward = logged_times(parse(log))
    summary = tlparse_py.analyze(log).to_dict()
    for c in summary["compiles"]:
        times = c["compile_time_s"]
        if c["id"] not in forward:
            assert times["forward"] is None and times["total"] is None, c["id"]
        if c["id"] not in backward:
            assert times["backward"] is None, c["id"]
    if forward:
        assert summary["totals"]["compile_time_s"] is not None
    else:
        assert summary["totals"]["compile_time_s"] is None, f"{len(summary['compiles'])} compiles, no time logged"


def no_compile_log(tmp_path: Path) -> Path:
    """An excerpt with no compile in it: records outside any compile id only."""
    return write_log(tmp_path / "excerpt.log", [
        line({"str": ["torch/_dynamo/x.py", 0]}),
        line({"artifact": {"name": "before_pre_grad_graph", "encoding": "string"}}, "graph()"),
        line({"describe_storage": {"id": 0, "describer_id": 0, "size": 4}, **cid(None, None, None)}),
    ])


UNTIMED = [p for p in LOGS if not any(logged_times(parse(p)))]


@pytest.mark.parametrize("source", [*(str(p) for p in UNTIMED), "excerpt"], ids=[*(f"{p.parent.name}/{p.name}" for p in UNTIMED), "excerpt"])
def test_an_unknown_time_reads_unknown_on_every_surface(tmp_path, source):
    log = no_compile_log(tmp_path) if source == "excerpt" else Path(source)
    assert not any(logged_times(parse(log)))
    out = tmp_path / "out"
    code, stdout, stderr = invoke(str(log), "-o", str(out), "--fail-on", "compile_time_s>0,compile_time_s<1")
    assert code == 0, stderr  # neither condition is checked: the time is not known
    summary = read_json(out / "summary.json")
    validate(summary)
    assert summary["totals"]["compile_time_s"] is None
    assert "compile time unknown" in last_line(stdout)
    assert "unknown compile time" in cards(out / "index.html")
    assert re.search(r"compile_time_s>0: unknown .* not checked", stderr) and re.search(r"compile_time_s<1: unknown .* not checked", stderr)
    md = (out / "summary.md").read_text(encoding="utf-8")
    head, _, row = [l for l in md.splitlines() if l.startswith("|")][:3]
    column = [h.strip() for h in head.strip("|").split("|")].index("compile time")
    assert [c.strip() for c in row.strip("|").split("|")][column] == "unknown"


def test_the_total_over_no_compile_is_unknown_not_0():
    assert totals_of([])["compile_time_s"] is None


# -- 4. the recompile limit ----------------------------------------------------------------------


def limit_facts(log: Path) -> dict:
    """The compile over the recompile limit, from the raw log: its id, its frame's name and location
    (from the frame's earlier compiles' metrics), torch's limit, and the guard that kept failing."""
    recs = parse(log)
    metrics = kind(recs, "compilation_metrics")
    (over,) = [m for m in metrics if "recompile limit exceeded" in str(m.body.get("fail_reason")).lower()]
    over_id = frame_compile(over)
    earlier = [m for m in metrics if m.env.get("frame_id") == over.env["frame_id"] and m is not over and m.body.get("co_name")]
    reasons = [json.loads(a.payload) for a in artifacts(recs, "recompile_reasons") if frame_compile(a) == over_id]
    reasons = [r for group in reasons for r in (group if isinstance(group, list) else [group])]
    guards = {re.split(r"\s{2,}# ", re.sub(r"^\d+/\d+: ", "", r))[0].split(". expected")[0].strip() for r in reasons}
    return {
        "id": over_id,
        "type": over.body["fail_type"],
        "started": any(frame_compile(r) == over_id for r in kind(recs, "dynamo_start")),
        "name": earlier[0].body["co_name"],
        "location": f"{earlier[0].body['co_filename']}:{earlier[0].body['co_firstlineno']}",
        "limit": int(re.search(r"currently set to (\d+)", over.body["fail_reason"]).group(1)),
        "guards": guards,
        "other_failures": [frame_compile(m) for m in metrics if m.body.get("fail_type") and m is not over],
    }


@pytest.mark.parametrize("scenario", ["recompile_limit", "recompile"])
def test_the_compile_over_the_recompile_limit_is_its_own_outcome_not_a_failure(tmp_path, scenario):
    (log,) = logs(scenario)
    facts = limit_facts(log)
    assert not facts["started"]  # torch logs no dynamo_start for it: its location is its frame's

    out, stdout = run(tmp_path, str(log), "--fail-on", "failed>0")  # the program ran correctly: no failure
    summary = read_json(out / "summary.json")
    validate(summary)
    compile_ = compiles_by_id(summary)[facts["id"]]
    assert compile_["status"] == "limit" and compile_["failure"]["type"] == facts["type"]  # torch's message kept
    assert (compile_["frame"], compile_["user_location"]) == (facts["name"], facts["location"])
    assert summary["totals"]["recompile_limit"] == 1 and summary["totals"]["failed"] == len(facts["other_failures"]) == 0
    assert "recompile limit 1," in last_line(stdout) and "failed 0," in last_line(stdout)
    assert "1 recompile limit hit" in cards(out / "index.html") and "0 failed compiles" in cards(out / "index.html")

    # its own gate names it
    code, _, stderr = invoke(str(log), "-o", str(tmp_path / "gated"), "--fail-on", "recompile_limit>0")
    assert code == 3 and re.search(rf"recompile_limit>0: recompile_limit is 1 \(compiles: {re.escape(facts['id'])} \({facts['name']}\)\)", stderr)

    # among the top problems: the frame, the guard that kept failing and the fix
    index = (out / "index.html").read_text()
    problems = text_of_html(index.split('<h2 id="problems">', 1)[1].split("<h2", 1)[0])
    assert f"Frame {facts['id'][1:].split('/')[0]} {facts['name']} at {facts['location']}" in problems
    assert f"torch._dynamo.config.recompile_limit = {facts['limit']}" in problems and f"at {facts['id']}" in problems
    assert "runs eagerly" in problems and "not a failure" in problems
    shown = re.search(r"The guard that kept failing: (.+?) \[", problems).group(1)
    assert {g.strip() for g in shown.split(", ")} == facts["guards"]
    assert "torch._dynamo.mark_dynamic" in problems and "raise torch._dynamo.config.recompile_limit" in problems
    compiles_table = index.split('<h2 id="compiles"', 1)[1]  # the compiles table (the timeline's table lists it too)
    row = compiles_table.split(f">{facts['id']}</a></td>", 1)[1].split("</tr>", 1)[0]
    assert 'class="status status-limit"' in row and "Recompile limit: runs eagerly" in row

    page = text_of_html((out / compile_["url"]).read_text())
    assert "over torch's recompile limit" in page and "this is not a failure" in page and "Failed:" not in page


def test_a_summary_json_of_2_1_reads_its_limit_compile_as_no_failure(tmp_path):
    """Before 2.2 the compile over the limit was an `error`: loaded back, it is counted as at the limit."""
    (log,) = logs("recompile_limit")
    facts = limit_facts(log)
    data = tlparse_py.analyze(log).to_dict()
    data["schema_version"] = "2.1"
    del data["totals"]["recompile_limit"]
    for c in data["compiles"]:
        if c["id"] == facts["id"]:
            c["status"] = "error"
    loaded = load_summary(data)
    totals = totals_of(loaded.compiles)
    assert totals["failed"] == 0 and totals["recompile_limit"] == 1


# -- issue 33 item 6: the first record's time is the first record's, string-table records included


def _earliest_glog_time(log: Path) -> str:
    import gzip as _gzip

    data = log.read_bytes()
    text = (_gzip.decompress(data) if log.suffix == ".gz" else data).decode("utf-8", "replace")
    stamps = [m.group(1) for m in re.finditer(r"(?m)^[VIWEC](\d{4} \d\d:\d\d:\d\d\.\d{6}) ", text)]
    month_day, clock = min(stamps).split(" ")
    return f"{month_day[:2]}-{month_day[2:]}T{clock}Z"


@pytest.mark.parametrize("scenario", ["graph_break", "training", "vllm_piecewise"])
def test_first_record_is_the_logs_earliest_line(scenario):
    (log,) = sorted((Path(__file__).parent / "fixtures" / "traces" / scenario).glob("dedicated_log*"))
    first = tlparse_py.analyze(log).to_dict()["run"]["first_record"]
    assert first.endswith(_earliest_glog_time(log)), (first, _earliest_glog_time(log))


@pytest.mark.parametrize("scenario, outcome", [("skip_nan", "Skipped: ran eagerly"), ("recompile_limit", "Recompile limit: runs eagerly"),
                                               ("failure", "Error")])
def test_the_failures_page_says_what_became_of_each_failed_compile(tmp_path, scenario, outcome):
    """A compile whose metrics logged an exception is a failure, a skip or the recompile limit: the
    failures page (tlparse's list, kept) says which, in the report's words, as the index does."""
    from logs import envelopes_of

    failed = [m for m in envelopes_of(Path(__file__).parent / "fixtures" / "traces" / scenario, "compilation_metrics") if m.get("fail_type")]
    assert failed
    reason = str(failed[-1].get("fail_reason") or "")
    expected = ("Recompile limit: runs eagerly" if "recompile limit" in reason.lower()
                else "Skipped: ran eagerly" if "Skipping the frame" in reason else "Error")
    assert expected == outcome
    (log,) = sorted((Path(__file__).parent / "fixtures" / "traces" / scenario).glob("dedicated_log*"))
    out = tmp_path / "out"
    tlparse_py.build(log, out)
    page = (out / "failures_and_restarts.html").read_text()
    assert f">{outcome}</span>" in page
