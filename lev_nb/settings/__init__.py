"""The user's configuration: ``$LEV_HOME/config.toml``, the environment and overrides -> typed settings.

A layer between ``blueprint`` and ``providers | scripting | store``: it reads the blueprint layer's
error helpers and read-path forms, and everything above asks it what this machine allows.

- :mod:`~lev_nb.settings.paths`: ``lev_home()`` and ``config_path()`` (the one reader of
  ``LEV_HOME`` / ``LEV_CONFIG``; cheap to import).
- :mod:`~lev_nb.settings.model`: the typed :class:`Settings` (field names are the TOML keys) and
  :class:`Source` (where a value came from).
- :mod:`~lev_nb.settings.schema`: the format read off those types, and :data:`ENVIRONMENT`.
- :mod:`~lev_nb.settings.loader`: ``current()``, ``configure()``, launch options, and the one
  precedence order: launch option (``lev -c``) > session (``lev_nb.configure``) > environment >
  config.toml > built-in default.
- :mod:`~lev_nb.settings.grants`: the ``[read_paths]`` grant report and the ``lev validate``
  lint environment (docs/blueprint.md#validation-and-lints).
- :class:`ConfigError`: a malformed configuration, located by file, line and key path.

``lev_nb.config()`` is :func:`current`; ``lev_nb.configure(**overrides)`` is :func:`configure`.
Submodules load on first use so that ``lev_nb.settings.paths`` stays cheap for the run store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .errors import ConfigError, ConfigWarning
    from .grants import ReadPathReport, configured_lint_env, lint_env, read_path_report
    from .loader import clear_session, configure, current, launch_options, load, rows
    from .model import Settings, Source
    from .paths import config_path, lev_home

__all__ = [
    "ConfigError",
    "ConfigWarning",
    "ReadPathReport",
    "Settings",
    "Source",
    "clear_session",
    "config_path",
    "configure",
    "configured_lint_env",
    "current",
    "launch_options",
    "lev_home",
    "lint_env",
    "load",
    "read_path_report",
    "rows",
]

_LAZY = {
    "ConfigError": "errors",
    "ConfigWarning": "errors",
    "Settings": "model",
    "Source": "model",
    "ReadPathReport": "grants",
    "read_path_report": "grants",
    "lint_env": "grants",
    "configured_lint_env": "grants",
    "clear_session": "loader",
    "configure": "loader",
    "current": "loader",
    "launch_options": "loader",
    "load": "loader",
    "rows": "loader",
    "config_path": "paths",
    "lev_home": "paths",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lev_nb.settings' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"lev_nb.settings.{module}"), name)
    globals()[name] = value
    return value
