"""A compile-page section is rendered and searched from its declaration.

A kind declared with a section of its own (`declare_section`, then `section=` on the kind) shows its
records' texts on the compile page under that section's heading, and the search index holds them,
called what the section's declaration calls them, linked to where the page shows them: no template
or search code names the section.
"""

from __future__ import annotations

import html
import json
import re
from importlib.metadata import EntryPoint

import pytest

from logs import cid, line, metrics, start, write_log
from tlparse_py.analysis.kinds import plugins, registry
from tlparse_py.kinds import PAYLOAD, Output, declare_section, kind

PAGE = "-_0_0_0/index.html"
AUDIT = "nightly audit of f\nlayer1.weight: 0 NaN, 0 inf\nlayer2.bias: drift 0.0031 above budget"


@pytest.fixture
def registry_restored():
    """Whatever a test declares (kinds, named payloads, sections) is gone afterwards."""
    before = {"kinds": dict(registry.KINDS), "names": dict(registry.NAMES), "sections": dict(registry.SECTIONS)}
    yield
    for name, table in (("kinds", registry.KINDS), ("names", registry.NAMES), ("sections", registry.SECTIONS)):
        table.clear()
        table.update(before[name])


def section_html(page: str, section_id: str) -> str | None:
    """A top-level section of a compile page, up to the next one (sections hold nested <details>)."""
    found = re.search(rf'<details class="section" id="{section_id}".*?(?=<details class="section"|<h2 |\Z)', page, re.S)
    return found.group(0) if found else None


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def search_entries(out) -> list[list]:
    """Every entry of a report's search index, read from the shard files its manifest names."""
    manifest = (out / "static" / "search-index.js").read_text()
    shards = json.loads(manifest[manifest.index("=") + 1 :].strip().rstrip(";"))["shards"]
    entries = []
    for shard in shards:
        text = (out / "static" / shard).read_text()
        entries += json.loads(text[text.index("push(") + 5 : text.rindex(");")])[1]
    return entries


def declare_audit() -> None:
    declare_section("team_audits", "Team audits", search_kind="audit", priority=0, open=True)

    @kind("my_team_audit", title="Our nightly numerics audit", section="team_audits", label="Nightly audit")
    def audit(record, ctx):
        return [Output(PAYLOAD, "my_team_audit.txt")]


def test_a_kind_in_a_new_section_is_on_the_compile_page_and_in_search(tmp_path, report_of, registry_restored):
    declare_audit()
    log = write_log(tmp_path / "audit.log", [start(), line({"my_team_audit": {}, **cid()}, AUDIT), metrics(entire_frame_compile_time_s=1.0)])
    _, out = report_of(log)

    page = (out / PAGE).read_text()
    section = section_html(page, "section-team_audits")
    assert section is not None, "the declared section is not on the compile page"
    assert section.startswith('<details class="section" id="section-team_audits" open><summary>Team audits (1)</summary>')
    shown = text_of(section)
    assert "Nightly audit" in shown
    for text_line in AUDIT.splitlines():
        assert text_line in shown
    assert 'id="other"' not in page  # shown in its own section, not as a leftover

    # the search index: the text, under the kind's heading, called what the section calls its texts
    (entry,) = [e for e in search_entries(out) if e[0] == "audit"]
    kind_name, title, url, body = entry[:4]
    assert title == "Compile [0/0] · Nightly audit"
    assert body == AUDIT
    target, _, anchor = url.partition("#")
    assert target == PAGE
    assert f'id="{anchor}"' in section  # the search result opens the text where the section shows it
    assert entry[4] == f"{anchor}-L"  # a match on a line links to that line of it
    assert f'id="{anchor}-L3"' in section


def test_the_section_declaration_orders_its_texts_in_search(tmp_path, report_of, registry_restored):
    """Texts are indexed by their section's priority: a priority-0 section's text comes before the
    graphs (priority 1) even when it is logged after them."""
    declare_audit()
    graph = "graph():\n    %x : placeholder\n    return x"
    log = write_log(tmp_path / "audit.log", [
        start(), line({"dynamo_output_graph": {}, **cid()}, graph), line({"my_team_audit": {}, **cid()}, AUDIT), metrics(),
    ])
    _, out = report_of(log)
    kinds_in_order = [e[0] for e in search_entries(out) if e[0] in ("audit", "graph")]
    assert kinds_in_order == ["audit", "graph"]

    registry.declare_section("team_audits", "Team audits", search_kind="audit", priority=2)
    _, out = report_of(log)
    assert [e[0] for e in search_entries(out) if e[0] in ("audit", "graph")] == ["graph", "audit"]


def test_a_kind_naming_an_undeclared_section_is_refused(registry_restored):
    with pytest.raises(ValueError, match="unknown section 'team_audit'"):
        kind("my_team_audit", title="Our nightly numerics audit", section="team_audit")(lambda record, ctx: [])
    assert "my_team_audit" not in registry.KINDS


def test_a_plugin_that_fails_leaves_no_section_behind(tmp_path, monkeypatch, registry_restored):
    (tmp_path / "half_sections.py").write_text(
        "from tlparse_py.kinds import declare, declare_section\n"
        "def register():\n"
        "    declare_section('half_section', 'Half declared')\n"
        "    declare('half_kind', 'declared before the failure', section='half_section')\n"
        "    raise RuntimeError('broken plugin')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    error = plugins.load_one(EntryPoint(name="half", value="half_sections:register", group=plugins.GROUP))
    assert error == "RuntimeError: broken plugin"
    assert "half_section" not in registry.SECTIONS and "half_kind" not in registry.KINDS
    assert list(registry.SECTIONS)[:6] == ["graph_breaks", "recompiles", "guards", "pipeline", "code", "other"]
