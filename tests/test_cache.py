"""The user's cache folder: compiled templates (Jinja's bytecode cache) and Pygments results kept
between runs; and the compiled templates a wheel carries (Jinja's `ModuleLoader`).

A warm cache must never change a report, a broken one must never fail it, and trimming must only
ever delete the cache's own entries.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import TRACES
from tlparse_py.report import cache, render, template_env
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
    render.environment.cache_clear()
    yield folder
    render.environment.cache_clear()


def test_a_warm_cache_gives_the_same_report_and_is_used(tmp_path, own_cache, monkeypatch):
    log = next((TRACES / "training").glob("dedicated_log*"))
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    write_report(log, cold, options=Options(highlight_mb=64))
    entries = list(own_cache.glob("highlight-*/*.html"))
    assert len(entries) > 10
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
        render.environment.cache_clear()
        out = tmp_path / f"out{len(setting)}"
        write_report(log, out, options=Options(highlight_mb=1))
        expected = expected or files_of(out)
        assert files_of(out) == expected
    render.environment.cache_clear()
    assert cache.folder("x") is not None and cache.root() == tmp_path / "fine"
    monkeypatch.setenv(cache.ENV, "")
    assert cache.root() is None and cache.folder("x") is None


def test_corrupt_compiled_templates_are_compiled_again(tmp_path, own_cache):
    log = next((TRACES / "vllm_piecewise").glob("dedicated_log*"))  # its index is vLLM's summary, a template
    write_report(log, tmp_path / "first")
    compiled = list(own_cache.glob("templates-*/__jinja2_*.cache"))
    assert compiled
    for path in compiled:
        path.write_bytes(path.read_bytes()[:20])  # truncated mid-file
    render.environment.cache_clear()
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
    render.environment.cache_clear()
    yield folder
    render.environment.cache_clear()


@pytest.mark.parametrize("scenario", ["vllm_piecewise"])  # a single log's other pages are Python: vLLM's summary is a template
def test_compiled_templates_are_used_and_write_the_same_report(tmp_path, own_cache, compiled, monkeypatch, scenario):
    log = next((TRACES / scenario).glob("dedicated_log*"))
    with_compiled = tmp_path / "with"
    write_report(log, with_compiled, options=Options(export=scenario.startswith("export")))
    assert type(render.environment().loader).__name__ == "ModuleLoader"
    assert not list(own_cache.glob("templates-*/*")), "nothing compiled at run time"

    monkeypatch.setattr(render, "COMPILED_DIR", tmp_path / "none")
    render.environment.cache_clear()
    from_source = tmp_path / "source"
    write_report(log, from_source, options=Options(export=scenario.startswith("export")))
    assert type(render.environment().loader).__name__ == "FileSystemLoader"
    assert list(own_cache.glob("templates-*/__jinja2_*.cache")), "compiled from the source, and cached"
    assert files_of(with_compiled) == files_of(from_source)


@pytest.mark.parametrize("stale", ["template", "compiled_from", "missing_key"])
def test_stale_compiled_templates_are_not_used(tmp_path, own_cache, compiled, monkeypatch, stale):
    """Compiled from another source (or by another Jinja, or with other settings), or without its key: the source wins."""
    if stale == "template":
        templates = tmp_path / "templates"
        templates.mkdir()
        for name in template_env.template_names(render.TEMPLATE_DIR):
            text = (render.TEMPLATE_DIR / name).read_text()
            (templates / name).write_text(text.replace("<h1>", "<h1><!-- edited -->") if name == "rank_failed.html.j2" else text)
        monkeypatch.setattr(render, "TEMPLATE_DIR", templates)
    elif stale == "compiled_from":
        (compiled / template_env.KEY_FILE).write_text("another key\n")
    else:
        (compiled / template_env.KEY_FILE).unlink()
    context = {"title": "t", "root": "", "source": {"path": "p"}, "compile_page": None, "log": "l", "error": "boom"}
    page = render.render("rank_failed.html.j2", context)
    assert type(render.environment().loader).__name__ == "FileSystemLoader"
    assert ("<!-- edited -->" in page) == (stale == "template")


def test_the_compiled_templates_key_covers_every_template_and_jinja(tmp_path, monkeypatch):
    """The key changes with any template's text and with Jinja's version (its compiled code calls Jinja's runtime)."""
    templates = tmp_path / "templates"
    templates.mkdir()
    for name in template_env.template_names(render.TEMPLATE_DIR):
        (templates / name).write_bytes((render.TEMPLATE_DIR / name).read_bytes())
    key = template_env.templates_key(templates)
    assert key == template_env.templates_key(render.TEMPLATE_DIR)
    (templates / "base.html.j2").write_text((templates / "base.html.j2").read_text() + " ")
    assert template_env.templates_key(templates) != key
    monkeypatch.setattr(template_env.jinja2, "__version__", "0.0")
    assert template_env.templates_key(render.TEMPLATE_DIR) != key


def test_an_unwritable_template_cache_costs_only_a_compile(tmp_path, own_cache, monkeypatch):
    """Jinja's bytecode cache failing to write (a full disk, a read-only folder) never fails a page."""
    import tempfile

    def refuse(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", refuse)  # how Jinja's cache writes an entry
    context = {"title": "t", "root": "", "source": {"path": "p"}, "compile_page": None, "log": "l", "error": "boom"}
    assert "boom" in render.render("rank_failed.html.j2", context)
    assert not list(own_cache.glob("templates-*/__jinja2_*.cache"))
