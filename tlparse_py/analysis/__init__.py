"""Records → analysis: the record kinds (`kinds/`) note typed facts in the store (`store`) while a log is
read; `compiles` answers the questions asked of it, once, for every view and command."""
