"""The working directory a run may touch, and the one rule for turning a tool's path into a real path."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["Workspace", "WorkspaceError", "PathEscape", "WorkspaceMissing"]


class WorkspaceError(Exception):
    """A path a tool asked for cannot be used; the message is written for the model to read."""


class PathEscape(WorkspaceError):
    """The path resolves outside the working directory (directly, through ``..`` or a symlink)."""


class WorkspaceMissing(WorkspaceError):
    """The working directory itself is gone."""


class Workspace:
    """A confined working directory.

    Every path a tool receives goes through :meth:`resolve`: relative paths are taken from the root,
    symlinks are followed first and the result is checked afterwards, so neither ``../x`` nor a link
    pointing elsewhere can reach outside. ``read_roots`` are extra directories that reads (never
    writes) may reach.
    """

    def __init__(self, root: str | os.PathLike[str], read_roots: list[str | os.PathLike[str]] | None = None) -> None:
        self.root = Path(os.path.realpath(os.fspath(root)))
        self.read_roots = [Path(os.path.realpath(os.fspath(r))) for r in (read_roots or [])]

    def exists(self) -> bool:
        """True while the root is still an accessible directory."""
        return self.root.is_dir()

    def resolve(self, path: str | os.PathLike[str], for_write: bool = False) -> Path:
        """The real, absolute path for ``path``; raise PathEscape if it leaves the workspace."""
        raw = os.fspath(path)
        if not isinstance(raw, str) or raw == "":
            raise PathEscape("a path is required and it was empty")
        if "\x00" in raw:
            raise PathEscape(f"'{raw}' contains a NUL byte, which no file name can hold")
        if for_write and not self.exists():
            raise WorkspaceMissing(f"the working directory '{self.root}' no longer exists, so nothing can be written")
        joined = Path(raw).expanduser() if raw.startswith("~") else Path(raw)
        candidate = joined if joined.is_absolute() else self.root / joined
        # realpath follows every symlink that exists and normalises '..' after it, so the check below
        # sees where the path really lands.
        real = Path(os.path.realpath(candidate))
        allowed = [self.root] if for_write else [self.root, *self.read_roots]
        if not any(real == base or real.is_relative_to(base) for base in allowed):
            raise PathEscape(f"'{raw}' is outside the working directory; use a path inside it (relative paths start there)")
        return real

    def relative(self, real: Path) -> str:
        """``real`` as a POSIX path relative to the root (``.`` for the root itself)."""
        try:
            rel = real.relative_to(self.root)
        except ValueError:
            return str(real)
        text = rel.as_posix()
        return text or "."

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"
