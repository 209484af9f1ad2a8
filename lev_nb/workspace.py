"""The one confinement rule: turning a path someone gave us into a real path inside a root folder.

Every path that reaches the disk on a run's behalf goes through :func:`confine`: tool arguments,
seeds, artifact windows, final-output artifacts, and the scripts a blueprint names inside its own
folder (hooks, validators, custom regions). Symlinks are followed first and the result is checked
afterwards, so neither ``../x``, an absolute path nor a link pointing elsewhere can reach outside.
It sits below every layer (with messages and text) because the blueprint checks need it too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

__all__ = ["confine", "real_path", "Workspace", "WorkspaceError", "PathEscape", "WorkspaceMissing"]


class WorkspaceError(Exception):
    """A path a tool asked for cannot be used; the message is written for the model to read."""


class PathEscape(WorkspaceError):
    """The path resolves outside the working directory (directly, through ``..`` or a symlink)."""


class UnsafeFile(PathEscape):
    """The path is inside, but the file it names cannot be used safely: a FIFO, socket or device
    (a read would block or never end), or, for a write, a file with other hard links (one may sit
    outside the working directory). A PathEscape, so every caller that refuses one refuses both."""


class WorkspaceMissing(WorkspaceError):
    """The working directory itself is gone."""


def confine(
    root: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    grant: Callable[[Path], bool] | None = None,
    for_write: bool = False,
) -> Path:
    """The real, absolute path that ``path`` names, taken from ``root``; PathEscape if it lands outside.

    Relative paths start at ``root``; absolute ones and ``~`` are allowed only when they land inside.
    ``grant`` may allow a real path outside ``root`` as well (the user's read grants); it is asked
    only about paths whose every symlink has been followed. Raises PathEscape, whose message is
    written for a model or a person to act on, for an empty path, a NUL byte, or a path that
    resolves outside ``root`` and is not granted. Raises :class:`UnsafeFile` when the path names a
    FIFO, socket or device, or (``for_write``) a file with more than one hard link.
    """
    raw = os.fspath(path)
    if not isinstance(raw, str) or raw == "":
        raise PathEscape("a path is required and it was empty")
    if "\x00" in raw:
        raise PathEscape(f"'{raw}' contains a NUL byte, which no file name can hold")
    base = Path(real_path(os.fspath(root)))
    joined = Path(raw).expanduser() if raw.startswith("~") else Path(raw)
    candidate = joined if joined.is_absolute() else base / joined
    # realpath follows every symlink that exists and normalises '..' after it, so the check below
    # sees where the path really lands.
    real = Path(real_path(os.fspath(candidate)))
    if real == base or real.is_relative_to(base) or (grant is not None and grant(real)):
        _check_kind(raw, real, for_write)
        return real
    raise PathEscape(f"'{raw}' is outside the working directory; use a path inside it (relative paths start there)")


def real_path(path: str) -> str:
    """``os.path.realpath(path)``: for a path that exists, the C library's walk in one native call
    (Python's own takes and gives back the interpreter lock at every component); for an absolute
    path whose last part does not exist (not even as a dangling link) in a folder that does, that
    folder's real path and the name (a run's workdir before it is made); otherwise, and for
    anything the native call cannot say, Python's walk, so the answer is the same."""
    from lev_nb._rhai import real_path as native_real_path  # imported on first use

    found = native_real_path(path)
    if found:
        return found
    head, name = os.path.split(path)
    if os.path.isabs(head) and name not in ("", ".", ".."):
        try:
            os.lstat(path)
        except FileNotFoundError:
            folder = native_real_path(head)
            if folder:
                return os.path.join(folder, name)
        except OSError:
            pass
    return os.path.realpath(path)


def _check_kind(raw: str, real: Path, for_write: bool) -> None:
    try:
        info = os.stat(real)
    except OSError:
        return  # not there (yet): nothing to refuse
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise UnsafeFile(f"'{raw}' is not a regular file (a FIFO, socket or device), so it cannot be read or written")
    if for_write and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise UnsafeFile(
            f"'{raw}' has {info.st_nlink} hard links, and one may lead outside the working directory, "
            "so it cannot be written; write a new file instead"
        )


class Workspace:
    """A confined working directory.

    Every path a tool receives goes through :meth:`resolve`: relative paths are taken from the root,
    symlinks are followed first and the result is checked afterwards, so neither ``../x`` nor a link
    pointing elsewhere can reach outside. ``read_grant`` says which real paths outside the root reads
    (never writes) may reach: the blueprint's ``[read_paths]`` as far as the user granted them.
    """

    def __init__(self, root: str | os.PathLike[str], read_grant: Callable[[Path], bool] | None = None) -> None:
        self.root = Path(real_path(os.fspath(root)))
        self.read_grant = read_grant

    def exists(self) -> bool:
        """True while the root is still an accessible directory."""
        return self.root.is_dir()

    def resolve(self, path: str | os.PathLike[str], for_write: bool = False) -> Path:
        """The real, absolute path for ``path``; raise PathEscape if it leaves the workspace."""
        if for_write and not self.exists():
            raise WorkspaceMissing(f"the working directory '{self.root}' no longer exists, so nothing can be written")
        return confine(self.root, path, grant=None if for_write else self.read_grant, for_write=for_write)

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
