"""The process groups of an agent's commands die with the lev_nb process that started them.

Every command an agent runs (the shell tool, a command seed, a script's ``shell()``) runs in a
process group of its own, so that a timeout or a cancellation can stop what it spawned. A group
outlives a lev_nb process that is killed outright (SIGKILL, the OOM killer): the command would run
on, unseen, and a resumed run might run it again. So each lev_nb process that starts a command
also starts one small watcher process (its own session, so a signal to the terminal's group does
not reach it) and tells it, through a pipe, each group it starts and each that is done. The
watcher blocks reading the pipe; when the pipe closes (the lev_nb process is gone, however it
ended), it kills every group still listed and exits.

Only this process holds the pipe's writing end: it is not inherited by commands (close-on-exec),
and a forked child (a worker) drops it and starts its own watcher when it needs one.

A command is told of only after it has started, and a busy machine may run it for a while before
that: a kill in between would leak it. So a command starts *gated* (:class:`Gate`): a small shell
waits on its standard input until the group is on the watcher's list, then becomes the command. If
this process dies first, the gate reads end-of-input and the command never runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

__all__ = ["Gate", "watch", "release"]

# Waits for one line on stdin (end of input: its starter died, so run nothing), then becomes the
# command with stdin from /dev/null, as every agent command has.
_GATE = 'read -r _ || exit 125; exec "$@" </dev/null'

# The watcher: "+PGID" adds a group, "-PGID" removes one; at end of input, kill what is left.
_WATCHER = """
import os, signal, sys
groups = set()
for line in sys.stdin.buffer:
    try:
        op, group = line[:1], int(line[1:])
    except ValueError:
        continue
    if op == b"+":
        groups.add(group)
    elif op == b"-":
        groups.discard(group)
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""


class _Reaper:
    """This process's watcher, started at the first group it is told of."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pipe: int | None = None
        self._watcher: subprocess.Popen[bytes] | None = None
        self._broken = False

    def _send(self, line: str) -> None:
        with self._lock:
            if self._broken:
                return
            if self._pipe is None:
                try:
                    self._start()
                except OSError:
                    self._broken = True  # no watcher: groups still die on timeout and cancel
                    return
            assert self._pipe is not None
            try:
                os.write(self._pipe, line.encode("ascii"))
            except OSError:
                self._broken = True

    def _start(self) -> None:
        read_end, write_end = os.pipe()  # both close-on-exec: no command inherits them
        try:
            self._watcher = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHER], stdin=read_end, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._pipe = write_end

    def forget_after_fork(self) -> None:
        """In a forked child: let go of the parent's watcher (the child gets its own)."""
        if self._pipe is not None:
            try:
                os.close(self._pipe)
            except OSError:
                pass
        self._lock = threading.Lock()
        self._pipe = None
        self._watcher = None
        self._broken = False


_REAPER = _Reaper()
os.register_at_fork(after_in_child=_REAPER.forget_after_fork)


def watch(group: int) -> None:
    """Kill process group ``group`` if this process ends before :func:`release` is called for it."""
    _REAPER._send(f"+{group}\n")


def release(group: int) -> None:
    """Process group ``group`` is done with (its command ended): no longer killed at exit."""
    _REAPER._send(f"-{group}\n")


class Gate:
    """One command's start gate: pass :meth:`argv` and ``stdin=gate.stdin`` to the call that starts
    it in a new session, then call :meth:`open` with its pid (or :meth:`close` if it did not start)."""

    def __init__(self) -> None:
        self.stdin, self._go = os.pipe()

    @staticmethod
    def argv(argv: list[str]) -> list[str]:
        """``argv`` behind the gate."""
        return ["/bin/sh", "-c", _GATE, "lev-gate", *argv]

    def open(self, group: int) -> None:
        """Put ``group`` on the watcher's list, then let the command run."""
        self._close_read()
        watch(group)
        try:
            os.write(self._go, b"go\n")
        except OSError:
            pass  # the gate is gone already (killed): nothing to let through
        self.close()

    def _close_read(self) -> None:
        if self.stdin >= 0:
            os.close(self.stdin)
            self.stdin = -1

    def close(self) -> None:
        """Let go of both ends (a command still waiting reads end-of-input and does not run)."""
        self._close_read()
        if self._go >= 0:
            os.close(self._go)
            self._go = -1
