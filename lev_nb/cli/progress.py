"""What ``lev run`` prints on stderr while a run proceeds: the live progress line
(:class:`ProgressLine`), each warning the run tells as one line, and with ``-v`` every event as a
sentence (:class:`Teller`).

Both follow the run through ``run.subscribe`` (so they are called on the engine thread) and only
write to the stream they were given. The run loop's own per-stage counters are
:mod:`lev_nb.engine.state`, not this.
"""

from __future__ import annotations

import threading
from typing import Any, TextIO

# How much of a forming answer the line keeps, and shows (its end, on one line).
ANSWER_TAIL = 400
ANSWER_SHOWN = 60


class ProgressLine:
    """A one-line progress display: rewritten in place on a terminal, one line per step elsewhere
    (``lev run -v`` has no progress line: :class:`Teller` tells every event instead)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.stage = ""
        self.iteration = 0
        self._width = 0
        self._answer = ""  # the answer forming in the current call (streamed text)
        self._paused = False  # a question to the person is on the terminal: draw nothing
        self._held: list[str] = []  # lines said while paused, written on resume
        self._lock = threading.Lock()  # events arrive on the engine thread, pause() on the main one

    def __call__(self, event: Any) -> None:
        kind = event.kind
        if not self.stage and event.stage:  # a resumed run's progress starts inside a stage
            self.stage = event.stage
        if kind == "stage_entered":
            self.stage = event.stage
            self.show(f"stage {self.stage}", permanent=not self.tty)
        elif kind == "model_text":
            # Only a terminal shows the answer forming: the line is rewritten in place.
            self._answer = (self._answer + event.text)[-ANSWER_TAIL:]
            if self.tty:
                tail = " ".join(self._answer.split())[-ANSWER_SHOWN:]
                self.show(f"stage {self.stage} · turn {self.iteration + 1} · {tail}")
        elif kind == "model_retry":
            self._answer = ""
        elif kind == "model_call":
            self._answer = ""
            self.iteration = event.iteration
            self.show(f"stage {self.stage} · turn {self.iteration}")
        elif kind == "tool_started":
            self.show(f"stage {self.stage} · turn {self.iteration} · {event.tool}")
        elif kind in ("gate_blocked", "stuck", "error"):  # a forced gate is told by its warning
            detail = getattr(event, "message", "") or getattr(event, "reason", "")
            self.show(f"stage {self.stage} · {kind.replace('_', ' ')}: {_short(detail)}", permanent=True)
        elif kind == "completed" and event.status == "complete":
            # Any other ending is said once, in full, by `lev run` itself after the run.
            self.show("complete", permanent=True)

    def pause(self) -> None:
        """Clear the line and draw nothing until :meth:`resume` (a prompt is being shown)."""
        with self._lock:
            self._paused = True
            if self.tty and self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
            self._width = 0

    def resume(self) -> None:
        """Draw again, from the next event on."""
        with self._lock:
            self._paused = False
            held, self._held = self._held, []
            for text in held:
                self._draw(text, True)

    def say(self, text: str) -> None:
        """Write ``text`` as a line of its own, above the progress line (held while a question
        is on the terminal, and written when it is answered)."""
        with self._lock:
            if self._paused:
                self._held.append(text)
            else:
                self._draw(text, True)

    def show(self, text: str, permanent: bool = False) -> None:
        """Draw ``text``: in place on a terminal (``permanent`` ends the line); elsewhere only a
        ``permanent`` text is written, as a line of its own."""
        with self._lock:
            if not self._paused:
                self._draw(text, permanent)

    def _draw(self, text: str, permanent: bool) -> None:
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad + ("\n" if permanent else ""))
            self._width = 0 if permanent else len(text)
        elif permanent:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the line on a terminal."""
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()


DETAIL_LIMIT = 100


def _short(text: str, limit: int = DETAIL_LIMIT) -> str:
    """``text`` on one line, cut at a word boundary with an ellipsis when longer than ``limit``."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0] if " " in line[:limit] else line[:limit]
    return cut.rstrip(",;:") + " …"


class Teller:
    """Tells the person what the run does, on ``stream``: every ``warning`` event as one line
    (``lev run: warning (stage): message``), and with ``verbose`` every other event as ``lev log``
    tells it (:func:`lev_nb.explain.log.log_line`). Lines go through the progress line when there is one, so a terminal's line stays
    whole. What comes after the run's ``completed`` event (a webhook's failure) is said by
    ``lev run`` itself when the run is over."""

    def __init__(self, stream: TextIO, prog: str, progress: ProgressLine | None = None, verbose: bool = False) -> None:
        self.stream = stream
        self.prog = prog
        self.progress = progress
        self.verbose = verbose
        self.ended = False

    def __call__(self, event: Any) -> None:
        if self.ended:
            return
        kind = event.kind
        if kind == "completed":
            self.ended = True
        if kind == "warning":
            self._say(warning_line(self.prog, event.stage, event.message))
        elif self.verbose:
            from lev_nb.explain.log import log_line

            told = log_line(event.to_dict())  # as `lev log` tells it (a streamed answer's pieces are left out)
            if told is not None:
                self._say(told)

    def _say(self, text: str) -> None:
        if self.progress is not None:
            self.progress.say(text)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()


def warning_line(prog: str, stage: str | None, message: str) -> str:
    """One warning as ``lev run`` prints it: on one line (a traceback by its last line)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    text = lines[-1] if len(lines) > 1 and lines[0].startswith("Traceback") else " ".join(lines)
    where = f" ({stage})" if stage else ""
    return f"{prog}: warning{where}: {text}"
