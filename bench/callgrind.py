"""Instruction counts by valgrind's callgrind: the one home for running a command under it.

A count does not move with the load of a shared machine the way CPU time does, so the benches
put it beside their timings where valgrind is installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence


def valgrind() -> str | None:
    """The valgrind program, or None where it is not installed."""
    return shutil.which("valgrind")


def run_counted(cmd: Sequence[str], *, cwd: str | None = None,
                env: Mapping[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], int | None]:
    """Run ``cmd`` under callgrind (every thread counted, no profile file written): the finished
    process and the instructions it executed (None when callgrind printed no count). Call it only
    where :func:`valgrind` found the program."""
    program = valgrind()
    assert program is not None, "valgrind is not installed"
    proc = subprocess.run([program, "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                          capture_output=True, text=True, cwd=cwd, env=None if env is None else dict(env))
    found = re.search(r"Collected : (\d+)", proc.stderr)
    return proc, int(found.group(1)) if found else None
