"""`python -m tlparse_py`: the same command as `tlparse-py`."""

from .cli import main

main(prog_name="tlparse-py")
