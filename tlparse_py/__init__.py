"""tlparse-py: static HTML reports from PyTorch TORCH_TRACE structured logs."""

__version__ = "0.1.0"
