"""Scenario `gb_base`: a small program with one graph break (the base of the gb_extra pair).

Runs gb_program.py (see its docstring) with EXTRA_BREAK = False.

Expected records: dynamo_graph_break_reason artifacts, resume functions of `prepare`/`step`.
"""

import os
import runpy

if __name__ == "__main__":
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gb_program.py")
    runpy.run_path(program, init_globals={"EXTRA_BREAK": False}, run_name="__main__")
