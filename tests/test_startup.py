"""Start-up: a report on a small log imports only what it uses (issue 35).

Most of a small report's time was Python importing modules; these tests guard what was taken off
that path, without timing anything (benchmarks/profile_small.py times it): a single log's report
renders no template, so Jinja is not imported (it is, for the multi-rank, diff and vLLM pages, and
then loads the templates compiled before: Jinja's bytecode cache in the cache folder, or a wheel's
compiled templates); the other commands and the multi-rank, diff and live code stay unloaded;
regular expressions are compiled when first used.
"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import TRACES

LOG = next((TRACES / "export").glob("dedicated_log*.log"))  # one of the smallest fixture logs

# At exit (the report leaves through os._exit once the atexit hooks have run), the modules loaded.
PROBE = """
import atexit, sys
atexit.register(lambda: print("MODULES", " ".join(sorted(sys.modules)), flush=True))
sys.argv = ["tlparse-py", *sys.argv[1:]]
from tlparse_py.entry import main
main()
"""

NOT_LOADED = (
    "tlparse_py.commands.diff", "tlparse_py.commands.watch", "tlparse_py.commands.run",
    "tlparse_py.commands.serve", "tlparse_py.commands.pack",
    "tlparse_py.multirank", "tlparse_py.diff", "tlparse_py.live", "tlparse_py.notebook",
    "tlparse_py.report.pack", "tlparse_py.analysis.pairing", "tlparse_py.analysis.comparison",
    "tlparse_py.analysis.rank_timeline", "tlparse_py.report.html.ranks_svg", "tlparse_py.report.html.diff_svg",  # other pages' pictures
    "pygments", "platformdirs",  # highlighting is off by default; the cache folder is given
    "statistics",  # only to combine ranks' totals
    "jinja2", "tlparse_py.report.template_env",  # every page of a single log's report is Python
)


def loaded_by(args: list[str], env: dict[str, str]) -> set[str]:
    run = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    line = next(line for line in run.stdout.splitlines() if line.startswith("MODULES "))
    return set(line.split()[1:])


def unwanted(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == name or m.startswith(name + ".") for name in names))


def test_a_small_report_imports_only_what_it_uses(tmp_path):
    env = {**os.environ, "TLPARSE_PY_CACHE_DIR": str(tmp_path / "cache")}
    args = [str(LOG), "-o", str(tmp_path / "out"), "--overwrite", "--no-browser"]
    modules = loaded_by(args, env)
    assert unwanted(modules, NOT_LOADED) == []
    assert (tmp_path / "out" / "index.html").is_file() and (tmp_path / "out" / "failures_and_restarts.html").is_file()
    assert not list((tmp_path / "cache").glob("templates-*/*"))  # no template compiled, none loaded


def test_version_imports_neither_click_nor_the_pipeline():
    probe = "import sys; sys.argv = ['tlparse-py', '--version']\nfrom tlparse_py.entry import main\nmain()\nprint(sorted(m for m in sys.modules if m.startswith(('tlparse_py', 'click'))))"
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert shown.splitlines()[-1] == "['tlparse_py', 'tlparse_py._version', 'tlparse_py.entry']"


def test_the_notebook_api_imports_no_command_line_and_no_jinja(tmp_path):
    probe = (f"import sys, tlparse_py\ntlparse_py.analyze({str(LOG)!r})\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'jinja2') or m.startswith('tlparse_py.commands')))")
    env = {**os.environ, "TLPARSE_PY_CACHE_DIR": str(tmp_path / "cache")}
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env).stdout
    assert shown.splitlines()[-1] == "[]"


def test_module_level_patterns_are_compiled_when_first_used():
    from tlparse_py import patterns

    pattern = patterns.lazy(r"(a+)(b)?")
    assert "match" not in vars(pattern)  # nothing compiled yet
    assert pattern.match("aab").groups() == ("aa", "b") and pattern.groups == 2
    assert vars(pattern)["search"].__self__.pattern == r"(a+)(b)?"  # the compiled pattern's own methods from now on
    assert patterns.lazy(rb"\n\t").search(b"x\n\ty").start() == 1
