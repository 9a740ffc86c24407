"""Issue 43, items 4-7: a recompile that restarted, the failures heading, failed compiles explained,
and the compile over the recompile limit counted as no recompile, checked against the raw log.

Every expected value is computed here from the fixture's text with the raw-record helper of
test_new_scenarios (glog header, JSON envelope, payload lines; not tlparse_py's reader). The index
(its "Why it failed, restarted or recompiled" column, top problems, recompiles and failures heading),
summary.md, `--markdown`, the notebook summary, summary.json and `--fail-on` must say the same.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

import tlparse_py
from conftest import read_json
from test_new_scenarios import Rec, artifacts, kind, logs, parse
from test_truth_round3 import cards, run, text_of_html
from test_truth_round4 import invoke, last_line, validate
from tlparse_py.analysis.compiles import schema_version
from tlparse_py.analysis.conditions import parse_conditions
from tlparse_py.analysis.comparison import diff
from tlparse_py.analysis.summary import RankEntry, RanksSummary
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.analysis.totals import BY_NAME, check_report, totals_of
from tlparse_py.notebook import summary_html


# -- the raw log's facts --------------------------------------------------------------------------


def frame_compile(rec: Rec) -> tuple[int, int]:
    return rec.env["frame_id"], rec.env["frame_compile_id"]


def label(key: tuple[int, int]) -> str:
    return f"[{key[0]}/{key[1]}]"


def first_line(text: str) -> str:
    """A text's first line, its runs of spaces as a page's text shows them (one)."""
    return " ".join(text.strip().split("\n", 1)[0].split())


def exception_line(reason: str) -> str:
    """The exception's first line, with the next when the first only introduces it (`backend='x' raised:`)."""
    lines = [l.strip() for l in reason.strip().split("\n") if l.strip()]
    return f"{lines[0]} {lines[1]}" if len(lines) > 1 and lines[0].endswith(":") else lines[0]


def reasons_of(rec: Rec) -> list[str]:
    """A recompile_reasons artifact's reasons: one as text, several as a JSON list."""
    text = rec.payload.strip()
    return json.loads(text) if text.startswith("[") else [text]


class Facts:
    """What one fixture log says, read off its records."""

    def __init__(self, log: Path):
        self.log = log
        recs = parse(log)
        self.recs = recs
        compiles = [r for r in recs if r.env.get("frame_id") is not None and r.env.get("frame_compile_id") is not None
                    and r.env.get("compiled_autograd_id") is None]
        self.compiles = list(dict.fromkeys(frame_compile(r) for r in compiles))
        self.attempts = {key: sorted({r.env.get("attempt") or 0 for r in compiles if frame_compile(r) == key}) for key in self.compiles}
        self.metrics = {frame_compile(r): r.body for r in kind(recs, "compilation_metrics") if r.env.get("frame_id") is not None}
        self.reasons: dict[tuple[int, int], list[str]] = {}
        for r in artifacts(recs, "recompile_reasons"):
            self.reasons.setdefault(frame_compile(r), []).extend(reasons_of(r))
        breaks = artifacts(recs, "dynamo_graph_break_reason")
        self.skipped = {frame_compile(b) for b in breaks if "Skipping the function and falling back to eager" in b.payload}
        self.skipped |= {k for k, m in self.metrics.items() if "Skipping the frame" in str(m.get("fail_reason") or "")}
        self.limit = [k for k, m in self.metrics.items() if m.get("fail_type") and m.get("fail_type") != "FailOnRecompileLimitHit"
                      and "recompile limit" in str(m.get("fail_reason") or "").lower()]
        self.failed = [k for k, m in self.metrics.items() if m.get("fail_type") and k not in self.limit and k not in self.skipped]
        # a recompile: a later compile of a frame whose guard failed (a reason was logged), not the one over the limit
        self.recompiles = [k for k in self.compiles if k[1] > 0 and self.reasons.get(k) and k not in self.limit]
        self.restarts = sum(len(a) - 1 for a in self.attempts.values())
        strings = {r.body[1]: r.body[0] for r in kind(recs, "str")}
        self.location = {}
        for r in kind(recs, "dynamo_start"):
            inner = r.body["stack"][-1]
            self.location.setdefault(frame_compile(r), f"{strings[inner['filename']]}:{inner['line']}")

    def name(self, key: tuple[int, int]) -> str:
        """The frame's name: its compile's co_name, else one of the frame's other compiles' (the limit compile logs none)."""
        names = [m.get("co_name") for k, m in self.metrics.items() if k[0] == key[0] and m.get("co_name")]
        return self.metrics[key].get("co_name") or names[0]

    def where(self, key: tuple[int, int]) -> str:
        return self.location.get(key) or next(v for k, v in self.location.items() if k[0] == key[0])


def facts_of(scenario: str) -> Facts:
    (log,) = logs(scenario)
    return Facts(log)


# -- reading what the report shows ------------------------------------------------------------------


def index_rows(index: str) -> dict[str, str]:
    """The compiles table: each compile's label → its "Why it failed, restarted or recompiled" cell, as text."""
    body = index.split('id="compiles-table"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = {}
    for row in re.findall(r"<tr>.*?</tr>", body, re.S):
        name = re.search(r">(\[[^<]+\])</a>", row).group(1)
        rows[name] = html.unescape(text_of_html(row.split('<td class="why">', 1)[1]))
    return rows


def section(index: str, anchor: str) -> str:
    """An index section's text, from its heading to the next."""
    return html.unescape(text_of_html(index.split(f'<h2 id="{anchor}">', 1)[1].split("<h2", 1)[0]))


def md_plain(markdown: str) -> str:
    """Markdown as read: escapes resolved, each link its label."""
    plain = re.sub(r"\\(.)", r"\1", markdown)
    return re.sub(r"\[(\[[^\]]+\]|[^\]\[]+)\]\([^)\s]*\)", r"\1", plain)


def plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


# -- 4. a recompile that restarted says both -------------------------------------------------------


@pytest.mark.parametrize("scenario", ["recompile_restart", "tensorify_restart"])
def test_a_recompile_that_restarted_shows_its_recompile_reason_and_its_restart(tmp_path, scenario):
    facts = facts_of(scenario)
    both = [k for k in facts.recompiles if len(facts.attempts[k]) > 1]
    assert both, "the scenario recompiles and then restarts"
    out, stdout = run(tmp_path, str(facts.log))
    rows = index_rows((out / "index.html").read_text())
    for key in both:
        restart = next(r for k, m in facts.metrics.items() if k == key for r in m.get("restart_reasons") or [])
        why = rows[label(key)]
        assert why.startswith(f"recompiled: {first_line(facts.reasons[key][0])}; restarted: "), why
        if scenario == "recompile_restart":  # torch's own words (tensorify's restart is an exception class, said in words)
            assert why == f"recompiled: {first_line(facts.reasons[key][0])}; restarted: {first_line(restart)}"
    summary = read_json(out / "summary.json")
    assert summary["totals"]["recompiles"] == len(facts.recompiles) and summary["totals"]["restarts"] == facts.restarts
    assert f"recompiles {len(facts.recompiles)}," in last_line(stdout) and f"restarts {facts.restarts}," in last_line(stdout)


def test_a_retry_still_says_what_failed_before_it(tmp_path):
    facts = facts_of("retry_fullgraph")
    out, _ = run(tmp_path, str(facts.log))
    rows = index_rows((out / "index.html").read_text())
    assert rows["[0/1]"].startswith("retry after [0/0] failed; restarted: ")


# -- 5. the failures heading tells the declared totals ----------------------------------------------


@pytest.mark.parametrize("scenario", ["backend_raises", "backend_suppressed", "recompile_limit", "failure", "recompile_restart",
                                      "retry_fullgraph", "skipped_frame", "graph_break"])
def test_the_failures_heading_counts_restarts_failures_skips_and_limit_hits_apart(tmp_path, scenario):
    facts = facts_of(scenario)
    parts = [plural(n, one, many) for n, one, many in (
        (facts.restarts, "restart", "restarts"), (len(facts.failed), "failed compile", "failed compiles"),
        (len(facts.skipped), "skipped frame", "skipped frames"), (len(facts.limit), "recompile limit hit", "recompile limit hits"),
    ) if n]
    words = ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]
    out, _ = run(tmp_path, str(facts.log))
    index = (out / "index.html").read_text()
    assert "and/or" not in index
    link = re.search(r'<a href="failures_and_restarts.html">([^<]+)</a>: every restart', index)
    assert link and html.unescape(link.group(1)) == words
    failures_page = html.unescape(text_of_html((out / "failures_and_restarts.html").read_text()))
    assert f"in log order ({words})" in failures_page
    totals = read_json(out / "summary.json")["totals"]
    assert (totals["restarts"], totals["failed"], totals["skipped"], totals["recompile_limit"]) == (
        facts.restarts, len(facts.failed), len(facts.skipped), len(facts.limit))


# -- 6. a failed compile is explained --------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["backend_raises", "backend_suppressed", "failure"])
def test_a_failed_compile_is_a_top_problem_with_its_exception_frame_and_user_line(tmp_path, scenario):
    facts = facts_of(scenario)
    assert facts.failed
    out, _ = run(tmp_path, str(facts.log))
    problems = section((out / "index.html").read_text(), "problems")
    for key in facts.failed:
        m = facts.metrics[key]
        said = (f"Frame {key[0]} {facts.name(key)} at {facts.where(key)} : its compile {label(key)} failed with {m['fail_type']} : "
                f"{exception_line(m['fail_reason'])}")
        assert said in problems, (said, problems)
        block = problems.split(f"its compile {label(key)} failed", 1)[1].split("The whole error is on the failures page", 1)[0]
        if m.get("fail_user_frame_filename"):
            assert f", at {m['fail_user_frame_filename']}:{m['fail_user_frame_lineno']}" in block
        assert ("suppress_errors was on" in block) == bool(m.get("config_suppress_errors"))
    # the limit problem is still listed, after the failures
    if facts.limit:
        assert problems.index("failed with") < problems.index("reached torch's recompile limit")

    summary = read_json(out / "summary.json")
    validate(summary)
    assert summary["schema_version"] == schema_version()
    for c in summary["compiles"]:
        key = tuple(int(p) for p in c["id"][1:-1].split("/"))
        m = facts.metrics[key]
        if not m.get("fail_type"):
            assert c["failure"] is None
            continue
        where = f"{m['fail_user_frame_filename']}:{m['fail_user_frame_lineno']}" if m.get("fail_user_frame_filename") else None
        assert c["failure"] == {"type": m["fail_type"], "reason": m["fail_reason"], "user_location": where,
                                "suppressed": m["config_suppress_errors"]}


@pytest.mark.parametrize("scenario", ["backend_raises", "backend_suppressed", "failure"])
def test_summary_md_markdown_and_the_notebook_name_each_failure(tmp_path, scenario):
    facts = facts_of(scenario)
    notes = tmp_path / "notes.md"
    notes.write_text("earlier step\n")
    out, _ = run(tmp_path, str(facts.log), "--markdown", str(notes))
    summary_md = md_plain((out / "summary.md").read_text())
    appended = notes.read_text()
    assert appended.startswith("earlier step\n\n")
    assert f"**[Failures](out/index.html#problems)** ({plural(len(facts.failed), 'failed compile', 'failed compiles')})" in appended
    for text in (summary_md, md_plain(appended)):
        assert f"**Failures** ({plural(len(facts.failed), 'failed compile', 'failed compiles')})" in text
        assert "| compile | frame | user code | exception |" in text
        for key in facts.failed:
            m = facts.metrics[key]
            row = next(line for line in text.splitlines() if line.startswith(f"| {label(key)} |"))
            cells = [c.strip() for c in row.strip("|").split(" | ")]
            where = facts.where(key).rsplit("/", 1)[-1]  # relative to the run's folder of user files
            if m.get("fail_user_frame_filename"):
                where += f", failed at {m['fail_user_frame_filename'].rsplit('/', 1)[-1]}:{m['fail_user_frame_lineno']}"
            assert cells[:3] == [label(key), facts.name(key), where], row
            assert cells[3].startswith(f"{m['fail_type']}: {exception_line(m['fail_reason'])}"[:89].rstrip()), row
            assert ("suppress_errors was on" in cells[3]) == bool(m.get("config_suppress_errors"))
    # the slowest compiles no longer are the only place a failure shows: its status there, its exception above
    assert summary_md.index("**Failures** (") < summary_md.index("Slowest compiles")

    notebook = html.unescape(summary_html(tlparse_py.analyze(facts.log)))
    failures = notebook.split("<h4>Failures</h4>", 1)[1].split("<h4>", 1)[0]
    for key in facts.failed:
        m = facts.metrics[key]
        assert f">{label(key)}<" in failures and f"<code>{m['fail_type']}</code>: {exception_line(m['fail_reason'])}" in failures
        assert f"<code>{facts.where(key)}</code>" in failures
    assert failures.count("suppress_errors was on") == sum(bool(facts.metrics[k].get("config_suppress_errors")) for k in facts.failed)


def test_a_log_without_failures_has_no_failures_section(tmp_path):
    facts = facts_of("recompile_limit")
    assert not facts.failed
    out, _ = run(tmp_path, str(facts.log))
    assert "**Failures**" not in md_plain((out / "summary.md").read_text())
    assert "problem-failure" not in (out / "index.html").read_text()
    assert "<h4>Failures</h4>" not in summary_html(tlparse_py.analyze(facts.log))


# -- 7. the compile over the recompile limit is no recompile ---------------------------------------


def markdown_totals(table: str) -> dict[str, str]:
    """summary.md's totals table as {column heading: value}, read by its heading row (a new total adds a
    column anywhere)."""
    rows = [line for line in table.splitlines() if line.startswith("|")]
    heading = next(i for i, line in enumerate(rows) if "compiles" in line and "recompiles" in line)
    names = [cell.strip() for cell in rows[heading].strip("|").split("|")]
    values = [cell.strip() for cell in rows[heading + 2].strip("|").split("|")]
    return dict(zip(names, values, strict=True))


@pytest.mark.parametrize("scenario", ["backend_raises", "recompile_limit", "recompile"])
def test_the_compile_over_the_recompile_limit_is_neither_a_recompile_nor_a_time_the_frame_compiled(tmp_path, scenario):
    facts = facts_of(scenario)
    assert facts.limit and all(k[1] > 0 and facts.reasons.get(k) for k in facts.limit)  # a guard failed for it too
    n = len(facts.recompiles)
    out, stdout = run(tmp_path, str(facts.log))
    summary = read_json(out / "summary.json")
    assert summary["totals"]["recompiles"] == n and summary["totals"]["recompile_limit"] == len(facts.limit)
    assert f"recompiles {n}," in last_line(stdout)
    assert f"{plural(n, 'recompile', 'recompiles')} " in cards(out / "index.html") + " "
    table = md_plain((out / "summary.md").read_text())
    totals = markdown_totals(table)
    assert totals["compiles"] == str(len(facts.compiles)) and totals["recompiles"] == str(n)

    # the gate: recompiles>N holds not, recompiles>N-1 names the recompiles, never the limit compile
    code, _, _ = invoke(str(facts.log), "-o", str(tmp_path / "gate_ok"), "--fail-on", f"recompiles>{n}")
    assert code == 0
    code, _, stderr = invoke(str(facts.log), "-o", str(tmp_path / "gate"), "--fail-on", f"recompiles>{n - 1}")
    line = next(l for l in stderr.splitlines() if l.startswith(f"--fail-on recompiles>{n - 1}:"))
    assert code == 3 and f"recompiles is {n}" in line
    assert all(label(k) in line for k in facts.recompiles[:8]) and not any(label(k) in line for k in facts.limit)

    # each frame at the limit compiled as many times as it has compiles before the limit
    index = (out / "index.html").read_text()
    recompiles = section(index, "recompiles")
    plain_md = md_plain((out / "summary.md").read_text())
    notebook = html.unescape(summary_html(tlparse_py.analyze(facts.log)))
    for key in facts.limit:
        compiled = [k for k in facts.compiles if k[0] == key[0] and k not in facts.limit]
        ids = " ".join(label(k) for k in compiled)
        times = plural(len(compiled), "time", "times")
        assert (f"Frame {key[0]} {facts.name(key)} compiled {times}: {ids} then {label(key)} reached the recompile limit: "
                "runs eagerly") in recompiles
        shown = " ".join(label(k) for k in compiled[:4]) + (f" +{len(compiled) - 4} more" if len(compiled) > 4 else "")
        assert (f"- frame {key[0]} {facts.name(key)}: {plural(len(compiled), 'compile', 'compiles')} {shown}; then {label(key)} "
                "reached the recompile limit: runs eagerly") in plain_md
        row = re.search(rf"<tr><td><code>{key[0]}</code> {facts.name(key)}</td><td class=\"num\">(\d+)</td><td>(.*?)</td></tr>", notebook, re.S)
        assert row and row.group(1) == str(len(compiled)) and f"then {label(key)} reached the recompile limit" in row.group(2)


def test_a_summary_json_of_2_3_counts_recompiles_under_3_0_s_words():
    """A summary.json written before 3.0 is read again: its totals come from its compiles, so the
    compile over the limit (status `limit` since 2.2) is no recompile there either."""
    facts = facts_of("recompile_limit")
    data = tlparse_py.analyze(facts.log).to_dict()
    data["schema_version"] = "2.3"
    data["totals"]["recompiles"] += len(facts.limit)  # what 2.3 wrote
    for c in data["compiles"]:
        if c["failure"]:  # 2.3 had neither
            del c["failure"]["user_location"], c["failure"]["suppressed"]
    assert totals_of(load_summary(data).compiles)["recompiles"] == len(facts.recompiles)


def test_diff_and_multirank_gates_leave_the_limit_compile_out(tmp_path):
    facts = facts_of("recompile_limit")
    full = tlparse_py.analyze(facts.log).to_dict()
    limited = {label(k) for k in facts.limit}
    before = json.loads(json.dumps(full))
    before["compiles"] = [c for c in before["compiles"] if c["id"] not in limited]  # the same run, stopped before the limit
    compared = diff(before, full)
    assert compared.schema_version == "4.2"
    assert compared.metrics["new_recompiles"] == 0 and compared.metrics["new_skipped"] == len(facts.limit)
    assert compared.total("recompiles").base == compared.total("recompiles").new == len(facts.recompiles)
    assert compared.comparison is not None
    assert [f.recompiles.new for f in compared.comparison.frames] == [len(facts.recompiles)]

    # over ranks: recompiles per rank, the limit compile in neither
    one = load_summary(full)
    ranks = RanksSummary([RankEntry(0, "rank_0", None, one), RankEntry(1, "rank_1", None, one)])
    conditions = parse_conditions(f"recompiles>{len(facts.recompiles) - 1},recompiles>{len(facts.recompiles)}", BY_NAME)
    failed, _ = check_report(conditions, ranks)
    assert len(failed) == 1 and f"recompiles is {len(facts.recompiles)}" in failed[0]
    assert not any(k in failed[0] for k in limited)
