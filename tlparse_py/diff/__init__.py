"""`tlparse-py diff`: what changed between two runs (traces or reports).

- `load`: each side as a summary dict (trace → analysis, report folder → its summary.json);
- `analysis.comparison`: two summaries → the typed diff (`analysis.compared.Diff`), as `diff.json` holds it (schema: diff.schema.json);
- `view`: the page context and the Markdown summary (pure);
- `output`: DIR/index.html + DIR/diff.json, all or nothing; the Markdown file;
- `gates`: the generic `NAME OP NUMBER` condition language of `--fail-on`.
"""
