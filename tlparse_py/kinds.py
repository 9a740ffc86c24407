"""The plugin API for record kinds: what a package declaring kinds of its own imports.

The registry lives in `tlparse_py.analysis.kinds` (records → analysis); this module hands its public
names on under the stable path plugins use (`from tlparse_py.kinds import declare, kind, ...`).
"""

from __future__ import annotations

from .analysis import kinds as _registry
from .analysis.kinds import *  # noqa: F403  (the plugin API is the registry's public names)

__all__ = list(_registry.__all__)
