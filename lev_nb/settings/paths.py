"""Where lev_nb keeps its files: ``$LEV_HOME`` (default ``~/.lev``) and the user's ``config.toml``.

The one reader of ``LEV_HOME`` and ``LEV_CONFIG`` (and of the upstream's names for them,
``LEVIATH_HOME`` and ``LEVIATH_CONFIG_PATH``, honoured when ours are not set); the run store, the
settings loader and the agent search path all ask here. Both are read at call time, so a test (or a notebook) that changes the
environment is honoured at once. Nothing heavy is imported, so the run store can use it cheaply.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CONFIG_ENV", "CONFIG_FILE", "HOME_ENV", "config_path", "lev_home"]

HOME_ENV = "LEV_HOME"
CONFIG_ENV = "LEV_CONFIG"
# The upstream runtime's variables, read when ours are not set, so a user's environment carries over.
UPSTREAM_HOME_ENV = "LEVIATH_HOME"
UPSTREAM_CONFIG_ENV = "LEVIATH_CONFIG_PATH"
CONFIG_FILE = "config.toml"


def lev_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The lev_nb home: ``home`` if given, else ``$LEV_HOME`` (or ``$LEVIATH_HOME``), else ``~/.lev``
    (read at call time)."""
    if home is not None:
        return Path(home)
    env = os.environ.get(HOME_ENV) or os.environ.get(UPSTREAM_HOME_ENV)
    return Path(env) if env else Path.home() / ".lev"


def config_path() -> Path:
    """The user's configuration file: ``$LEV_CONFIG`` (or ``$LEVIATH_CONFIG_PATH``) if set, else
    ``config.toml`` in :func:`lev_home`."""
    env = os.environ.get(CONFIG_ENV) or os.environ.get(UPSTREAM_CONFIG_ENV)
    return Path(env) if env else lev_home() / CONFIG_FILE
