"""The bench's temporary folders: a fresh one for each measurement, all removed when the bench ends.

Removing a folder of thousands of run records right after its measurement made the measurements
after it slower, by up to a third of their processor time: a file system without a journal (ext4
as this machine mounts it) does not hand out an inode freed in the last minute (six while its
inode table block is unwritten), and it looks at each such inode again for every file it creates
(perf: ``recently_deleted`` and ``find_get_block_common`` under ``__ext4_new_inode``). A user's runs
do not pay for the bench's cleanup, so no measurement should: the folders stay until the bench
process exits. Another process's deletions in the minutes before a pass still cost it; the
kernel's share of each provider-script figure is printed so such a pass shows itself.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

RAM_FOLDER = Path("/dev/shm")  # a RAM file system on Linux: a run store without the disk's costs

_MADE: list[str] = []


def ram_available() -> bool:
    """Whether a folder can be made in RAM here (:data:`RAM_FOLDER` exists and is writable)."""
    return RAM_FOLDER.is_dir() and os.access(RAM_FOLDER, os.W_OK)


def _remove_all() -> None:
    for folder in _MADE:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def folder(prefix: str = "lev-bench-", ram: bool = False) -> Iterator[str]:
    """A new empty folder for one measurement, removed when the bench exits, not when the block
    ends (see the module's docstring). ``ram``: in :data:`RAM_FOLDER`."""
    if not _MADE:
        atexit.register(_remove_all)
    made = tempfile.mkdtemp(prefix=prefix, dir=RAM_FOLDER if ram else None)
    _MADE.append(made)
    yield made
