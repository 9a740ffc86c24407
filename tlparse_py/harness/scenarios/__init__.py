"""Scenario programs for the compile harness.

Each module here is a self-contained torch program that the harness runs as a *script*
(`python <file>`) in its own subprocess, with TORCH_TRACE or TORCH_DTRACE already set.
They import torch at module level, so never import them from the harness (or from
anything else in tlparse_py): the registry of scenarios lives in `..registry`.
"""
