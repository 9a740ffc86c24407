"""Issue 44, item 9: what differs between two compiles of one frame when the program changed a config.

The `config_patch` fixture compiles `f` ([0/0]) inside `torch._dynamo.config.patch(capture_scalar_
outputs=True)`, then again outside it ([0/1], which breaks at `.item()` because the setting is back
to False), then the resume function twice ([1/0], [1/1]); a call under `set_stance("force_eager")`
compiles nothing. The expected settings are read here from the raw log's compilation_metrics (the
JSON text torch logged, not tlparse_py's reading); summary.json, the compile pages, the index,
summary.md and the notebook must say the same.
"""

from __future__ import annotations

import json
import math
import re

import pytest

import tlparse_py
from test_new_scenarios import kind, logs, parse
from test_truth_round3 import run, text_of
from test_truth_round4 import validate
from tlparse_py.analysis.configs import ConfigChange, ConfigSnapshots, names_setting, same
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.notebook import summary_view

SETTING = "torch._dynamo.config.capture_scalar_outputs"


def raw_settings() -> dict[str, dict[str, dict]]:
    """Each compile's logged config modules (`[0/1]` → field → settings), from the raw records."""
    found = {}
    for rec in kind(parse(logs("config_patch")[0]), "compilation_metrics"):
        metrics = rec.env["compilation_metrics"]
        label = f"[{rec.env['frame_id']}/{rec.env['frame_compile_id']}]"
        found[label] = {name: json.loads(metrics[name]) for name in ("dynamo_config", "inductor_config", "compiler_config", "functorch_config")}
    return found


def raw_differences(before: dict[str, dict], after: dict[str, dict]) -> list[tuple[str, object, object]]:
    modules = {"dynamo_config": "torch._dynamo.config", "inductor_config": "torch._inductor.config",
               "compiler_config": "torch.compiler.config", "functorch_config": "torch._functorch.config"}
    return [(f"{modules[field]}.{name}", before[field][name], after[field][name])
            for field in modules for name in sorted(before[field]) if before[field][name] != after[field][name]]


def test_the_log_holds_one_setting_that_differs_and_nothing_for_set_stance():
    """What the rest of this file relies on, from the raw log: only [0/0] ran with the setting on,
    and the call under set_stance("force_eager") (the scenario's line 34) logged no compile at all."""
    settings = raw_settings()
    assert list(settings) == ["[0/0]", "[0/1]", "[1/0]", "[1/1]"]
    assert raw_differences(settings["[0/0]"], settings["[0/1]"]) == [(SETTING, True, False)]
    assert raw_differences(settings["[0/1]"], settings["[1/0]"]) == [] == raw_differences(settings["[1/0]"], settings["[1/1]"])
    starts = kind(parse(logs("config_patch")[0]), "dynamo_start")
    assert not any(frame["line"] == 34 for rec in starts for frame in rec.env["dynamo_start"]["stack"])


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out, _ = run(tmp_path_factory.mktemp("config"), str(logs("config_patch")[0]))
    return out


def test_summary_json_names_the_changed_setting_on_the_compile_and_on_its_graph_break(report):
    summary = json.loads((report / "summary.json").read_text())
    validate(summary)
    compiles = {c["id"]: c for c in summary["compiles"]}
    change = {"setting": SETTING, "before": True, "after": False}
    assert compiles["[0/0]"]["config_changes"] is None  # the frame's first compile: nothing to compare with
    assert compiles["[0/1]"]["config_changes"] == {"since": "[0/0]", "changes": [change]}
    assert compiles["[1/0]"]["config_changes"] is None
    assert compiles["[1/1]"]["config_changes"] == {"since": "[1/0]", "changes": []}
    (brk,) = compiles["[0/1]"]["graph_breaks"]
    assert brk["reason"] == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert brk["config_changes"] == [change]
    assert compiles["[0/0]"]["config_unusual"] == [{"setting": SETTING, "value": True, "usual": False, "usual_compiles": 3, "compiles": 4}]
    assert [compiles[c]["config_unusual"] for c in ("[0/1]", "[1/0]", "[1/1]")] == [[], [], []]
    loaded = load_summary(summary)
    assert [c.to_dict() for c in loaded.compiles] == summary["compiles"]  # read back as written


def test_the_compile_pages_say_what_changed_since_the_frame_s_previous_compile(report):
    page = (report / "-_0_1_1" / "index.html").read_text()
    text = text_of(report / "-_0_1_1" / "index.html")
    assert f"Config changed since this frame's previous compile [0/0] : {SETTING} : True → False" in text
    assert '<a href="../-_0_0_0/index.html">[0/0]</a>' in page
    assert f"Config: {SETTING} was True for [0/1]'s previous compile [0/0] (False for [0/1])" in text
    assert text_of(report / "-_0_1_0" / "index.html").count(f"Config: {SETTING} was True") == 1  # every attempt's page
    first = text_of(report / "-_0_0_0" / "index.html")
    # how many had the usual value is the index's row's to say: a page that counted would change with every compile
    assert (f"Settings unlike most of the run's compiles: {SETTING} = True here; False in most of the run's compiles "
            "( the index's table of compiles says how many)") in first
    assert '<a href="../index.html#compiles">' in (report / "-_0_0_0" / "index.html").read_text()
    assert "Config changed" not in first and "same settings" not in first
    assert "Config: the same settings as this frame's previous compile [1/0] (every config module both logged)." in text_of(report / "-_1_1_0" / "index.html")
    resumed = (report / "-_1_0_0" / "index.html").read_text()
    assert 'id="config' not in resumed and "config-note" not in resumed  # its frame's first compile, and usual


def test_the_index_says_it_in_why_it_recompiled_and_among_the_frame_s_recompiles(report):
    html = (report / "index.html").read_text()
    rows = dict(text_of_row(row) for row in re.findall(r"<tr>.*?</tr>", section(html, "compiles", "graph-breaks"), re.S) if 'class="why"' in row)
    assert rows["[0/1]"].endswith(f"; config changed since [0/0]: {SETTING}: True → False")
    assert rows["[0/0]"] == f"config unlike most compiles: {SETTING} = True (False in 3 of the run's 4 compiles)"
    assert rows["[1/0]"] == ""
    recompiles = plain(section(html, "recompiles", "slowest"))
    assert f"[0/1] : config changed since [0/0]: {SETTING}: True → False" in recompiles
    assert f"[0/0] : config unlike most compiles: {SETTING} = True (False in 3 of the run's 4 compiles)" in recompiles
    breaks = plain(section(html, "graph-breaks", "recompiles"))
    assert f"Config: {SETTING} was True for [0/1]'s previous compile [0/0] (False for [0/1])" in breaks


def test_summary_md_lists_the_config_differences_and_notes_them_beside_the_break(report):
    md = (report / "summary.md").read_text()
    setting = SETTING.replace("_", "\\_")
    assert "**[Config differences](index.html#compiles)** between compiles" in md
    assert (f"- [\\[0/0\\]](-_0_0_0/index.html) f: config unlike most compiles: {setting} = True \\(False in 3 of the run's 4 compiles\\)"
            in md.splitlines())
    assert f"- [\\[0/1\\]](-_0_1_1/index.html) f: config changed since \\[0/0\\]: {setting}: True → False" in md.splitlines()
    (row,) = [line for line in md.splitlines() if line.startswith("| 1 | GB0124 ")]
    assert f"Config: {setting} was True for \\[0/1\\]'s previous compile \\[0/0\\] \\(False for \\[0/1\\]\\)" in row


def test_the_notebook_s_compile_objects_and_summary_carry_it():
    analysis = tlparse_py.analyze(logs("config_patch")[0])
    by_id = {c.id: c for c in analysis.compiles()}
    diff = by_id["[0/1]"].config_changes
    assert diff is not None and diff.since == "[0/0]" and diff.changes == [ConfigChange(SETTING, True, False)]
    assert by_id["[0/1]"].graph_breaks[0].config_changes == (ConfigChange(SETTING, True, False),)
    assert by_id["[0/0]"].config_changes is None and [u.setting for u in by_id["[0/0]"].config_unusual] == [SETTING]
    view = summary_view(analysis)
    assert [(c["label"], c["texts"]) for c in view["config"]] == [
        ("[0/0]", [f"config unlike most compiles: {SETTING} = True (False in 3 of the run's 4 compiles)"]),
        ("[0/1]", [f"config changed since [0/0]: {SETTING}: True → False"]),
    ]
    assert view["graph_breaks"][0]["config_notes"] == [f"{SETTING} was True for [0/1]'s previous compile [0/0] (False for [0/1])"]


# -- the comparison itself, on made-up configs ----------------------------------------------------


class DictSpool:
    def __init__(self) -> None:
        self.kept: dict = {}

    def add(self, key, value) -> None:
        self.kept.setdefault(key, []).append(value)

    def get(self, key) -> list:
        return self.kept.get(key, [])


def logged(dynamo: object = None, inductor: object = None) -> dict:
    return {"dynamo_config": json.dumps(dynamo) if isinstance(dynamo, dict) else dynamo,
            "inductor_config": json.dumps(inductor) if isinstance(inductor, dict) else inductor}


def test_unknown_stays_unknown_and_only_modules_both_logged_are_compared():
    snapshots = ConfigSnapshots(DictSpool())
    assert snapshots.note({}) is None  # no config logged: no number, no claim
    a = snapshots.note(logged({"x": 1}, "Inductor Config cannot be pickled"))
    b = snapshots.note(logged({"x": 2}, {"max_autotune": True}))
    c = snapshots.note(logged(None, {"max_autotune": False}))
    assert snapshots.changes_between(a, None) is None
    assert snapshots.changes_between(a, b) == [ConfigChange("torch._dynamo.config.x", 1, 2)]  # Inductor's text was no JSON: not compared
    assert snapshots.changes_between(a, c) is None  # no module both logged as JSON
    assert snapshots.changes_between(b, c) == [ConfigChange("torch._inductor.config.max_autotune", True, False)]
    assert snapshots.note(logged({"x": 1}, "Inductor Config cannot be pickled")) == a  # the same texts: the same config


def test_a_config_no_longer_at_hand_is_unknown_not_unchanged():
    spool = DictSpool()
    snapshots = ConfigSnapshots(spool)
    a, b = snapshots.note(logged({"x": 1})), snapshots.note(logged({"x": 2}))
    spool.kept.clear()  # as a copied analysis, whose fact spool stays behind
    snapshots._loaded.clear()
    assert snapshots.changes_between(a, b) is None
    assert snapshots.changes_between(a, a) == []  # the same text: the same settings, known without reading them
    assert snapshots.unusual({a: 2, b: 1}) == {a: [], b: []}


def test_values_are_compared_exactly_and_a_usual_value_needs_a_majority():
    assert not same(1, True) and not same(1, 1.0) and same(math.nan, math.nan) and not same([1], [True])
    snapshots = ConfigSnapshots(DictSpool())
    on, off = snapshots.note(logged({"flag": True, "n": 1})), snapshots.note(logged({"flag": False, "n": 1}))
    assert snapshots.unusual({on: 1, off: 1}) == {on: [], off: []}  # 1 against 1: no usual value
    unusual = snapshots.unusual({on: 1, off: 2})
    assert [(u.setting, u.value, u.usual, u.usual_compiles, u.compiles) for u in unusual[on]] == [("torch._dynamo.config.flag", True, False, 2, 3)]
    assert unusual[off] == []


def test_what_torch_compile_s_own_arguments_set_has_no_usual_value_but_changes_within_a_frame():
    """torch.compile(g, dynamic=False) patches automatic_dynamic_shapes for g's compiles (the
    backend_raises fixture logs it so): another function compiled without it is not unusual."""
    snapshots = ConfigSnapshots(DictSpool())
    default = snapshots.note(logged({"automatic_dynamic_shapes": True, "suppress_errors": False}))
    static = snapshots.note(logged({"automatic_dynamic_shapes": False, "suppress_errors": False}))
    suppressing = snapshots.note(logged({"automatic_dynamic_shapes": False, "suppress_errors": True}))
    unusual = snapshots.unusual({default: 1, static: 3, suppressing: 1})
    assert unusual[default] == [] and unusual[static] == []
    assert [u.setting for u in unusual[suppressing]] == ["torch._dynamo.config.suppress_errors"]
    assert snapshots.changes_between(default, static) == [ConfigChange("torch._dynamo.config.automatic_dynamic_shapes", True, False)]


def test_a_break_names_a_setting_only_as_torch_writes_one():
    change = ConfigChange("torch._dynamo.config.capture_scalar_outputs", True, False)
    assert names_setting(["Unsupported Tensor.item() call with capture_scalar_outputs=False"], change)
    assert not names_setting(["capture_scalar_outputs_extra is off"], change)
    debug = ConfigChange("torch._inductor.config.debug", False, True)
    assert not names_setting(["set a breakpoint to debug it"], debug)  # a bare English word
    assert names_setting(["set torch._inductor.config.debug = True"], debug)


def section(html: str, start: str, end: str) -> str:
    return html[html.index(f'id="{start}"') : html.index(f'id="{end}"')]


def plain(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#39;", "'").replace("&quot;", '"')


def text_of_row(row: str) -> tuple[str, str]:
    """A compiles-table row's compile id and its "Why it failed, restarted or recompiled" cell."""
    label = plain(re.search(r"<td[^>]*>(.*?)</td>", row, re.S).group(1)).split()[0]
    return label, " ".join(plain(re.search(r'<td class="why">(.*?)</td>', row, re.S).group(1)).split())
