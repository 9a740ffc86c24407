"""The commands of `tlparse-py`: report (the default), diff, run."""
