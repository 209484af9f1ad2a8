"""What a stdio MCP server writes to stderr: kept in the folder of every run that uses it.

A server is shared by the runs of a process, so its stderr is a pipe read by one thread per
server process: each line is appended to ``<run folder>/mcp/<server>.stderr.log`` of every run
attached at that moment, and the last lines are kept in memory to explain a crash. The end of the
pipe tells the connection that the process is gone.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

__all__ = ["StderrTee", "stderr_log_path"]

KEPT_LINES = 40
LINE_CAP = 4000


def stderr_log_path(run_dir: Path, server: str) -> Path:
    """Where a run keeps the stderr of MCP server ``server``."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in server)
    return run_dir / "mcp" / f"{safe}.stderr.log"


class StderrTee:
    """One stdio server's stderr pipe, its reader thread, and the runs listening to it."""

    def __init__(self, server: str, runs: dict[str, Path], lock: threading.Lock,
                 on_eof: Callable[[], None]) -> None:
        self.server = server
        self._runs = runs  # run id -> run folder, shared with the broker (under ``lock``)
        self._lock = lock
        self._on_eof = on_eof
        self.lines: deque[str] = deque(maxlen=KEPT_LINES)
        self.ended = threading.Event()  # set once every line is read and written (the process is gone)
        read_fd, write_fd = os.pipe()
        self._reader = os.fdopen(read_fd, "rb")
        self.writer: TextIO | None = os.fdopen(write_fd, "w")
        threading.Thread(target=self._pump, name=f"lev-mcp-stderr-{server}", daemon=True).start()

    def spawned(self) -> None:
        """The child holds its copy of the pipe now: close ours, so the pipe ends with the process."""
        if self.writer is not None:
            try:
                self.writer.close()
            except OSError:
                pass
            self.writer = None

    def last_line(self) -> str | None:
        """The last non-empty line the server wrote, if any."""
        return next((line for line in reversed(self.lines) if line.strip()), None)

    def _pump(self) -> None:
        try:
            for raw in self._reader:
                line = raw.decode("utf-8", "replace").rstrip("\n")[:LINE_CAP]
                self.lines.append(line)
                with self._lock:
                    targets = list(self._runs.values())
                for run_dir in targets:
                    path = stderr_log_path(run_dir, self.server)
                    try:
                        path.parent.mkdir(parents=True, exist_ok=True)
                        with path.open("a", encoding="utf-8") as fh:
                            fh.write(line + "\n")
                    except OSError:
                        pass  # a run folder that went away does not stop the others' logs
        except (OSError, ValueError):
            pass
        finally:
            try:
                self._reader.close()
            except OSError:
                pass
            self.ended.set()
            self._on_eof()
