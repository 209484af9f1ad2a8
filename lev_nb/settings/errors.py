"""The one exception a bad user configuration raises, located like a blueprint error.

A :class:`ConfigError` has the shape of :class:`lev_nb.blueprint.BlueprintError`: ``path``,
``key_path``, ``line`` / ``column`` (1-based, where known), ``hint`` (a "did you mean" or what to
do), ``kind`` and the bare ``message``. A value that came from somewhere other than the file (an
environment variable, ``lev_nb.configure()``, a ``lev -c`` option) names that origin instead of a
file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from lev_nb.errors import location

ConfigErrorKind = Literal["read", "parse", "validation"]


class ConfigWarning(UserWarning):
    """Something the configuration file says that nothing reads (an unknown or upstream-only key):
    told once per process, and the file still loads."""


class ConfigError(ValueError):
    """A configuration that cannot be used: unreadable, not TOML, or a key or value the format refuses.

    ``kind`` is "read" (the file exists but cannot be read), "parse" (not TOML) or "validation"
    (an unknown key, a value of the wrong type or out of range). ``origin`` names a non-file
    source ("environment variable LEV_X", "lev_nb.configure()", "the -c option").
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        key_path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
        kind: ConfigErrorKind = "validation",
        origin: str | None = None,
    ) -> None:
        self.message = message
        self.path = Path(path) if path is not None else None
        self.key_path = key_path
        self.line = line
        self.column = column
        self.hint = hint
        self.kind = kind
        self.origin = origin
        super().__init__(self._render())

    def _render(self) -> str:
        if self.origin is not None:
            where = self.origin
        else:
            where = location(self.path, self.line, self.column, "<config>")
        text = f"{where}: "
        if self.key_path:
            text += f"{self.key_path}: "
        text += self.message
        if self.hint:
            text += f" ({self.hint})"
        return text

    @property
    def detail(self) -> str:
        """The message with its hint, without the location prefix."""
        return f"{self.message} ({self.hint})" if self.hint else self.message
