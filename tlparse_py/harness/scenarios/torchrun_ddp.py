"""Scenario `torchrun_ddp`: torchrun_job.py run with MODE = "ddp" (see its docstring)."""

import os
import runpy

if __name__ == "__main__":
    base = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun_job.py")
    runpy.run_path(base, init_globals={"MODE": "ddp"}, run_name="__main__")
