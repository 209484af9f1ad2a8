"""A notebook as the person a run asks: who can answer, and waiting without deafening the forms.

A run started in a Jupyter kernel is attended from its creation (:func:`person_here`, called by
the engine before the run starts), so its first request already offers the question tools and
its checkpoints and approvals wait for a form, whichever way the notebook shows it: the view in
the cell that started it, ``%%lev``, a view opened later, or ``run.wait()`` in a later cell.

A cell blocked in ``run.wait()`` holds the kernel's main thread, where widget clicks are handled.
On ipykernel 7 each form's messages go to a kernel subshell of their own (:func:`answer_off_main`),
which handles them on its thread meanwhile (and ``await run`` leaves the kernel free to dispatch
them itself); on ipykernel 6, :func:`wait` and :func:`await_run` pump them with jupyter-ui-poll
(cells queued behind run after this one, in order). Both show the run's view in the waiting cell
when the run asks and no live view of it is on the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from typing import Any

__all__ = ["person_here", "wait", "await_run"]

POLL_S = 0.05  # how often a waiting cell handles widget messages
EVENTS_PER_POLL = 20
SUBSHELL_WAIT_S = 5.0


def _kernel_shell() -> Any:
    """The IPython shell of a Jupyter kernel we run in, or None (a console, a script, the CLI)."""
    if "IPython" not in sys.modules:  # never import IPython just to ask
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


def person_here() -> bool:
    """True in a Jupyter kernel that can draw the forms (ipywidgets): a run started here asks."""
    if _kernel_shell() is None:
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


_subshell_lock = threading.Lock()
_subshell: list[str] = []  # the id of the kernel subshell that handles the forms' messages


def _forms_subshell() -> str | None:
    """A kernel subshell (ipykernel 7's own threads for shell messages) for the forms' messages,
    created once; None where the kernel has none (ipykernel 6: jupyter-ui-poll serves instead)."""
    kernel: Any = getattr(_kernel_shell(), "kernel", None)
    channel: Any = getattr(kernel, "shell_channel_thread", None)
    manager: Any = getattr(channel, "manager", None)
    if not getattr(kernel, "_supports_kernel_subshells", False) or not hasattr(manager, "_create_subshell"):
        return None
    with _subshell_lock:
        if not _subshell:
            made: list[str] = []
            ready = threading.Event()

            def create() -> None:  # subshells are made on the shell channel's own thread
                try:
                    made.append(manager._create_subshell())
                finally:
                    ready.set()

            channel.io_loop.add_callback(create)
            if not ready.wait(SUBSHELL_WAIT_S) or not made:
                return None
            _subshell.append(made[0])
        return _subshell[0]


def answer_off_main(widget: Any) -> None:
    """Route the messages of ``widget`` and its children (a form's buttons and boxes) to the
    forms' subshell, so a click is handled while a cell blocks the kernel's main thread."""
    try:
        subshell = _forms_subshell()
    except Exception:  # a kernel that changed its internals: forms answer once the cell ends
        return
    if subshell is None:
        return
    stack = [widget]
    while stack:
        one = stack.pop()
        comm = getattr(one, "comm", None)
        if comm is not None:
            comm._reply_subshell_id = subshell
        stack.extend(getattr(one, "children", ()) or ())


def _in_kernel_main() -> bool:
    return threading.current_thread() is threading.main_thread() and _kernel_shell() is not None


def _ui_poller() -> Any:
    """jupyter-ui-poll's event pump for a kernel without subshells (ipykernel 6), else None: on
    ipykernel 7 the forms' own subshell (and, for ``await``, the kernel itself) takes the clicks."""
    if _forms_subshell() is not None:
        return None
    try:
        from jupyter_ui_poll import ui_events
    except ImportError:
        return None
    return ui_events()


def _show_forms_if_unseen(run: Any) -> bool:
    """Display the run's view here when it waits on a person and no live view of it is shown."""
    from lev_nb.notebook.widget import is_shown, watch

    if run.pending and not is_shown(run):
        watch(run)
        return True
    return False


def wait(run: Any, timeout: float | None = None) -> bool:
    """Wait for ``run`` in a kernel cell while its forms keep answering, showing its view here
    when it asks and none is shown; False when this does not apply (a run that asks nobody, a
    thread other than the kernel's main one): the caller waits plainly."""
    if not run.interactive or not _in_kernel_main():
        return False
    deadline = None if timeout is None else time.monotonic() + timeout
    shown = False
    pump = _ui_poller()
    with pump if pump is not None else contextlib.nullcontext() as poll:
        while not run.done():
            if poll is not None:
                poll(EVENTS_PER_POLL)
            if not shown:
                shown = _show_forms_if_unseen(run)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"run {run.run_id} did not end within {timeout:g} s")
            time.sleep(POLL_S)
    return True


def await_run(run: Any) -> Any:
    """For ``await run`` in a kernel cell: a coroutine that waits as :func:`wait` does, or None."""
    if not run.interactive or not _in_kernel_main():
        return None

    async def waiting() -> None:
        shown = False
        pump = _ui_poller()
        async with pump if pump is not None else contextlib.nullcontext() as poll:
            while not run.done():
                if poll is not None:
                    await poll(EVENTS_PER_POLL)
                if not shown:
                    shown = _show_forms_if_unseen(run)
                await asyncio.sleep(POLL_S)

    return waiting()
