"""Scenario `skip_nan`: skip_base with a NaN check in its layer loop; Dynamo skips the forward.

Runs skip_program.py (see its docstring) with NAN_CHECK = True: a graph break in a loop, so the
forward runs eagerly. Same line count as skip_base.py, so both stacks read alike.

Expected records: a wrapped dynamo_graph_break_reason; compilation_metrics with "frame skipped".
"""

import os
import runpy

if __name__ == "__main__":
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "skip_program.py")
    runpy.run_path(program, init_globals={"NAN_CHECK": True}, run_name="__main__")
