"""The compile harness: small torch programs run under TORCH_TRACE to make real logs.

Run it as `python -m tlparse_py.harness --out DIR [SCENARIO ...]` (see `cli`), or
`--fixtures DIR` to refresh the committed test fixtures.

This subpackage is a development tool. Nothing else in tlparse_py imports it, and it never
imports torch itself: each scenario (`scenarios/<name>.py`) runs in its own subprocess, so
tracing is configured through the environment before torch is imported, and tlparse_py
keeps working without torch installed.
"""
