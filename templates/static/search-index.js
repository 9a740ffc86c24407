// The search index's manifest. This default (no index: the search box stays hidden) is what pages
// without an index keep (multi-rank landing, diff); a report's pipeline writes its own over it.
window.TLPARSE_SEARCH_INDEX = {"shards": [], "entries": 0, "note": ""};
