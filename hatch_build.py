"""Wheels carry the templates compiled by Jinja (`tlparse_py.report.render.compile_templates`: Jinja's
own `Environment.compile_templates`, a Python module per template, which pip turns into bytecode at
install), loaded at run time by Jinja's `ModuleLoader`: an installed tlparse-py never compiles a
template, not even on its first run. Editable installs compile the source templates on first use and
keep the code in the user's cache folder (Jinja's bytecode cache). See report/template_env.py."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CompiledTemplates(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        sys.path.insert(0, self.root)
        try:
            from tlparse_py.report.render import compile_templates
        finally:
            sys.path.remove(self.root)
        self._folder = Path(tempfile.mkdtemp(prefix="tlparse-py-templates-"))
        compile_templates(self._folder)
        build_data["force_include"][str(self._folder)] = "tlparse_py/compiled_templates"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        folder = getattr(self, "_folder", None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
