"""How much a run may put on disk: ``[limits] max_tool_call_write_bytes`` and
``max_run_write_bytes``, and the free-disk guard (upstream configuration.md, "bound how much an
agent puts on disk"). The one home for the rule every writing tool asks before it writes.

``write_file``, ``edit_file`` and a script's ``write_file()`` carry their bytes, so an oversized
write is refused before a byte lands: it counts what the call writes (the content, or the whole
file an edit rewrites). A shell redirect's bytes go from the program to the file without passing
through lev_nb, so the files a command line redirects into are measured before and after the call
and their growth is counted: that stops the call after the one that overran, not the one that did
(a command is refused once the run's total is spent). Both caps are unset unless configured.

The free-disk guard is not configurable: a write that would leave less than :data:`MIN_FREE_BYTES`
free on its filesystem is refused whatever the caps and ``--yolo`` say, since a full disk harms
every other process on the machine. A filesystem whose free space cannot be read is allowed.

A refusal is a ``[error]`` tool result the model reads, and is told to the person through the
``tell`` callback the engine gives (a ``write-refused`` run warning).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from lev_nb.blueprint.shellkeys import analyse
from lev_nb.workspace import Workspace, WorkspaceError

__all__ = ["MIN_FREE_BYTES", "WriteBudget", "free_bytes", "size_text"]

# Writes never leave less than this free on their filesystem (upstream: "under a gigabyte").
MIN_FREE_BYTES = 1 << 30


def size_text(n: int) -> str:
    """``n`` bytes for a person (binary units: 2 GiB, 512.0 KiB)."""
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} bytes"  # pragma: no cover - the loop always returns


def free_bytes(path: Path) -> int | None:
    """Free bytes an unprivileged writer has on the filesystem holding ``path`` (its nearest
    existing folder), or None when that cannot be read."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except (OSError, AttributeError):  # AttributeError: no statvfs on this platform
        return None
    return st.f_bavail * st.f_frsize


class WriteBudget:
    """One run's write caps (None: no cap) and what it has written so far. Thread-safe: a
    script's host functions write from worker threads."""

    def __init__(self, per_call: int | None = None, per_run: int | None = None,
                 tell: Callable[[str], None] | None = None) -> None:
        self.per_call = per_call
        self.per_run = per_run
        self.written = 0
        self._tell = tell
        self._lock = threading.Lock()

    def _refuse(self, who: str, what: str, why: str) -> str:
        if self._tell is not None:
            self._tell(f"{who} {what} was refused: {why}")
        return f"[error] {who}: {why}. Nothing was written."

    def admit(self, who: str, path: str, real: Path, nbytes: int) -> str | None:
        """Before a tool writes ``nbytes`` to ``real`` (``path`` as the model named it): None when
        the write may go ahead (it is then counted), else the refusal the model reads."""
        what = f"writing {size_text(nbytes)} to '{path}'"
        if self.per_call is not None and nbytes > self.per_call:
            return self._refuse(who, what, f"one tool call may write at most {size_text(self.per_call)} "
                                           "([limits] max_tool_call_write_bytes); write the file in smaller parts "
                                           "or less of it")
        with self._lock:
            if self.per_run is not None and self.written + nbytes > self.per_run:
                return self._refuse(who, what, self._run_spent())
            free = free_bytes(real.parent)
            if free is not None and free - nbytes < MIN_FREE_BYTES:
                return self._refuse(who, what, self._disk(free))
            self.written += nbytes
        return None

    def before_shell(self, who: str, workspace: Workspace, command: str) -> tuple[str | None, dict[Path, int]]:
        """Before a command line runs: (the refusal, or None; the size of each file it redirects
        into, for :meth:`after_shell`). A line that writes no file is never refused here."""
        writes = analyse(command).writes
        if not writes:
            return None, {}
        what = "a command that writes files"
        with self._lock:
            if self.per_run is not None and self.written >= self.per_run:
                return self._refuse(who, what, self._run_spent()), {}
        free = free_bytes(workspace.root)
        if free is not None and free < MIN_FREE_BYTES:
            return self._refuse(who, what, self._disk(free)), {}
        sizes: dict[Path, int] = {}
        for write in writes:
            if write.target is None:
                continue
            try:
                real = workspace.resolve(write.target, for_write=True)
            except WorkspaceError:
                continue
            sizes[real] = _size(real)
        return None, sizes

    def after_shell(self, who: str, sizes: dict[Path, int]) -> str | None:
        """After the command: count how much the files it redirected into grew; a note for the
        model (also told to the person) when that broke a cap, else None."""
        if not sizes:
            return None
        grown = sum(max(0, _size(real) - before) for real, before in sizes.items())
        with self._lock:
            self.written += grown
            total = self.written
        if self.per_call is not None and grown > self.per_call:
            why = (f"its redirects wrote {size_text(grown)}, over the {size_text(self.per_call)} one tool call "
                   "may write ([limits] max_tool_call_write_bytes)")
        elif self.per_run is not None and total > self.per_run:
            why = (f"the run has now written {size_text(total)}, over its {size_text(self.per_run)} "
                   "([limits] max_run_write_bytes)")
        else:
            return None
        spent = self.per_run is not None and total >= self.per_run
        after = "; every further write of this run is refused" if spent else ""
        if self._tell is not None:
            self._tell(f"{who}: {why}{after}")
        return f"[note] {why}{after}."

    def _run_spent(self) -> str:
        return (f"the run has written {size_text(self.written)} and may write at most "
                f"{size_text(self.per_run or 0)} in all ([limits] max_run_write_bytes)")

    @staticmethod
    def _disk(free: int) -> str:
        return (f"only {size_text(free)} is free on that disk, and lev_nb never lets a write leave less "
                f"than {size_text(MIN_FREE_BYTES)} free (this guard cannot be turned off)")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
