"""Scenario `gb_extra`: `gb_base` with exactly one more graph break (in `head`).

Runs gb_program.py (see its docstring) with EXTRA_BREAK = True, so frame names, file name,
line numbers and user stacks match gb_base's log except for the one extra break and what
follows from it (another dynamo_graph_break_reason, a resume function in `head`).
"""

import os
import runpy

if __name__ == "__main__":
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gb_program.py")
    runpy.run_path(program, init_globals={"EXTRA_BREAK": True}, run_name="__main__")
