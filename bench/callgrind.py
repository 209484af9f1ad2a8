"""Instruction counts by valgrind's callgrind: the one home for running a command under it.

A count does not move with the load of a shared machine the way CPU time does, so the benches
put it beside their timings where valgrind is installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path


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


def run_counted_by_thread(cmd: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
                          ) -> tuple[subprocess.CompletedProcess[str], list[int] | None]:
    """As :func:`run_counted`, with the instructions of each thread apart, in the order the
    threads started (the first is the process's main thread); None when callgrind wrote no counts."""
    program = valgrind()
    assert program is not None, "valgrind is not installed"
    with tempfile.TemporaryDirectory(prefix="lev-callgrind-") as folder:
        out = Path(folder) / "callgrind.out"
        proc = subprocess.run([program, "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}",
                               *cmd], capture_output=True, text=True, cwd=cwd, env=None if env is None else dict(env))
        counts: dict[int, int] = {}
        for part in Path(folder).glob("callgrind.out-*"):  # one file a thread: callgrind.out-01, -02, ...
            found = re.search(r"^(?:summary|totals): (\d+)", part.read_text(errors="replace"), re.MULTILINE)
            if found:
                counts[int(part.name.rsplit("-", 1)[1])] = int(found.group(1))
    return proc, [counts[n] for n in sorted(counts)] if counts else None
