"""Issue 12 item 10: files the tools must not touch or must not read whole. A hard link in the
workdir is refused for writes (it may be the same file as one outside), a FIFO for reads (it would
block forever); read_file reads no further than its cap; read_files has a total cap."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from lev_nb.tools import READ_FILE_CAP, ToolContext, default_registry
from lev_nb.tools import builtin
from lev_nb.tools.scripts import RunToolHost
from lev_nb.workspace import UnsafeFile, Workspace, confine


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def call(work: Path, name: str, **args) -> str:
    tool = default_registry().get(name)
    return asyncio.run(tool.handler(ToolContext(Workspace(work), run_id="r1"), args))


def test_a_hard_link_to_a_file_outside_is_not_written(work: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    os.link(outside, work / "link.txt")
    for name, args in (("write_file", {"content": "changed"}), ("edit_file", {"old_str": "keep", "new_str": "lost"})):
        with pytest.raises(UnsafeFile, match="hard links"):  # the executor turns it into an [error] result
            call(work, name, path="link.txt", **args)
    assert outside.read_text() == "keep me"
    assert call(work, "read_file", path="link.txt") == "keep me"  # reading it is harmless
    with pytest.raises(UnsafeFile):
        confine(work, "link.txt", for_write=True)
    with pytest.raises(UnsafeFile):
        RunToolHost(Workspace(work), shell_allowed=False).write_file("link.txt", "x")


def test_a_fifo_is_refused_for_reads_instead_of_blocking(work: Path) -> None:
    os.mkfifo(work / "pipe")
    for name, args in (("read_file", {"path": "pipe"}), ("read_files", {"paths": ["pipe"]})):
        assert "not a regular file" in call(work, name, **args)
    with pytest.raises(UnsafeFile):
        RunToolHost(Workspace(work), shell_allowed=False).read_file("pipe")


def test_read_file_stops_at_its_cap(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = work / "big.bin"
    big.write_bytes(b"x" * (READ_FILE_CAP * 4))
    asked: list[int] = []
    real_read = builtin.read_capped

    def spy(path, cap):
        asked.append(cap)
        return real_read(path, cap)

    monkeypatch.setattr(builtin, "read_capped", spy)
    result = call(work, "read_file", path="big.bin")
    assert f"holds {READ_FILE_CAP * 4} bytes" in result
    assert asked and max(asked) <= READ_FILE_CAP + 4  # never the whole file


def test_read_files_has_a_total_cap(work: Path) -> None:
    for i in range(8):
        (work / f"f{i}.txt").write_bytes(b"y" * READ_FILE_CAP)
    result = call(work, "read_files", paths=[f"f{i}.txt" for i in range(8)])
    assert len(result.encode()) < builtin.READ_FILES_TOTAL_CAP + 8 * 1024
    assert "[not read] read_files shows at most" in result
