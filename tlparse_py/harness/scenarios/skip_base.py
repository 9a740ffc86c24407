"""Scenario `skip_base`: a small training loop whose forward compiles (the base of the skip_nan pair).

Runs skip_program.py (see its docstring) with NAN_CHECK = False: `Model.forward` compiles into
one graph, and its backward is compiled too.

Expected records: compilation_metrics for the forward, bwd_compilation_metrics for its backward.
"""

import os
import runpy

if __name__ == "__main__":
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "skip_program.py")
    runpy.run_path(program, init_globals={"NAN_CHECK": False}, run_name="__main__")
