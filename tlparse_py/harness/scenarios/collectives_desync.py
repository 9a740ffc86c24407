"""Scenario `collectives_desync`: collectives.py run with MODE = "desync" (see its docstring)."""

import os
import runpy

if __name__ == "__main__":
    base = os.path.join(os.path.dirname(os.path.abspath(__file__)), "collectives.py")
    runpy.run_path(base, init_globals={"MODE": "desync"}, run_name="__main__")
