"""Every compile page, linked to its neighbours when asked for (`views.compile.PageRefs`): the same
links as a list of them all made at once, on real traces with recompiles, restarts, reset() and
compiled autograd, without keeping a linked ref a page."""

from __future__ import annotations

import pytest

from conftest import TRACES
from tlparse_py.pipeline import analyze_logs
from tlparse_py.report.views.compile import PageRef, page_ref, page_refs, pages_in_log_order


def linked_all_at_once(report) -> list[PageRef]:
    """Each page with the compiles just before and after it in log order and its id's other pages."""
    plain = [page_ref(report, key, generation) for key, generation in pages_in_log_order(report)]
    compiles = [page for page in plain if page.is_compile]
    linked = []
    for page in plain:
        before = after = None
        if page.is_compile:
            place = next(i for i, c in enumerate(compiles) if c is page)
            before = compiles[place - 1] if place else None
            after = compiles[place + 1] if place + 1 < len(compiles) else None
        others = tuple(p for p in plain if p.key == page.key and p is not page)
        linked.append(PageRef(page.key, page.generation, page.url, page.label, page.is_compile, before, after, others))
    return linked


@pytest.mark.parametrize("name", ["reset_reuse", "reset_phases", "recompile_restart", "compiled_autograd", "graph_break", "processes"])
def test_each_page_is_linked_as_a_list_made_at_once_links_it(name):
    log = next(p for p in sorted((TRACES / name).iterdir()) if p.name.startswith("dedicated_log"))
    report = analyze_logs([log])
    pages, expected = page_refs(report), linked_all_at_once(report)
    assert len(pages) == len(expected) > 1
    assert list(pages) == expected
    assert pages[-1] == expected[-1] and pages[1:3] == expected[1:3]
    with pytest.raises(IndexError):
        pages[len(expected)]
    if name.startswith("reset"):
        assert any(page.others for page in pages), "a reused id's pages name each other"


@pytest.mark.parametrize("name", ["recompile_restart", "compiled_autograd", "graph_break", "processes", "many_small"])
def test_a_log_without_a_reset_places_each_page_as_the_general_order_does(name):
    """Without a reset every page is its id's in generation 0, read from the directory as it comes:
    the same pages, in the same order, as the general walk over generations and restarts."""
    from tlparse_py.report.views.compile import _pages_after_resets

    log = next(p for p in sorted((TRACES / name).iterdir()) if p.name.startswith("dedicated_log"))
    report = analyze_logs([log])
    assert not report.generations.resets
    assert list(pages_in_log_order(report)) == _pages_after_resets(report) != []
