"""Kinds declared outside tlparse-py: in a test, by the example plugin, and by plugins that fail."""

from __future__ import annotations

import html
import re
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from click.testing import CliRunner

from logs import cid, line, metrics, start, write_log
from tlparse_py.cli import main
from tlparse_py.analysis.kinds import plugins, registry
from tlparse_py.kinds import PAYLOAD, Output, kind

from conftest import read_json

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tlparse_py_example_kinds"
PAGE = "-_0_0_0/index.html"


@pytest.fixture
def registry_restored():
    """Whatever a test (or a plugin it loads) declares is gone afterwards, built-ins included as they were."""
    before = {"kinds": dict(registry.KINDS), "names": dict(registry.NAMES)}
    yield
    for name, table in (("kinds", registry.KINDS), ("names", registry.NAMES)):
        table.clear()
        table.update(before[name])


def page_text(page: str) -> str:
    """A page as a reader sees it: tags dropped, entities decoded (highlighting splits lines into spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def section_text(page: str, section: str) -> str:
    # a section holds nested <details>, so it ends where the next top-level section starts
    found = re.search(rf'<details class="section" id="{section}".*?(?=<details class="section"|\Z)', page, re.S)
    assert found is not None, f"no {section!r} section on the page"
    return page_text(found.group(0))


def entry(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=plugins.GROUP)


# ------------------------------------------------------------------------------------------------
# a kind declared by the caller


AUDIT = "guard_audit\nL['x'].size()[0] == 8   # kept: static batch\nL['y'] is None          # dropped"


def test_a_kind_declared_in_process_gets_its_file_section_and_title(tmp_path, report_of, registry_restored):
    @kind("my_guard_audit", title="Our guard audit", section="guards", label="Guard audit")
    def audit(record, ctx):
        return [Output(PAYLOAD, "my_guard_audit.txt")]

    log = write_log(tmp_path / "audit.log", [start(), line({"my_guard_audit": {}, **cid()}, AUDIT), metrics()])
    report, out = report_of(log)

    assert (out / "-_0_0_0" / "my_guard_audit_0.txt").read_text() == AUDIT
    listed = [a["name"] for a in read_json(out / "compile_directory.json")["[0/0]"]["artifacts"]]
    assert listed == ["my_guard_audit_0.txt", "compilation_metrics_1.html"]
    page = (out / PAGE).read_text()
    assert "Guard audit" in section_text(page, "guards")
    assert "L['x'].size()[0] == 8   # kept: static batch" in section_text(page, "guards")
    assert 'id="other"' not in page  # shown where it was declared, not as a leftover
    assert "Our guard audit" in page_text(page)
    assert not report.unknown_kinds
    assert report.stats["unknown"] == 0


def test_undeclaring_makes_the_kind_unknown_again(tmp_path, report_of, registry_restored):
    kind("my_guard_audit", title="Our guard audit", section="guards")(lambda record, ctx: [])
    registry.undeclare("my_guard_audit")

    log = write_log(tmp_path / "audit.log", [start(), line({"my_guard_audit": {}, **cid()}, AUDIT)])
    report, out = report_of(log)

    assert report.unknown_kinds == {"my_guard_audit": 1}
    assert "L['y'] is None" in section_text((out / PAGE).read_text(), "other")  # the text is never lost


# ------------------------------------------------------------------------------------------------
# the example plugin, loaded through importlib.metadata as an installed one would be


def test_the_example_plugin_shows_its_kind_on_the_sample_compile_page(monkeypatch, report_of, registry_restored):
    monkeypatch.syspath_prepend(str(EXAMPLE))

    assert plugins.load_one(entry("example", "tlparse_py_example_kinds:register")) == ""
    assert registry.KINDS["my_team_pass_report"].source == "example"

    report, out = report_of(EXAMPLE / "sample.log")
    text = page_text((out / PAGE).read_text())
    missing = [want for want in (EXAMPLE / "expected.txt").read_text().splitlines() if want and want not in text]
    assert not missing
    assert not report.unknown_kinds


def test_the_example_sample_log_is_what_make_sample_writes(tmp_path, monkeypatch):
    # sample.log is committed; this keeps it in step with the script that documents how it was made
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from make_sample import sample_lines

    assert "".join(sample_lines()) == (EXAMPLE / "sample.log").read_text()


# ------------------------------------------------------------------------------------------------
# plugins that fail are named and skipped


BROKEN_ON_IMPORT = """
from tlparse_py.kinds import declare
declare("half_declared", "declared before the import failed")
raise RuntimeError("boom at import")
"""

BROKEN_ON_CALL = """
from tlparse_py.kinds import declare
def register():
    declare("compilation_metrics", "a replacement of a built-in, made before the failure")
    declare("half_declared_too", "declared before register failed")
    raise ValueError("bad register")
"""


EXITS_ON_IMPORT = """
import sys
sys.exit(5)
"""

MISTYPED = """
from tlparse_py.kinds import declare
def register():
    declare("my_graph", "a kind with a step of the wrong type", step="graph")
"""


@pytest.mark.parametrize("source, expected", [(EXITS_ON_IMPORT, "SystemExit: 5"),
                                              (MISTYPED, "kind 'my_graph': step is str 'graph', not Step or NoneType")])
def test_a_plugin_that_exits_or_declares_a_wrong_type_is_skipped(tmp_path, monkeypatch, registry_restored, source, expected):
    (tmp_path / "odd_plugin.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = dict(registry.KINDS)
    target = "odd_plugin:register" if "register" in source else "odd_plugin"
    assert plugins.load_one(entry("odd", target)) == expected
    assert registry.KINDS == before


@pytest.fixture
def broken_plugins(tmp_path, monkeypatch):
    """Two importable plugin modules: one raises on import, one in its register()."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "broken_on_import.py").write_text(BROKEN_ON_IMPORT)
    (folder / "broken_on_call.py").write_text(BROKEN_ON_CALL)
    monkeypatch.syspath_prepend(str(folder))
    return [entry("explodes", "broken_on_import"), entry("raises", "broken_on_call:register")]


def test_a_broken_plugin_is_reported_and_leaves_no_declarations(broken_plugins, registry_restored):
    before = {"kinds": dict(registry.KINDS), "names": dict(registry.NAMES)}
    on_import, on_call = broken_plugins

    assert plugins.load_one(on_import) == "RuntimeError: boom at import"
    assert plugins.load_one(on_call) == "ValueError: bad register"

    # the built-in it replaced is back too, not only the new names gone
    assert {"kinds": registry.KINDS, "names": registry.NAMES} == before
    assert list(registry.KINDS) == list(before["kinds"])  # declaration order fixes file numbering


def test_the_cli_names_broken_plugins_and_still_writes_the_report(tmp_path, monkeypatch, broken_plugins, registry_restored):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    found = [*broken_plugins, entry("example", "tlparse_py_example_kinds:register")]
    monkeypatch.setattr(plugins, "entry_points", lambda group: [e for e in found if e.group == group])
    monkeypatch.setattr(plugins, "_loaded", {})  # plugins load once per process: start from none
    out = tmp_path / "out"

    result = CliRunner().invoke(main, [str(EXAMPLE / "sample.log"), "-o", str(out), "--no-browser"])

    assert result.exit_code == 0, result.output
    assert "plugin 'explodes' (broken_on_import) was skipped: RuntimeError: boom at import" in result.stderr
    assert "plugin 'raises' (broken_on_call:register) was skipped: ValueError: bad register" in result.stderr
    assert "plugin 'example'" not in result.stderr  # the working plugin is loaded silently ...
    assert "Unknown record kinds" not in result.stderr  # ... and its kind is known
    assert "My team: pass report" in page_text((out / PAGE).read_text())


def test_a_kind_declared_after_an_undeclare_comes_last(registry_restored):
    # the order decides which kind's files are numbered first on a record carrying several kinds
    registry.declare("first_of_ours", "first")
    registry.declare("second_of_ours", "second")
    registry.undeclare("first_of_ours")
    later = registry.declare("third_of_ours", "third")

    assert [k.name for k in registry.parsers_for(["third_of_ours", "second_of_ours"])] == ["second_of_ours", "third_of_ours"]
    assert later.order > registry.KINDS["second_of_ours"].order


def test_an_installed_plugin_is_found_through_its_entry_points_file(tmp_path, monkeypatch):
    """Discovery reads the installed `entry_points.txt` files first (importlib.metadata is slow to
    import); a distribution that declares the group is found, one that does not is not."""
    site = tmp_path / "site"
    other = site / "other-1.0.dist-info"
    other.mkdir(parents=True)
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: other\nVersion: 1.0\n")
    (other / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    assert not plugins.declared_anywhere(paths=[str(site)])
    ours = site / "my_kinds-0.1.dist-info"
    ours.mkdir()
    (ours / "METADATA").write_text("Metadata-Version: 2.1\nName: my-kinds\nVersion: 0.1\n")
    (ours / "entry_points.txt").write_text("[console_scripts]\nx = y:z\n\n[tlparse_py.kinds]\nexample = tlparse_py_example_kinds:register\n")
    assert plugins.declared_anywhere(paths=[str(site), str(tmp_path / "missing")])
    monkeypatch.syspath_prepend(str(site))
    found = plugins.entry_points(plugins.GROUP)
    assert [(e.name, e.value) for e in found] == [("example", "tlparse_py_example_kinds:register")]
