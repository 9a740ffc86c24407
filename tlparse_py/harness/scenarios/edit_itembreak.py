"""Scenario `edit_itembreak`: the `itembreak` version of edit_program.py's model, checked out in `main/`.

See edit_program.py: the edit_* scenarios are one program before and after the edits a pull
request makes, for `tlparse-py diff`.
"""

import os
import runpy

if __name__ == "__main__":
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "edit_program.py")
    runpy.run_path(program, init_globals={"EDIT": "itembreak", "CHECKOUT": "main"}, run_name="__main__")
