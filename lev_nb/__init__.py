"""lev_nb: design, try and run multi-stage LLM agents in a notebook.

The public API is deliberately small; heavier submodules load on first use so that
``import lev_nb`` stays cheap in a notebook kernel.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
