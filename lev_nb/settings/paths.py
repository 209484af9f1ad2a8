"""Where lev_nb keeps its files: ``$LEV_HOME`` (default ``~/.lev``) and the user's ``config.toml``.

The one reader of ``LEV_HOME`` and ``LEV_CONFIG``; the run store, the settings loader and the agent
search path all ask here. Both are read at call time, so a test (or a notebook) that changes the
environment is honoured at once. Nothing heavy is imported, so the run store can use it cheaply.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CONFIG_ENV", "CONFIG_FILE", "HOME_ENV", "config_path", "lev_home"]

HOME_ENV = "LEV_HOME"
CONFIG_ENV = "LEV_CONFIG"
CONFIG_FILE = "config.toml"


def lev_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The lev_nb home: ``home`` if given, else ``$LEV_HOME``, else ``~/.lev`` (read at call time)."""
    if home is not None:
        return Path(home)
    env = os.environ.get(HOME_ENV)
    return Path(env) if env else Path.home() / ".lev"


def config_path() -> Path:
    """The user's configuration file: ``$LEV_CONFIG`` if set, else ``$LEV_HOME/config.toml``."""
    env = os.environ.get(CONFIG_ENV)
    return Path(env) if env else lev_home() / CONFIG_FILE
