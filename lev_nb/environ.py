"""Reading one variable of the process environment on the engine's hot paths.

``os.environ.get(name)`` runs four Python-level calls (the Mapping's ``get``, ``__getitem__``, the
key's encoder and the value's decoder); a run start reads a few dozen variables (the run store's
home, the configuration's path, every API key variable, the tracing switches), and with a thousand
runs those calls were a visible share of the engine thread. On POSIX, os.environ keeps its entries
as bytes in a plain dict, which :func:`env_value` reads directly.
"""

from __future__ import annotations

import os
import sys

__all__ = ["env_value"]

_ENCODING = sys.getfilesystemencoding()
_POSIX = os.name == "posix"


def env_value(name: str) -> str | None:
    """``os.environ.get(name)``: the same answer, read from os.environ's own table where it can."""
    environ = os.environ
    data = getattr(environ, "_data", None)  # looked up each time: a test may replace os.environ
    if _POSIX and type(data) is dict:
        raw = data.get(name.encode(_ENCODING, "surrogateescape"))
        return None if raw is None else raw.decode(_ENCODING, "surrogateescape")
    return environ.get(name)
