"""Pages and pieces of pages written as plain Python functions that return their HTML.

The pages written once per compile id or record (the compile page, the compilation-metrics page,
and the code, pass diff, guards, guard details, kernel stack traces and provenance pages:
`record_pages`) are the report's hot pages: on a big log, or one of thousands of small compiles, a
template engine's per-value calls were most of the run. So are the index's pieces written once per
compile (`index_rows`), and the other pages of a single log's report: the index (`index_page`,
written in pieces), the failures page and the page put in place of one that could not be built
(`failures_page`), so that such a report never imports the template engine. They are written here,
and so are the pieces of markup the templates share with them (the page's shell, frames, stacks,
files, sections...), which `render` makes template globals, so that each piece of markup is defined
once.

Nothing here imports the view models (`views`, which import `render`, which imports this package):
the functions read them through the Protocols of `models`.
"""
