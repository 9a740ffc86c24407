"""The wheel carries the templates, and a wheel-installed tlparse-py finds them (not only a source checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import jinja2
import pytest

from conftest import HERE
from logs import cid, line, write_log
from tlparse_py.report.render import TEMPLATE_DIR
from tlparse_py.report.template_env import KEY_FILE, template_names

ROOT = HERE.parent


def test_every_template_the_code_names_exists():
    sources = "".join(p.read_text() for p in (ROOT / "tlparse_py").rglob("*.py"))
    import re

    used = set(re.findall(r'"([a-z_]+\.html\.j2)"', sources))
    assert used and used <= set(template_names(TEMPLATE_DIR))
    assert (TEMPLATE_DIR / "static" / "report.css").is_file()


def test_wheel_ships_templates_and_renders_from_them(tmp_path):
    pytest.importorskip("hatchling")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    wheel = next((tmp_path / "dist").glob("tlparse_py-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "tlparse_py/templates/landing.html.j2" in names
    assert "tlparse_py/templates/static/report.css" in names
    index = f"tlparse_py/compiled_templates/{jinja2.ModuleLoader.get_module_filename('landing.html.j2')}"
    assert index in names and f"tlparse_py/compiled_templates/{KEY_FILE}" in names  # hatch_build.py: no template compiles at run time
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    log = write_log(tmp_path / "a.log", [line({"inductor_output_code": {}, **cid()}, "x = 1")])
    run = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from tlparse_py.cli import main; main(sys.argv[2:])",
         str(site), str(log), "-o", str(tmp_path / "out"), "--no-browser"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / "static" / "report.css").is_file()
    check = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from tlparse_py.report import render; print(render.TEMPLATE_DIR);"
         " print(type(render.environment().loader).__name__); print(render.environment().get_template('landing.html.j2').filename)", str(site)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TLPARSE_PY_CACHE_DIR": str(tmp_path / "cache")},
    )
    # the wheel's templates, compiled when it was built
    assert check.stdout.split() == [str(site / "tlparse_py" / "templates"), "ModuleLoader", str(site / index)], check.stderr
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob("templates-*/*"))


# What the wheel's build hook may import: the build-system requires (pyproject.toml) and the standard
# library. `pip install .` builds in an isolated environment holding only those: a module the hook
# imports that needs another dependency breaks the README's first command.
BUILD_PROBE = r"""
import sys, tomllib, importlib.abc
requires = tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]
allowed = {r.split(">")[0].split("=")[0].split("<")[0].strip().lower().replace("-", "_") for r in requires}
allowed |= {"markupsafe"}  # jinja2's own dependency, installed with it
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top in allowed or top in ("tlparse_py", "_distutils_hack"):
            return None
        raise ImportError(f"the wheel's build hook imports {name}, which the build-system requires do not install")
sys.meta_path.insert(0, Refuse())
import tempfile
from pathlib import Path
from tlparse_py.report.render import compile_templates
compile_templates(Path(tempfile.mkdtemp()) / "compiled")
print("ok")
"""


def test_the_wheel_build_hook_needs_only_the_build_requirements():
    done = subprocess.run([sys.executable, "-c", BUILD_PROBE], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
