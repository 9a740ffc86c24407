"""The analysis in a real notebook: a kernel compiles a small model under `tlparse_py.trace()` and
displays its analysis; the HTML it shows is checked against the trace's raw log."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from test_new_scenarios import artifacts, kind, parse

needs = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "nbclient", "nbformat", "ipykernel")),
    reason="needs torch, nbclient, nbformat and ipykernel",
)
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

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


# Two trace() blocks in one process (one kernel), then the interpreter exits
TWO_BLOCKS = r'''
import gc, json, sys, torch, tlparse_py

def f(x):
    return x + 1

def g(x):
    return x * 3

def h(x):
    return x - 1

def logged_frames(logs):
    """The functions the raw logs' dynamo_start records name (the innermost frame of each stack)."""
    names = []
    for log in logs:
        for line in log.read_text().splitlines():
            if '"dynamo_start"' in line:
                names.append(json.loads(line.split("] ", 1)[1])["dynamo_start"]["stack"][-1]["name"])
    return names

with tlparse_py.trace() as t1:
    torch.compile(f, backend="eager")(torch.ones(3))
with tlparse_py.trace() as t2:
    torch.compile(g, backend="eager")(torch.ones(3))
out = {"folders": [str(t1.folder), str(t2.folder)],
       "logged": [logged_frames(t1.logs), logged_frames(t2.logs)],
       "analysed": [[c.frame for c in t.analysis.summary().compiles] for t in (t1, t2)]}
with tlparse_py.trace(sys.argv[1]) as t3:
    torch.compile(h, backend="eager")(torch.ones(3))
kept = sorted(p.name for p in t3.folder.iterdir())
try:
    with tlparse_py.trace(sys.argv[1]) as t4:
        torch.compile(f, backend="eager")(torch.ones(4, 4))
    out["second block in the same folder"] = [c.frame for c in t4.analysis.summary().compiles]
except FileExistsError as exc:
    out["refused"] = str(exc)
out["kept"] = kept == sorted(p.name for p in t3.folder.iterdir())
first = t1.folder
del t1
gc.collect()
out["removed once unused"] = not first.exists()
out["second still there"] = t2.folder.is_dir()
print(json.dumps(out))
'''


@needs_torch
def test_each_trace_block_has_its_own_folder_and_temporary_ones_are_removed(tmp_path):
    """Issue 34 item 15: two blocks tracing into one folder analysed the first block's frame in the
    second; issue 33 item 8: `trace()` left its temporary folders behind."""
    import json
    import os
    import subprocess
    import sys

    temp = tmp_path / "tmp"
    temp.mkdir()
    given = tmp_path / "given"
    script = tmp_path / "two_blocks.py"
    script.write_text(TWO_BLOCKS)
    result = subprocess.run([sys.executable, str(script), str(given)], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "TMPDIR": str(temp)})
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    first, second = out["folders"]
    assert first != second and all(Path(f).parent == temp for f in out["folders"])
    assert out["logged"] == [["f"], ["g"]] and out["analysed"] == out["logged"]  # each block its own frame only
    assert "second block in the same folder" not in out, out
    assert str(given) in out["refused"] and "already holds a trace" in out["refused"] and out["kept"]
    assert out["removed once unused"] and out["second still there"]
    assert not [p.name for p in temp.iterdir() if p.name.startswith("tlparse-py-trace-")]  # none left at exit
    assert len(list(given.glob("dedicated_log_torch_trace*"))) == 1  # the given folder is the user's: kept


SHOW_TWICE = '''
import gc, sys
from pathlib import Path
import tlparse_py

first = tlparse_py.show(sys.argv[1])
folder = first.report_dir.parent
assert first.single_file.is_file() and first._repr_html_().startswith("<iframe srcdoc=")
del first
gc.collect()
print("dropped", folder.exists())
kept = tlparse_py.show(sys.argv[1])  # still shown when the interpreter exits
print("kept", kept.report_dir.parent.exists())
try:
    tlparse_py.show(sys.argv[2])  # a trace that cannot be read
except Exception as exc:
    print("refused", type(exc).__name__)
'''


def test_show_without_a_folder_leaves_no_temporary_folder_behind(tmp_path):
    """Each show() of a trace without `out` wrote a `tlparse-py-report-*` folder in the temporary
    folder and left it there: now it goes once its `Shown` is no longer used, or at exit."""
    import os
    import subprocess
    import sys

    temp = tmp_path / "tmp"
    temp.mkdir()
    script = tmp_path / "show.py"
    script.write_text(SHOW_TWICE)
    trace = Path(__file__).resolve().parent / "fixtures" / "traces" / "graph_break"
    result = subprocess.run([sys.executable, str(script), str(trace), str(tmp_path / "missing")], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "TMPDIR": str(temp)})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["dropped False", "kept True", "refused InputError"], result.stdout
    assert not [p.name for p in temp.iterdir() if p.name.startswith("tlparse-py")]
