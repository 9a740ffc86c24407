"""Analysis → report: numbered outputs (`outputs`), view models (`views/`), pages rendered with Jinja
(`render`, `highlight`), the search index, `summary.md`, one-file packing, and the only code that
writes (`writer`)."""
