"""`python -m tlparse_py`: the same command as `tlparse-py`."""

from .entry import main

main()
