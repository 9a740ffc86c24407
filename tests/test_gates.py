"""`--fail-on` gates, `--markdown` and `summary.md`, and the run context (index and summary.json).

Expectations come from the report's own summary.json or straight from the raw log, never from
numbers written down here.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jsonschema
import pytest
from click.testing import CliRunner
from logs import cid, line, start, write_log

from tlparse_py import __version__
from tlparse_py.cli import main
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.analysis.digest import digest_of
from tlparse_py.report.markdown import summary_markdown

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "tlparse_py" / "summary.schema.json").read_text(encoding="utf-8"))
NAMES = ("compiles", "frames", "graph_breaks", "recompiles", "failed", "compile_time_s", "cache.hit", "cache.miss", "cache.bypass")
MAX_LINES = 40


def fixture_log(scenario: str) -> Path:
    (log,) = sorted((TRACES / scenario).glob("dedicated_log*.log*"))
    return log


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def report(tmp_path: Path, scenario: str, *args, out: str = "out"):
    target = tmp_path / out
    result = run(fixture_log(scenario), "-o", target, "--no-browser", *args)
    return result, target


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def value(totals: dict, name: str):
    return totals["cache"][name.split(".")[1]] if name.startswith("cache.") else totals[name]


def gate_lines(stderr: str) -> dict[str, str]:
    """`--fail-on COND: ...` lines, by condition."""
    found = {}
    for text in stderr.splitlines():
        match = re.match(r"--fail-on (\S+?): (.*)$", text)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def markdown_links(text: str) -> list[str]:
    return re.findall(r"(?<!\\)\]\(([^)\s]+)\)", text)


def assert_links_resolve(markdown: Path) -> None:
    links = markdown_links(markdown.read_text(encoding="utf-8"))
    assert links, "the summary links into the report"
    for href in links:
        parts = urlsplit(href)
        assert not parts.scheme and not href.startswith("/"), href
        target = (markdown.parent / unquote(parts.path)).resolve()
        assert target.is_file(), f"{markdown.name}: {href} does not resolve"


# -- gates --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["graph_break", "recompile", "training"])
def test_gates_exit_as_the_numbers_say(tmp_path, scenario):
    result, out = report(tmp_path, scenario, "--fail-on", "graph_breaks>0,recompiles>0", "--fail-on", "failed>0")
    totals = summary_of(out)["totals"]
    expected = [n for n in ("graph_breaks", "recompiles", "failed") if totals[n] > 0]
    assert (out / "index.html").is_file(), "the report is written whatever the gates say"
    assert result.exit_code == (3 if expected else 0), result.stderr
    assert sorted(gate_lines(result.stderr)) == sorted(f"{n}>0" for n in expected)
    assert bool(expected) == (scenario != "training")


def test_thresholds_at_the_exact_value(tmp_path):
    """name>=value holds for every name, name>value and name!=value for none; cache.X and floats included."""
    _, out = report(tmp_path, "recompile", out="plain")
    totals = summary_of(out)["totals"]
    exact = {n: value(totals, n) for n in NAMES}
    holds = ",".join(f"{n}>={exact[n]!r}" for n in NAMES) + "," + ",".join(f"{n}=={exact[n]!r}" for n in NAMES)
    result, _ = report(tmp_path, "recompile", "--fail-on", holds, out="holds")
    assert result.exit_code == 3
    assert len(gate_lines(result.stderr)) == 2 * len(NAMES), result.stderr
    passes = ",".join(f"{n}>{exact[n]!r}" for n in NAMES) + "," + ",".join(f"{n}!={exact[n]!r}" for n in NAMES)
    result, _ = report(tmp_path, "recompile", "--fail-on", passes, out="passes")
    assert result.exit_code == 0, result.stderr
    assert gate_lines(result.stderr) == {}


def test_a_gate_names_the_user_lines_from_the_runs_folder(tmp_path):
    """A gate's line is read in a CI log or a step summary, where a runner's absolute paths mean nothing:
    the graph breaks behind `graph_breaks>0` are named from the run's common folder, as the tables are."""
    result, out = report(tmp_path, "graph_break", "--fail-on", "graph_breaks>0")
    summary = summary_of(out)
    line = gate_lines(result.stderr)["graph_breaks>0"]
    places = {b["user_location"] for c in summary["compiles"] for b in c["graph_breaks"]}
    assert places and all(p.startswith("/work/scenarios/") for p in places)
    for place in places:
        assert f"at {place.removeprefix('/work/scenarios/')}" in line or f", {place.removeprefix('/work/scenarios/')}" in line
    assert "/work/scenarios/" not in line
    assert "/work/scenarios/" not in (out / "summary.md").read_text()


def test_violated_lines_name_the_compiles(tmp_path):
    result, out = report(tmp_path, "graph_break", "--fail-on", "graph_breaks>0,compile_time_s>0")
    summary = summary_of(out)
    lines = gate_lines(result.stderr)
    broke = [c["id"] for c in summary["compiles"] if c["graph_breaks"]]
    assert broke and all(i in lines["graph_breaks>0"] for i in broke)
    assert all(c["id"] not in lines["graph_breaks>0"] for c in summary["compiles"] if not c["graph_breaks"])
    slowest = max((c for c in summary["compiles"] if c["compile_time_s"]["total"] is not None), key=lambda c: c["compile_time_s"]["total"])
    assert lines["compile_time_s>0"].split("slowest: ")[1].startswith(slowest["id"])

    result, out = report(tmp_path, "recompile", "--fail-on", "recompiles>0,recompile_limit>0,failed>0", out="recompile")
    summary = summary_of(out)
    lines = gate_lines(result.stderr)
    limited = [c for c in summary["compiles"] if c["failure"] and "recompile limit" in c["failure"]["reason"].lower()]
    # the compile over the recompile limit compiled nothing: no recompile (issue 43 item 7)
    recompiled = [c["id"] for c in summary["compiles"] if not c["id"].endswith("/0]") and c not in limited]
    assert recompiled and all(i in lines["recompiles>0"] for i in recompiled)
    assert limited and all(c["id"] not in lines["recompiles>0"] for c in limited)
    assert f"recompiles is {summary['totals']['recompiles']}" in lines["recompiles>0"]
    # the compile over the recompile limit is no failure (issue 33): its own total names it
    assert limited and all(f"{c['id']} ({c['frame']})" in lines["recompile_limit>0"] for c in limited)
    assert "failed>0" not in lines and summary["totals"]["failed"] == 0
    assert result.exit_code == 3 and "2 condition(s) held" in result.stderr


@pytest.mark.parametrize(
    "conditions",
    ["graph_brakes>0", "recompiles>>1", "recompiles>", "recompiles>1,", "", "cache.mis>0", "cache>0", "graph_breaks>x", "graph_breaks=1"],
)
def test_a_malformed_gate_is_a_usage_error_and_writes_nothing(tmp_path, conditions):
    markdown = tmp_path / "summary.md"
    result, out = report(tmp_path, "graph_break", "--fail-on", conditions, "--markdown", markdown)
    assert result.exit_code == 2, result.stderr
    assert "--fail-on" in result.stderr and "valid names" in result.stderr
    assert all(name in result.stderr for name in NAMES)
    assert not out.exists() and not markdown.exists()
    assert not [p for p in tmp_path.iterdir()], "nothing is written, not even a staging folder"
    assert "Stats" not in result.stderr, "checked before reading the log"


def test_an_unknown_value_is_reported_not_gated(tmp_path):
    """A compile that logged no metrics: compile_time_s is null, so compile_time_s>0 neither holds nor passes."""
    log = write_log(tmp_path / "trace.log", [start(0, 0), line({"dynamo_output_graph": {}, **cid(0, 0, 0)}, "graph")])
    result = run(log, "-o", tmp_path / "out", "--no-browser", "--fail-on", "compile_time_s>0")
    assert summary_of(tmp_path / "out")["totals"]["compile_time_s"] is None
    assert result.exit_code == 0, result.stderr
    assert "unknown" in gate_lines(result.stderr)["compile_time_s>0"]
    result = run(log, "-o", tmp_path / "out2", "--no-browser", "--fail-on", "compile_time_s>0,compiles>0")
    assert result.exit_code == 3
    lines = gate_lines(result.stderr)
    assert "unknown" in lines["compile_time_s>0"] and lines["compiles>0"].startswith("compiles is 1")


def test_multi_rank_gates_on_each_total_combined_as_declared(tmp_path):
    """Cache lookups add up over ranks; graph breaks are what one rank did (each runs the program)."""
    folder = TRACES / "ddp_cache_race"
    result = run(folder, "--all-ranks-html", "-o", tmp_path / "probe", "--no-browser")
    assert result.exit_code == 0, result.stderr
    landing = summary_of(tmp_path / "probe")
    total = sum(r["summary"]["totals"]["cache"]["hit"] for r in landing["ranks"])
    assert total > max(r["summary"]["totals"]["cache"]["hit"] for r in landing["ranks"])
    result = run(folder, "--all-ranks-html", "-o", tmp_path / "at", "--no-browser", "--fail-on", f"cache.hit>={total}")
    assert result.exit_code == 3
    line_ = gate_lines(result.stderr)[f"cache.hit>={total}"]
    assert "summed over ranks" in line_ and all(f"rank {r['rank']} " in line_ for r in landing["ranks"])
    most = max(r["summary"]["totals"]["graph_breaks"] for r in landing["ranks"])
    result = run(folder, "--all-ranks-html", "-o", tmp_path / "breaks", "--no-browser", "--fail-on", f"graph_breaks>={most},graph_breaks>{most}")
    assert result.exit_code == 3
    lines = gate_lines(result.stderr)
    assert "on the rank with the most" in lines[f"graph_breaks>={most}"] and f"graph_breaks>{most}" not in lines
    result = run(folder, "--all-ranks-html", "-o", tmp_path / "over", "--no-browser", "--fail-on", f"cache.hit>{total}", "--markdown", tmp_path / "mr.md")
    assert result.exit_code == 0, result.stderr
    assert_links_resolve(tmp_path / "mr.md")


# -- markdown --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["graph_break", "recompile", "training"])
def test_summary_md_is_in_every_report_and_its_links_resolve(tmp_path, scenario):
    result, out = report(tmp_path, scenario)
    assert result.exit_code == 0
    md = out / "summary.md"
    text = md.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES
    assert_links_resolve(md)
    summary = summary_of(out)
    assert f"| {summary['totals']['compiles']} | {summary['totals']['frames']} | {summary['totals']['graph_breaks']} |" in text
    assert "](index.html)" in text
    if summary["totals"]["graph_breaks"]:
        assert "index.html#graph-breaks" in text
    if summary["totals"]["recompiles"]:
        assert "index.html#recompiles" in text
    assert summary_markdown(digest_of(load_summary(summary))) == text, "one pure function of the summary, as loaded back from summary.json"


def test_markdown_file_links_into_the_report_from_its_own_folder(tmp_path):
    notes = tmp_path / "ci" / "notes"
    notes.mkdir(parents=True)
    markdown = notes / "compile.md"
    result, out = report(tmp_path, "recompile", "--markdown", markdown, "--fail-on", "recompile_limit>0", out="my report")
    assert result.exit_code == 3
    text = markdown.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES
    assert "](../../my%20report/index.html)" in text
    assert_links_resolve(markdown)
    assert "Gate failed" in text and "recompile\\_limit\\>0" in text
    failed = [c["id"] for c in summary_of(out)["compiles"] if c["status"] == "limit"]
    assert failed and all(i.replace("[", "\\[").replace("]", "\\]") in text for i in failed)
    assert "Gate failed" not in (out / "summary.md").read_text(encoding="utf-8")


def test_markdown_folder_must_exist_before_any_work(tmp_path):
    result, out = report(tmp_path, "training", "--markdown", tmp_path / "nope" / "x.md")
    assert result.exit_code == 2 and "--markdown" in result.stderr
    assert not out.exists()


def test_markdown_escapes_log_text():
    evil = "[click](javascript:alert(1)) | <script>x</script> *b* `c`\nsecond line"
    summary = {
        "schema_version": "1.1",
        "inputs": [{"path": "/t/log", "bytes": 1, "rank": None}],
        "totals": {"compiles": 1, "frames": 1, "graph_breaks": 1, "recompiles": 0, "failed": 0, "compile_time_s": 1.0,
                   "cache": {"hit": 0, "miss": 0, "bypass": 0}},
        "compiles": [{"id": "[0/0]", "url": "-_0_0_0/index.html", "generation": 0, "frame": evil, "status": "ok",
                      "compile_time_s": {"forward": 1.0, "backward": None, "total": 1.0},
                      "graph_breaks": [{"reason": evil, "user_location": evil}], "recompile_reasons": [], "cache": [], "failure": None}],
    }
    text = summary_markdown(digest_of(load_summary(summary)), "../r/", [evil])
    assert not re.search(r"(?<!\\)\]\(javascript", text) and not re.search(r"(?<!\\)<script", text)
    assert not [row for row in text.splitlines() if row.startswith("second line")], "no newline from the log"
    assert all(href.startswith("../r/") for href in markdown_links(text))
    for row in (r for r in text.splitlines() if r.startswith("| 1 |") and "click" in r):
        assert len(re.split(r"(?<!\\)\|", row)) == 7, row  # 5 cells: no | from the log splits one


# -- run context --------------------------------------------------------------------------------


def glog_times(log: Path) -> list[str]:
    """`MM-DDTHH:MM:SS.micro` of every record header line of the raw log (string-table entries,
    `{"str": ...}`, are not records)."""
    opener = gzip.open if log.suffix == ".gz" else open
    header = re.compile(r"[VIWEF](\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d{6}) \d+ [^\]]*\] (\{.*)$")
    times = []
    with opener(log, "rt", encoding="utf-8", errors="replace") as handle:
        for text in handle:
            m = header.match(text.rstrip("\n"))
            if m and "str" not in json.loads(m[4]):
                times.append(f"{m[1]}-{m[2]}T{m[3]}")
    return times


@pytest.mark.parametrize("scenario", ["graph_break", "training"])
def test_run_context_in_summary_json_and_on_the_index(tmp_path, scenario):
    _, out = report(tmp_path, scenario)
    summary = summary_of(out)
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)
    assert summary["schema_version"] == SCHEMA["version"]
    run_ = summary["run"]
    times = glog_times(fixture_log(scenario))
    assert len(times) == summary["stats"]["ok"]
    assert re.fullmatch(r"\d{4}-", run_["first_record"][:5])
    assert run_["first_record"][5:] == min(times) + "Z" and run_["last_record"][5:] == max(times) + "Z"
    assert run_["first_record"][:4] == run_["last_record"][:4]
    assert run_["torch_version"] == summary["torch_version"] and run_["torch_version"]
    assert run_["rank"] is None and run_["tool"] == f"tlparse-py {__version__}"

    index = (out / "index.html").read_text(encoding="utf-8")
    (paragraph,) = re.findall(r'<p class="muted run" id="run">(.*?)</p>', index, re.DOTALL)
    assert run_["torch_version"] in paragraph and f"tlparse-py {__version__}" in paragraph
    assert f'datetime="{run_["first_record"]}"' in paragraph
    assert run_["first_record"][11:19] in paragraph and run_["last_record"][11:19] in paragraph
    assert "no rank logged" in paragraph
    assert 'href="summary.md"' in index


def test_run_context_names_the_rank(tmp_path):
    (log,) = sorted((TRACES / "distributed").glob("*rank_1_*"))
    result = run(log, "-o", tmp_path / "out", "--no-browser")
    assert result.exit_code == 0, result.stderr
    summary = summary_of(tmp_path / "out")
    assert summary["run"]["rank"] == 1
    assert "rank 1" in re.findall(r'<p class="muted run" id="run">(.*?)</p>', (tmp_path / "out" / "index.html").read_text(encoding="utf-8"), re.DOTALL)[0]
