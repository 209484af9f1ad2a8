"""The one exception a bad user configuration raises, located like a blueprint error.

A :class:`ConfigError` is a :class:`lev_nb.errors.LocatedError`, as
:class:`lev_nb.blueprint.BlueprintError` is: ``path``, ``key_path``, ``line`` / ``column`` (1-based,
where known), ``hint`` (a "did you mean" or what to do), ``kind`` and the bare ``message``. A value
that came from somewhere other than the file (an environment variable, ``lev_nb.configure()``, a
``lev -c`` option) names that ``origin`` instead of a file and line.
"""

from __future__ import annotations

from pathlib import Path

from lev_nb.errors import ErrorKind, LocatedError

ConfigErrorKind = ErrorKind


class ConfigWarning(UserWarning):
    """Something the configuration file says that nothing reads (an unknown or upstream-only key):
    told once per process, and the file still loads."""


class ConfigError(LocatedError):
    """A configuration that cannot be used: unreadable, not TOML, or a key or value the format refuses.

    ``kind`` is "read" (the file exists but cannot be read), "parse" (not TOML) or "validation"
    (the default: an unknown key, a value of the wrong type or out of range). ``origin`` names a
    non-file source ("environment variable LEV_X", "lev_nb.configure()", "the -c option").
    """

    unnamed = "<config>"
    default_kind: ErrorKind = "validation"


def unreadable(path: Path, exc: Exception) -> ConfigError:
    """The ConfigError for a configuration file that exists but cannot be read. A file where a
    folder on its path should be (LEV_HOME set to a file, say) is named with what to do, not left
    as the system's "Not a directory"."""
    if isinstance(exc, NotADirectoryError):
        blocker = next((folder for folder in path.parents if folder.is_file()), None)
        if blocker is not None:
            return ConfigError(f"cannot be read: {blocker} is a file, where a folder is needed", path=path,
                               kind="read", hint="point LEV_HOME or LEV_CONFIG at a folder, or move that file away")
    return ConfigError(f"cannot be read: {exc}", path=path, kind="read")
