"""A notebook as the person a run asks: who can answer, and waiting without deafening the forms
(docs/notebook.md#waiting-while-a-run-asks).

A run started in a Jupyter kernel is attended from its creation (:func:`person_here`, called by
the engine before the run starts), so its first request already offers the question tools and
its checkpoints and approvals wait for a form, whichever way the notebook shows it: the view in
the cell that started it, ``%%lev``, a view opened later, or ``run.wait()`` in a later cell.

A cell blocked in ``run.wait()`` holds the kernel's main thread. ipykernel 7 receives every
shell message on a thread of its own and hands each comm message to the shell that the comm's
routing hook names: by default the shell that last sent on the comm, the main one for a widget
built while a cell ran, even when the frontend addressed the message to a subshell (JupyterLab
does, by default). A main shell busy in ``run.wait()`` would take a click only once the cell
ends. So the widgets of each request form route their messages to a kernel subshell made for the
forms (:func:`answer_off_main`), whose thread handles clicks and typed text meanwhile. Nothing
else moves: cells queued behind the waiting one and the messages of other widgets stay in the
main shell's queue, in order, and an interrupt (Ctrl-C) stops the waiting cell as it does any
cell. ``await run`` leaves the main shell free: the kernel dispatches comm messages while a cell
awaits.

:func:`wait` and :func:`await_run` also show the run's view in the waiting cell when the run
asks and no live view of it is on the page. A kernel without subshells or that routing hook
(ipykernel 6, an early 7) handles a form's click only when the waiting cell ends, and
``run.wait()`` says so, once. Outside a kernel, ``run.wait()`` waits plainly.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

__all__ = ["person_here", "wait", "await_run"]

POLL_S = 0.05  # how often a waiting cell looks for a request nobody sees yet
SUBSHELL_WAIT_S = 10.0  # the shell channel's thread makes the subshell; generous on a busy machine
NO_ROUTE_NOTE = ("lev_nb: this kernel cannot take a form's click while a cell waits (it needs ipykernel "
                 "7.4 or later); a click is handled when this cell ends. Answer with run.respond(...) "
                 "in code, or use `await run`.")


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
    """The kernel subshell (ipykernel 7: a thread of its own for shell messages) that handles the
    forms' messages, made once; None where the kernel cannot route a comm's messages to one."""
    from ipykernel.comm.comm import BaseComm  # the kernel's comms: their routing hook is what we set

    kernel: Any = getattr(_kernel_shell(), "kernel", None)
    channel: Any = getattr(kernel, "shell_channel_thread", None)
    manager: Any = getattr(channel, "manager", None)
    if (not getattr(kernel, "_supports_kernel_subshells", False) or not hasattr(manager, "_create_subshell")
            or not hasattr(BaseComm, "_reply_subshell_for")):
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


def _can_route() -> bool:
    try:
        return _forms_subshell() is not None
    except Exception:  # a kernel that changed its internals: forms answer once the cell ends
        return False


def answer_off_main(widget: Any) -> bool:
    """Route the messages of ``widget`` and its children (a form's buttons, boxes and text
    fields) to the forms' subshell, so a click is handled while a cell blocks the kernel's main
    thread; False where the kernel cannot (the form answers once the cell ends)."""
    if not _can_route():
        return False
    subshell = _subshell[0]

    def route(_data: Any, _default: Any) -> str:
        # Asked by the kernel for each message the frontend sends on this comm. An instance
        # attribute: ipykernel rewrites its own default (the last shell that sent on the comm)
        # whenever the widget sends, e.g. when it echoes a value the person typed.
        return subshell

    stack = [widget]
    while stack:
        one = stack.pop()
        comm = getattr(one, "comm", None)
        if comm is not None:
            comm._reply_subshell_for = route
        stack.extend(getattr(one, "children", ()) or ())
    return True


def _in_kernel_main() -> bool:
    return threading.current_thread() is threading.main_thread() and _kernel_shell() is not None


_told: list[bool] = []


def _show_forms_if_unseen(run: Any, blocking: bool) -> bool:
    """Display the run's view here when it waits on a person and no live view of it is shown;
    in a ``blocking`` wait, say once per kernel when its forms cannot answer meanwhile."""
    from lev_nb.notebook.widget import is_shown, watch

    if not run.pending:
        return False
    if blocking and not _told and not _can_route():
        _told.append(True)
        print(NO_ROUTE_NOTE, file=sys.stderr)
    if not is_shown(run):
        watch(run)
    return True


def wait(run: Any, timeout: float | None = None) -> bool:
    """Wait for ``run`` in a kernel cell while its forms keep answering (on their subshell),
    showing its view here when it asks and none is shown; False when this does not apply (a run
    that asks nobody, a thread other than the kernel's main one): the caller waits plainly."""
    if not run.interactive or not _in_kernel_main():
        return False
    deadline = None if timeout is None else time.monotonic() + timeout
    shown = False
    while not run.done():
        if not shown:
            shown = _show_forms_if_unseen(run, blocking=True)
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
        while not run.done():
            if not shown:
                shown = _show_forms_if_unseen(run, blocking=False)
            await asyncio.sleep(POLL_S)

    return waiting()
