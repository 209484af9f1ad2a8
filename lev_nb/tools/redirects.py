"""Where a shell command may write: every file a line redirects into stays inside the workdir.

``echo x > report.md`` is a file write that no tool name describes, so each file a command line
writes (:func:`lev_nb.blueprint.shellkeys.analyse`: ``>``, ``>>``, ``>|``, ``&>``, ``N>``,
``>&file``, ``tee FILE``) is held to the same confinement as ``write_file``: a target that resolves
outside the working directory (through ``..``, an absolute path or a symlink) is refused before the
command starts. This is not a permission, so no launch flag lifts it, ``--yolo`` included. A target
with no nameable path never gets here unapproved (the policy asks a person about it every time).
"""

from __future__ import annotations

from lev_nb.blueprint.shellkeys import analyse
from lev_nb.workspace import Workspace, WorkspaceError

__all__ = ["confine_writes"]


def confine_writes(workspace: Workspace, command: str, who: str = "shell", *, nameless_ok: bool = True) -> str | None:
    """None when every file ``command`` writes lies inside ``workspace``; else the ``[denied]``
    text naming the first target that does not (``who`` names the caller in it). A write with no
    nameable target passes only when ``nameless_ok`` (a person approved this very call)."""
    for write in analyse(command).writes:
        if write.target is None:
            if nameless_ok:
                continue
            return (f"[denied] {who}: the command writes ({write.form}) to a target that has no fixed path "
                    "(an expansion, a socket, a line that changes folder first, or one the shell parser "
                    "cannot read), so it cannot be kept inside the working directory. Nothing was run.")
        try:
            workspace.resolve(write.target, for_write=True)
        except WorkspaceError as exc:
            return (f"[denied] {who}: the command writes to '{write.target}' ({write.form}), and a "
                    f"redirect may only write where write_file could: {exc}. Nothing was run.")
    return None
