"""Pages and pieces of pages written as plain Python functions that return their HTML.

The pages written once per compile id (the compile page, the compilation-metrics page) are the
report's hot pages: on a log of thousands of small compiles a template engine's per-value calls
were most of the run. They are written here, and so are the pieces of markup the templates share
with them (the page's shell, frames, stacks, files, sections...), which `render` makes template
globals, so that each piece of markup is defined once.
"""
