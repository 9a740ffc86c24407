"""Scenario `collectives_gloo_fail`: collectives.py run with MODE = "gloo_fail" (see its docstring)."""

import os
import runpy

if __name__ == "__main__":
    base = os.path.join(os.path.dirname(os.path.abspath(__file__)), "collectives.py")
    runpy.run_path(base, init_globals={"MODE": "gloo_fail"}, run_name="__main__")
