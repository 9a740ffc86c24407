"""The compiled templates (report.codegen → report.templating) write what Jinja writes.

A report never imports Jinja: each template is compiled to Python that runs on `templating` alone.
Here Jinja itself is the oracle: small templates for each construct (scopes, loops, macros,
inheritance, includes, filters, tests, undefined values), and every page of a few real reports,
rendered both ways.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jinja2
import pytest
from markupsafe import Markup

from conftest import TRACES
from tlparse_py.pipeline import Options, write_report
from tlparse_py.report import codegen, render, templating

FAILED = "<undefined error>"


def jinja_environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    """Jinja as the pages used it before they were compiled (render.PageEnvironment's settings)."""
    environment = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                                     trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    environment.globals.update(render._globals())
    environment.filters.update(render._filters())
    return environment


def compiled(sources: dict[str, str]) -> templating.Templates:
    parser = codegen.parser([*templating.FILTERS, *render._filters()], templating.TESTS)

    def load(name: str) -> dict:
        namespace: dict = {}
        exec(compile(codegen.generate(parser, name, sources[name], ""), name, "exec"), namespace)  # noqa: S102
        return namespace

    return templating.Templates(load, render._globals(), render._filters())


def both(sources: dict[str, str], context: dict | Callable[[], dict], name: str = "t") -> tuple[str, str]:
    """(Jinja's page, ours) for the template `name` (`context`, or a function making it afresh for each);
    an undefined value used: FAILED."""
    fresh = context if callable(context) else lambda: context
    try:
        theirs = jinja_environment(jinja2.DictLoader(sources)).get_template(name).render(**fresh())
    except jinja2.UndefinedError:
        theirs = FAILED
    try:
        mine = compiled(sources).render(name, fresh())
    except templating.UndefinedError:
        mine = FAILED
    return theirs, mine


class Item:
    def __init__(self, **fields):
        self.__dict__.update(fields)


MACROS = """{% set WORDS = {"a": "A"} %}
{% macro box(x, label="none", open=False) -%}
<b{% if open %} open{% endif %}>{{ label }}:{{ x }}</b>{{ word(x) }}
{%- endmacro %}
{% macro word(k) %}{{ WORDS.get(k, k) }}{% endmacro %}
{% macro needs(a, b) %}{{ a }}{{ b }}{% endmacro %}
"""
BASE = """<title>{{ title }}</title>{% if extra is defined %}[{{ extra }}]{% endif %}
{% with banner = note %}{% include "inc" %}{% endwith %}
{% block content %}default{% endblock %}|{% block tail %}tail{% endblock %}
"""
CHILD = """{% extends "base" %}
{% import "macros" as m %}
{% set shared = "S" %}
{% macro local(v) %}<{{ v }}>{% endmacro %}
ignored text
{% block content %}{{ m.box(value) }}{{ m.box("a", label=title, open=True) }}{{ local(shared) }}{% set inner = 1 %}{{ inner }}{% endblock %}
"""
INCLUDED = "({{ banner }}/{{ title }})"

CASES = {
    "loop scopes": ("{% set x = 1 %}{% for i in l %}{{ x }}{% set x = i %}{{ x }},{% endfor %}{{ x }}", {"l": [5, 6]}),
    "set in a branch": ("{% if a %}{% set y = 2 %}{% endif %}{{ y }}", {"a": False, "y": 7}),
    "set in the taken branch": ("{% if a %}{% set y = 2 %}{% endif %}{{ y }}", {"a": True}),
    "set everywhere": ("{% if a %}{% set y = 2 %}{% else %}{% set y = 3 %}{% endif %}{{ y }}", {"a": False, "y": 9}),
    "used before set": ("{{ y }}{% set y = 2 %}", {"y": 1}),
    "loop variables": ("{% for i in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}"
                       "{% if not loop.first %}p{{ loop.previtem }}{% endif %}{% if not loop.last %}n{{ loop.nextitem }}{% endif %};{% endfor %}",
                       {"l": [1, 2, 3]}),
    "loop over a generator": ("{% for i in l %}{{ loop.length }}{{ loop.last }}{% endfor %}", lambda: {"l": (x for x in "abc")}),
    "no previous item": ("{% for i in l %}{% if loop.previtem %}x{% endif %}{% endfor %}", {"l": [1, 2]}),
    "nested loops": ("{% for a in l %}{% for b in l %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}", {"l": [1, 2]}),
    "loop else and filter": ("{% for i in l if i > 1 %}{{ i }}{{ loop.last }}{% else %}none{% endfor %}"
                             "{% for i in l if i > 9 %}{{ i }}{% else %}none{% endfor %}", {"l": [1, 2, 3]}),
    "unpacking": ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, (b, c) in t %}{{ a }}{{ b }}{{ c }}{% endfor %}",
                  {"d": {"a": 1, "b": 2}, "t": [(1, (2, 3))]}),
    "escaping": ("{{ '<b>' }}{{ x }}{{ m }}{{ 3 }}{{ 1.5 }}{{ none }}{{ true }}", {"x": "<i>&", "m": Markup("<u>")}),
    "concatenation": ("{{ a ~ b }}|{{ a ~ m }}|{{ 1 ~ 2 }}", {"a": "<", "b": ">", "m": Markup("<u>")}),
    "conditional without else": ("compile{{ 's' if n != 1 }}|{{ ('x' if n > 5) ~ 'y' }}", {"n": 1}),
    "conditional with else": ("{{ 'a' if n else 'b' }}", {"n": 0}),
    "lookups": ("{{ d.a }}{{ d['a'] }}{{ d.items }}{{ o.name }}{{ o['name'] }}{{ l[0] }}{{ l[1:] }}{{ l[-1] }}{{ s.upper() }}",
                {"d": {"a": 1, "items": 2}, "o": Item(name="n"), "l": [1, 2, 3], "s": "x"}),
    "missing key": ("{{ d.b }}", {"d": {"a": 1}}),
    "missing name": ("{{ nothing }}", {}),
    "missing key tested": ("{% if d.b is defined %}1{% else %}0{% endif %}{% if nothing is not defined %}2{% endif %}", {"d": {}}),
    "comparisons": ("{{ 1 < n <= 3 }}{{ n in l }}{{ n not in l }}{{ n == 2 and not m or n }}{{ -n }}{{ n * 2 + 1 - 1 }}{{ n / 4 }}{{ n // 4 }}{{ n % 2 }}{{ n ** 2 }}",
                    {"n": 2, "m": 0, "l": [2]}),
    "filters": ("{{ l|length }}{{ l|join(', ') }}{{ ms|join(' ') }}{{ l|sum }}{{ [3, 1]|min }}{{ ['B', 'a']|min }}{{ '%.0f'|format(2.5) }}"
                "{{ l|list }}{{ l|first }}{{ l|last }}{{ 12.5|seconds }}{{ 'http://x/'|safe_href }}{{ 'javascript:x'|safe_href }}",
                {"l": [1, 2], "ms": [Markup("<a>"), "<b>"]}),
    "attribute filters": ("{{ items|selectattr('f.ok')|list|length }}{{ items|sum(attribute='f.n', start=10) }}"
                          "{{ pairs|map('last')|reject('none')|list }}{{ pairs|map('first')|select('string')|list }}{{ items|map(attribute='f.n')|list }}",
                          {"items": [Item(f={"ok": True, "n": 1}), Item(f={"ok": False, "n": 2})], "pairs": [("a", None), ("b", 2), (3, 4)]}),
    "tests": ("{{ x is none }}{{ s is string }}{{ l is iterable }}{{ 3 is iterable }}{{ f is sameas false }}{{ 0 is sameas false }}",
              {"x": None, "s": "s", "l": [], "f": False}),
    "globals": ("{{ plural(1, 'x') }}{{ plural(2, 'x') }}{{ dict([('a', 1)]).a }}{% for i in range(2) %}{{ i }}{% endfor %}{{ version }}", {}),
    "literals": ("{% set d = {'\\u2705': 'hit', 'k': [1, (2,), {'x': 3}]} %}{{ d['\\u2705'] }}{{ d.k }}", {}),
    "whitespace": ("  {% if a %}\n    x\n  {% endif %}\n{%- if a -%}  y  {%- endif %}\n", {"a": True}),
}


@pytest.mark.parametrize("source, context", CASES.values(), ids=list(CASES))
def test_a_template_writes_what_jinja_writes(source, context):
    theirs, mine = both({"t": source}, context)
    assert mine == theirs


def test_inheritance_imports_includes_and_macros_write_what_jinja_writes():
    sources = {"base": BASE, "child": CHILD, "macros": MACROS, "inc": INCLUDED}
    for context in ({"title": "<T>", "value": "a", "note": "N"}, {"title": "T", "value": "b", "note": "N", "extra": 1}):
        theirs, mine = both(sources, context, "child")
        assert mine == theirs != FAILED
    assert both(sources, {"title": "T"}, "child") == (FAILED, FAILED)  # `value` undefined
    missing_argument = {"t": '{% import "macros" as m %}{{ m.needs(1) }}', "macros": MACROS}
    assert both(missing_argument, {}) == (FAILED, FAILED)
    module = compiled({"macros": MACROS}).module("macros")
    assert sorted(k for k in vars(module) if not k.startswith("_")) == ["WORDS", "box", "needs", "word"]
    assert module.box("<a>") == jinja_environment(jinja2.DictLoader({"macros": MACROS})).get_template("macros").module.box("<a>")


@pytest.mark.parametrize("source", [
    "{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}x{% endcall %}",
    "{% filter upper %}x{% endfilter %}",
    "{{ x|upper }}",
    "{{ x is odd }}",
    "{% for x in l recursive %}{{ loop(x) }}{% endfor %}",
    "{{ cycler(1, 2).next() }}",
    "{% set ns = namespace(a=1) %}{% set ns.a = 2 %}",
    "{% set x %}block{% endset %}",
    "{% macro m(ctx) %}{% endmacro %}",
    "{{ f(*args) }}",
    "{% if a %}{% extends 'b' %}{% endif %}",
])
def test_what_the_compiled_templates_do_not_cover_fails_when_compiling(source):
    parser = codegen.parser([*templating.FILTERS, *render._filters()], templating.TESTS)
    with pytest.raises(codegen.Unsupported):
        codegen.generate(parser, "t", source, "")


def test_every_page_template_compiles():
    for name in render.template_names():
        compile(render.generate_module(name, (render.TEMPLATE_DIR / name).read_text(), ""), name, "exec")


@pytest.mark.parametrize("scenario, options", [
    ("failure", {}), ("training", {"provenance": True, "highlight_mb": 1.0}), ("export_failure", {"export": True}),
    ("vllm_piecewise", {}), ("recompile", {"plain_text": True}),
])
def test_every_page_of_a_report_is_what_jinja_writes(tmp_path, monkeypatch, scenario, options):
    """Each page a report renders, rendered again by Jinja from the same variables."""
    rendered: list[tuple[str, dict, str]] = []
    original = render.render

    def recording(template: str, context: dict) -> str:
        page = original(template, context)
        rendered.append((template, dict(context), page))
        return page

    monkeypatch.setattr(render, "render", recording)
    log = next(Path(TRACES / scenario).glob("dedicated_log*"))
    write_report(log, tmp_path / "out", options=Options(**options))
    environment = jinja_environment(jinja2.FileSystemLoader(render.TEMPLATE_DIR))
    assert {template for template, _, _ in rendered} >= {"index.html.j2", "failures.html.j2"}
    for template, context, page in rendered:
        assert environment.get_template(template).render(**context) == page, template
