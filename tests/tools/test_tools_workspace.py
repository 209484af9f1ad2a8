"""Workspace confinement: relative paths, '..', absolute paths and symlinks."""

from __future__ import annotations

import os

import pytest

from lev_nb.workspace import PathEscape, Workspace, WorkspaceMissing


@pytest.fixture
def root(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    return work


def test_relative_path_resolves_inside(root):
    assert Workspace(root).resolve("a/b.txt") == root.resolve() / "a" / "b.txt"


def test_dotdot_inside_is_normalised(root):
    assert Workspace(root).resolve("a/../b.txt", for_write=True) == root.resolve() / "b.txt"


@pytest.mark.parametrize("path", ["../x", "a/../../x", "../../etc/passwd"])
def test_dotdot_escape_is_refused(root, path):
    with pytest.raises(PathEscape, match="outside the working directory"):
        Workspace(root).resolve(path)


def test_absolute_path_outside_is_refused(root, tmp_path):
    with pytest.raises(PathEscape):
        Workspace(root).resolve(str(tmp_path / "other.txt"), for_write=True)


def test_absolute_path_inside_is_allowed(root):
    assert Workspace(root).resolve(str(root / "x.txt")) == root.resolve() / "x.txt"


def test_symlink_pointing_outside_is_refused_for_read_and_write(root, tmp_path):
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "key").write_text("s")
    os.symlink(outside, root / "link")
    ws = Workspace(root)
    for for_write in (False, True):
        with pytest.raises(PathEscape):
            ws.resolve("link/key", for_write=for_write)


def test_dangling_symlink_to_outside_is_refused_for_write(root, tmp_path):
    os.symlink(tmp_path / "not-yet", root / "trap")
    with pytest.raises(PathEscape):
        Workspace(root).resolve("trap", for_write=True)


def test_symlink_inside_is_followed(root):
    (root / "real").mkdir()
    os.symlink(root / "real", root / "alias")
    assert Workspace(root).resolve("alias/f.txt") == root.resolve() / "real" / "f.txt"


def test_read_grants_extend_reads_only(root, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    ws = Workspace(root, read_grant=lambda real: real.is_relative_to(shared.resolve()))
    assert ws.resolve(str(shared / "doc.md")) == shared.resolve() / "doc.md"
    with pytest.raises(PathEscape):
        ws.resolve(str(shared / "doc.md"), for_write=True)


def test_empty_path_is_refused(root):
    with pytest.raises(PathEscape, match="empty"):
        Workspace(root).resolve("")


def test_missing_workdir_refuses_writes(root):
    ws = Workspace(root)
    root.rmdir()
    with pytest.raises(WorkspaceMissing):
        ws.resolve("a.txt", for_write=True)


def test_relative_renders_posix_paths(root):
    ws = Workspace(root)
    assert ws.relative(ws.resolve("./a//b.txt")) == "a/b.txt"
    assert ws.relative(ws.resolve(".")) == "."
