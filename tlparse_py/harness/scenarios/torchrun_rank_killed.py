"""Scenario `torchrun_rank_killed`: torchrun_job.py run with MODE = "rank_killed" (see its docstring)."""

import os
import runpy

if __name__ == "__main__":
    base = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun_job.py")
    runpy.run_path(base, init_globals={"MODE": "rank_killed"}, run_name="__main__")
