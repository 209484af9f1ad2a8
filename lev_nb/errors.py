"""How lev_nb's own exceptions show in a notebook: one clean block, not a traceback through lev_nb.

An exception of lev_nb (a bad blueprint, a Rhai script that fails, a script that does not compile, a
function called the wrong way) is the user's problem to fix, not lev_nb's: IPython shows it as a
short block saying what is wrong, where (file:line:col, key path) and what to do, through the
``_render_traceback_`` hook IPython looks for on an exception. The full traceback stays one command
away: ``%tb`` shows it, and so does every error while ``%xmode Verbose`` is on.

Nothing here imports IPython unless IPython is already showing an error, and nothing imports the
rest of lev_nb: every layer's exceptions can use it (this is the lowest layer).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from lev_nb.records import record


__all__ = [
    "CALLEE_ERRORS", "CalleeExit", "CleanError", "ErrorKind", "LocatedError", "Problem", "UsageError",
    "clean_block", "render_traceback",
]

# What code lev_nb calls on a run's behalf (a provider, a tool, a hook, a callback, a subscriber)
# may raise and lev_nb catches, so that only that run fails: SystemExit and KeyboardInterrupt too,
# which would otherwise escape the asyncio task and stop the engine thread every run shares.
# asyncio.CancelledError (a cancel) and GeneratorExit are left to propagate.
CALLEE_ERRORS: tuple[type[BaseException], ...] = (Exception, SystemExit, KeyboardInterrupt)


class CalleeExit(Exception):
    """A SystemExit or KeyboardInterrupt a callee raised, carried as an ordinary exception (its
    text names the original, e.g. ``SystemExit: 3``)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"{type(original).__name__}: {original}")
        self.original = original


RED = "\x1b[0;31m"
DIM = "\x1b[2m"
RESET = "\x1b[0m"
FULL_TRACEBACK_HINT = "(%tb shows the full traceback)"


@record
class Problem:
    """What an exception tells a notebook user: what is wrong, where, and what to do about it."""

    what: str
    where: str | None = None
    todo: str | None = None


def clean_block(name: str, problem: Problem) -> list[str]:
    """The lines IPython shows for a lev_nb exception called ``name`` (ANSI-coloured like its own)."""
    lines = [f"{RED}{name}{RESET}: {problem.what}"]
    if problem.where:
        lines.append(f"    where: {problem.where}")
    if problem.todo:
        lines.append(f"    what to do: {problem.todo}")
    lines.append(f"{DIM}{FULL_TRACEBACK_HINT}{RESET}")
    return lines


def render_traceback(exc: BaseException, problem: Problem | None = None) -> list[str]:
    """IPython's ``_render_traceback_`` for ``exc``: the clean block, or the full traceback when the
    user asked for it (``%tb``, ``%xmode Verbose``) or when no IPython shell is running."""
    shell = _shell()
    if problem is None:
        problem = Problem(" ".join(str(exc).split()) or type(exc).__name__)
    if shell is not None and _full_traceback_wanted(shell):
        return list(
            shell.InteractiveTB.structured_traceback(type(exc), exc, exc.__traceback__)
        )
    return clean_block(type(exc).__name__, problem)


def location(path: object, line: int | None, column: int | None, unnamed: str) -> str:
    """``file[:line[:col]]`` for an error message; ``unnamed`` stands for text that has no file."""
    where = str(path) if path is not None else unnamed
    if line is not None:
        where += f":{line}"
        if column is not None:
            where += f":{column}"
    return where


ErrorKind = Literal["read", "parse", "validation"]


class LocatedError(ValueError):
    """A user's file that cannot be used (a blueprint, a configuration), told with where it went wrong.

    Attributes: ``message`` (bare, without the location), ``path`` (the file or None), ``key_path``
    (e.g. ``stages.plan.model``), ``line`` / ``column`` (1-based, where known), ``hint`` (a "did you
    mean" or what to do), ``kind`` ("read": unreadable, "parse": not TOML, "validation": a rule of
    the format) and ``origin`` (a source that is not a file, named instead of file and line). The
    text is ``where: key.path: message (hint)``. Subclasses name text without a file (``unnamed``)
    and their usual ``kind``.
    """

    unnamed = "<text>"
    default_kind: ErrorKind = "validation"

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        key_path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
        kind: ErrorKind | None = None,
        origin: str | None = None,
    ) -> None:
        self.message = message
        self.path = Path(path) if path is not None else None
        self.key_path = key_path
        self.line = line
        self.column = column
        self.hint = hint
        self.kind: ErrorKind = kind if kind is not None else self.default_kind
        self.origin = origin
        super().__init__(self._render())

    def _where(self) -> str | None:
        """The origin, else ``file[:line[:col]]``; None leaves the location out of the text."""
        if self.origin is not None:
            return self.origin
        return location(self.path, self.line, self.column, self.unnamed)

    def _render(self) -> str:
        where = self._where()
        text = f"{where}: " if where is not None else ""
        if self.key_path:
            text += f"{self.key_path}: "
        text += self.message
        if self.hint:
            text += f" ({self.hint})"
        return text

    @property
    def detail(self) -> str:
        """The message with its hint, without the location prefix (what ``lev validate`` prints)."""
        return f"{self.message} ({self.hint})" if self.hint else self.message


class CleanError:
    """Mixin for lev_nb's exceptions: shown in IPython as :func:`clean_block` of :meth:`problem`."""

    def problem(self) -> Problem:
        """What is wrong, where and what to do; by default the message alone."""
        return Problem(" ".join(str(self).split()) or type(self).__name__)

    def _render_traceback_(self) -> list[str]:
        exc: Any = self
        return render_traceback(exc, self.problem())


class UsageError(CleanError, ValueError):
    """A lev_nb function called the wrong way: an argument value it cannot use.

    ``hint`` says what would work (the accepted forms or choices)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(f"{message}; {hint}" if hint else message)
        self.message = message
        self.hint = hint

    def problem(self) -> Problem:
        return Problem(self.message, todo=self.hint)


def _shell() -> Any:
    """The running IPython shell, or None (never imports IPython itself)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        return ipython.get_ipython()
    except Exception:  # an IPython too broken to ask: show the clean block
        return None


def _full_traceback_wanted(shell: Any) -> bool:
    """True under ``%xmode Verbose`` (or ``%tb Verbose``), and while ``%tb`` is showing the error."""
    if getattr(getattr(shell, "InteractiveTB", None), "mode", None) == "Verbose":
        return True
    try:
        from IPython.core.magics.execution import ExecutionMagics

        tb_code = ExecutionMagics.tb.__code__
    except (ImportError, AttributeError):
        return False
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is tb_code:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False
