"""Where lev_nb keeps its files: ``$LEV_HOME`` (default ``~/.lev``) and the user's ``config.toml``.

The one reader of ``LEV_HOME`` and ``LEV_CONFIG`` (and of the upstream's names for them,
``LEVIATH_HOME`` and ``LEVIATH_CONFIG_PATH``, honoured when ours are not set); the run store, the
settings loader and the agent search path all ask here. Both are read at call time, so a test (or a notebook) that changes the
environment is honoured at once. Nothing heavy is imported, so the run store can use it cheaply.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from lev_nb.environ import env_value

__all__ = ["CONFIG_ENV", "CONFIG_FILE", "HOME_ENV", "config_path", "in_home", "lev_home"]

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
        if isinstance(home, Path):
            return home  # immutable: no copy needed
        return _path(home) if type(home) is str else Path(home)
    return _home(env_value(HOME_ENV) or env_value(UPSTREAM_HOME_ENV), env_value("HOME"))


def config_path() -> Path:
    """The user's configuration file: ``$LEV_CONFIG`` (or ``$LEVIATH_CONFIG_PATH``) if set, else
    ``config.toml`` in :func:`lev_home`."""
    env = env_value(CONFIG_ENV) or env_value(UPSTREAM_CONFIG_ENV)
    return _path(env) if env else _in(lev_home(), CONFIG_FILE)


def in_home(name: str, home: str | os.PathLike[str] | None = None) -> Path:
    """``name`` in :func:`lev_home` (``runs``, ``providers``, ``tools``...), built once per home."""
    return _in(lev_home(home), name)


# The paths are asked for many times a run (the store, the settings cache key, the sandbox); built
# once per distinct value (Paths are immutable), they cost a dictionary lookup.
@functools.lru_cache(maxsize=32)
def _home(env: str | None, user_home: str | None) -> Path:
    return Path(env) if env else Path.home() / ".lev"


@functools.lru_cache(maxsize=32)
def _path(text: str) -> Path:
    return Path(text)


@functools.lru_cache(maxsize=64)
def _in(home: Path, name: str) -> Path:
    return home / name
