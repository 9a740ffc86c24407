"""The analysis in a real notebook: a kernel compiles a small model under `tlparse_py.trace()` and
displays its analysis; the HTML it shows is checked against the trace's raw log."""

from __future__ import annotations

import importlib.util
import re

import pytest

from test_new_scenarios import artifacts, kind, parse

needs = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "nbclient", "nbformat", "ipykernel")),
    reason="needs torch, nbclient, nbformat and ipykernel",
)

PROGRAM = '''
import torch, tlparse_py

def f(x):
    x = x + 1
    print("a graph break")
    return x * 2

with tlparse_py.trace({folder!r}) as t:
    torch.compile(f, backend="eager")(torch.ones(3))
t.analysis
'''


@needs
def test_a_notebook_traces_a_block_and_shows_its_analysis(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    trace = tmp_path / "trace"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(PROGRAM.format(folder=str(trace))),
        nbformat.v4.new_code_cell(f"tlparse_py.show({str(trace)!r}, {str(tmp_path / 'report')!r})"),
    ]
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    (log,) = sorted(trace.glob("dedicated_log_torch_trace*"))
    recs = parse(log)
    breaks = artifacts(recs, "dynamo_graph_break_reason")
    metrics = kind(recs, "compilation_metrics")
    assert breaks and metrics  # the block was traced in the notebook's own process
    summary = next(o["data"]["text/html"] for o in notebook.cells[0].outputs if "text/html" in o.get("data", {}))
    cells = dict(re.findall(r"<tr><th>([^<]+)</th><td class=\"num\">([^<]+)</td></tr>", summary))
    assert cells["graph breaks"] == str(len(breaks)) and cells["compiles"] == str(len(metrics))
    registry = {re.search(r"gb/(gb\d+)\.html", b.payload).group(1).upper() for b in breaks}
    assert all(f"<code>{gb}</code>" in summary for gb in registry)
    assert "Hint:" in summary and "print" in summary
    shown = next(o["data"]["text/html"] for o in notebook.cells[1].outputs if "text/html" in o.get("data", {}))
    assert shown.startswith("<iframe srcdoc=") and "torch.compile report" in shown
    assert (tmp_path / "report" / "index.html").is_file()


README = __import__("pathlib").Path(__file__).resolve().parents[1] / "README.md"


@needs
def test_the_readme_notebook_example_runs_as_written(tmp_path):
    """The README's Notebooks block, verbatim, as a script (from a folder where its fixture path resolves)."""
    import subprocess
    import sys

    block = re.search(r"## Notebooks\n.*?```python\n(.*?)```", README.read_text(), re.S).group(1)
    (tmp_path / "tests").symlink_to(README.parent / "tests")
    script = tmp_path / "example.py"
    script.write_text(block + "\nprint(t.analysis.totals()['graph_breaks'], (t.folder / 'x').parent.is_dir())\n")
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "1 True"
    assert (tmp_path / "tl_nb" / "index.html").is_file() and (tmp_path / "tl_nb.html").is_file()
