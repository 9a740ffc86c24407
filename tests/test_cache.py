"""The user's cache folder: compiled templates and Pygments results kept between runs; and the
compiled templates a wheel carries.

A warm cache must never change a report, a broken one must never fail it, and trimming must only
ever delete the cache's own entries.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jinja2
import pytest

from conftest import TRACES
from tlparse_py.report import cache, render, templating
from tlparse_py.report.cache import HighlightCache
from tlparse_py.report.highlight import Highlighter, pygments_css
from tlparse_py.pipeline import Options, write_report

GRAPH = "def forward(self, x):\n    return torch.ops.aten.add.Tensor(x, 1)  # add\n"


def files_of(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "raw.log"}


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV, str(folder))
    render.templates.cache_clear()
    yield folder
    render.templates.cache_clear()


def test_a_warm_cache_gives_the_same_report_and_is_used(tmp_path, own_cache, monkeypatch):
    log = next((TRACES / "training").glob("dedicated_log*"))
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    write_report(log, cold, options=Options(highlight_mb=64))
    entries = list(own_cache.glob("highlight-*/*.html"))
    assert len(entries) > 10 and list(own_cache.glob("pages-*/*.code"))
    from tlparse_py.report import highlight

    def no_pygments(text, lang):
        raise AssertionError(f"highlighted again: {text[:40]!r}")

    monkeypatch.setattr(highlight, "highlight_lines", no_pygments)  # every text must come from the cache
    write_report(log, warm, options=Options(highlight_mb=64))
    assert files_of(cold) == files_of(warm)


def test_the_cache_never_decides_what_is_highlighted(tmp_path, own_cache):
    """A text past the budget stays for the page's script even when an earlier run cached it."""
    spool = (tmp_path / "spool").open("w+b")
    Highlighter(spool, budget=1e6).lines(GRAPH, "python")  # cached by a run with a budget
    assert list(own_cache.glob("highlight-*/*.html"))
    small = Highlighter((tmp_path / "spool2").open("w+b"), budget=10)
    small.request(GRAPH, "python")
    lines = small.lines(GRAPH, "python")
    assert not lines.highlighted and lines.lang == "python"


def test_no_cache_and_a_broken_cache_still_write_the_report(tmp_path, monkeypatch):
    log = next((TRACES / "inference").glob("dedicated_log*"))
    expected = None
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would go")
    for setting in ("", str(blocked), str(tmp_path / "fine")):
        monkeypatch.setenv(cache.ENV, setting)
        render.templates.cache_clear()
        out = tmp_path / f"out{len(setting)}"
        write_report(log, out, options=Options(highlight_mb=1))
        expected = expected or files_of(out)
        assert files_of(out) == expected
    render.templates.cache_clear()
    assert cache.folder("x") is not None and cache.root() == tmp_path / "fine"
    monkeypatch.setenv(cache.ENV, "")
    assert cache.root() is None and cache.folder("x") is None


def test_corrupt_compiled_templates_are_compiled_again(tmp_path, own_cache):
    log = next((TRACES / "inference").glob("dedicated_log*"))
    write_report(log, tmp_path / "first")
    compiled = list(own_cache.glob("pages-*/*.code"))
    assert compiled
    for path in compiled:
        path.write_bytes(path.read_bytes()[:20])  # truncated mid-file
    render.templates.cache_clear()
    write_report(log, tmp_path / "second")
    assert files_of(tmp_path / "first") == files_of(tmp_path / "second")


def test_trimming_keeps_the_cap_and_deletes_only_cache_entries(tmp_path):
    folder = tmp_path / "highlight"
    folder.mkdir()
    mine = folder / "notes.txt"
    mine.write_text("not ours")
    store = HighlightCache(folder, cap=10_000)
    for n in range(30):
        store.put(f"k{n:02d}", "x" * 1000)
        os.utime(folder / f"k{n:02d}.html", (n, n))  # k00 is the oldest
    store.get("k00")  # used just now: kept
    store.trim()
    left = sorted(p.name for p in folder.glob("*.html"))
    assert sum(p.stat().st_size for p in folder.glob("*.html")) <= 7_500
    assert "k00.html" in left and "k29.html" in left and "k01.html" not in left
    assert mine.read_text() == "not ours"


def test_the_shipped_pygments_css_is_what_the_pinned_pygments_writes():
    shipped = (render.STATIC_DIR / "pygments.css").read_text()
    assert shipped == pygments_css(), "regenerate: python -c 'from tlparse_py.report.highlight import pygments_css; print(pygments_css(), end=\"\")' > templates/static/pygments.css"


@pytest.fixture
def compiled(tmp_path, monkeypatch):
    """Templates compiled as a wheel build compiles them, where `render` looks for them."""
    folder = tmp_path / "compiled_templates"
    render.compile_templates(folder)
    monkeypatch.setattr(render, "COMPILED_DIR", folder)
    render.templates.cache_clear()
    yield folder
    render.templates.cache_clear()


def no_compiling(name, source, key):
    raise AssertionError(f"{name} compiled at run time")


@pytest.mark.parametrize("scenario", ["training", "failure", "export_failure"])
def test_compiled_templates_are_used_and_write_the_same_report(tmp_path, own_cache, compiled, monkeypatch, scenario):
    log = next((TRACES / scenario).glob("dedicated_log*"))
    with_compiled = tmp_path / "with"
    with monkeypatch.context() as patched:
        patched.setattr(render, "generate_module", no_compiling)
        write_report(log, with_compiled, options=Options(export=scenario.startswith("export")))
    assert not list(own_cache.glob("pages-*/*")), "nothing compiled at run time"

    monkeypatch.setattr(render, "COMPILED_DIR", tmp_path / "none")
    render.templates.cache_clear()
    from_source = tmp_path / "source"
    write_report(log, from_source, options=Options(export=scenario.startswith("export")))
    assert list(own_cache.glob("pages-*/*.code")), "compiled from the source, and cached"
    assert files_of(with_compiled) == files_of(from_source)


@pytest.mark.parametrize("stale", ["template", "compiled_from", "broken"])
def test_stale_compiled_templates_are_not_used(tmp_path, own_cache, compiled, monkeypatch, stale):
    """Compiled from another source (or by another code generator, or tlparse-py), or unloadable: the source wins."""
    module = compiled / f"{render.module_name('page_error.html.j2')}.py"
    if stale == "broken":
        module.write_text("this is not Python\n")
    elif stale == "template":
        templates = tmp_path / "templates"
        templates.mkdir()
        for name in render.template_names():
            text = (render.TEMPLATE_DIR / name).read_text()
            (templates / name).write_text(text.replace("<h1>", "<h1><!-- edited -->") if name == "page_error.html.j2" else text)
        monkeypatch.setattr(render, "TEMPLATE_DIR", templates)
    else:
        module.write_text(module.read_text().replace("SOURCE = '", "SOURCE = 'other "))
    context = {"title": "t", "root": "", "source": {"path": "p"}, "compile_page": None, "detail": "boom"}
    with monkeypatch.context() as patched:
        patched.setattr(render, "generate_module", no_compiling)
        with pytest.raises(AssertionError, match="page_error.html.j2 compiled at run time"):
            render.render("page_error.html.j2", context)
    render.templates.cache_clear()
    page = render.render("page_error.html.j2", context)
    assert ("<!-- edited -->" in page) == (stale == "template")


@pytest.mark.parametrize("obj", [
    {"a": 1, "items": 2, "get": 3},  # keys that shadow dict methods: the methods win, as in Jinja
    {},
    {"real": "key"},
    __import__("collections").OrderedDict(a=1),
    3,
    "text",
])
@pytest.mark.parametrize("name", ["a", "items", "get", "missing", "real", "upper"])
def test_dict_lookups_answer_as_jinja_does(obj, name):
    jinjas = jinja2.Environment()
    for mine, theirs in ((templating.getattr_(obj, name), jinjas.getattr(obj, name)), (templating.getitem_(obj, name), jinjas.getitem(obj, name))):
        if isinstance(theirs, jinja2.Undefined):
            assert isinstance(mine, templating.Undefined)
        else:
            assert mine == theirs
