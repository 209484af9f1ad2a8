"""The one confinement rule (lev_nb.workspace.confine), attacked from every side it has."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import ROOT

from lev_nb.workspace import PathEscape, Workspace, confine, real_path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("a")
    (tmp_path / "outside.txt").write_text("secret")
    return folder


def test_a_relative_path_lands_inside(root: Path) -> None:
    assert confine(root, "sub/a.txt") == (root / "sub" / "a.txt").resolve()


def test_the_root_itself_and_dot_are_inside(root: Path) -> None:
    assert confine(root, ".") == root.resolve()
    assert confine(root, "sub/..") == root.resolve()


def test_a_path_that_does_not_exist_yet_is_inside(root: Path) -> None:
    assert confine(root, "new/deeper/file.txt") == root.resolve() / "new" / "deeper" / "file.txt"


def test_a_path_like_is_accepted(root: Path) -> None:
    assert confine(root, Path("sub") / "a.txt") == (root / "sub" / "a.txt").resolve()


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "sub/../..", ".."])
def test_dot_dot_cannot_leave(root: Path, path: str) -> None:
    with pytest.raises(PathEscape, match="outside the working directory"):
        confine(root, path)


def test_an_absolute_path_inside_is_allowed_and_outside_is_not(root: Path) -> None:
    assert confine(root, str(root / "sub" / "a.txt")) == (root / "sub" / "a.txt").resolve()
    with pytest.raises(PathEscape):
        confine(root, str(root.parent / "outside.txt"))
    with pytest.raises(PathEscape):
        confine(root, "/etc/passwd")


def test_a_sibling_folder_sharing_the_prefix_is_outside(root: Path) -> None:
    evil = root.parent / (root.name + "-evil")
    evil.mkdir()
    with pytest.raises(PathEscape):
        confine(root, str(evil / "x"))
    with pytest.raises(PathEscape):
        confine(root, f"../{root.name}-evil/x")


def test_a_symlink_to_outside_is_refused(root: Path) -> None:
    (root / "link").symlink_to(root.parent / "outside.txt")
    with pytest.raises(PathEscape):
        confine(root, "link")


def test_a_symlinked_folder_to_outside_is_refused_for_paths_beneath_it(root: Path) -> None:
    (root / "door").symlink_to(root.parent, target_is_directory=True)
    with pytest.raises(PathEscape):
        confine(root, "door/outside.txt")
    with pytest.raises(PathEscape):
        confine(root, "door/not-yet-there.txt")


def test_a_dangling_symlink_pointing_outside_is_refused(root: Path) -> None:
    # Writing through it would create a file outside the root.
    (root / "dangling").symlink_to(root.parent / "created-outside.txt")
    with pytest.raises(PathEscape):
        confine(root, "dangling")


def test_a_symlink_chain_is_followed_to_its_end(root: Path) -> None:
    (root / "one").symlink_to(root / "two")
    (root / "two").symlink_to(root.parent / "outside.txt")
    with pytest.raises(PathEscape):
        confine(root, "one")


def test_a_symlink_inside_to_inside_is_fine(root: Path) -> None:
    (root / "alias").symlink_to(root / "sub", target_is_directory=True)
    assert confine(root, "alias/a.txt") == (root / "sub" / "a.txt").resolve()


def test_dot_dot_after_a_symlinked_folder_is_taken_from_where_the_link_lands(root: Path) -> None:
    (root.parent / "elsewhere" / "deep").mkdir(parents=True)
    (root / "jump").symlink_to(root.parent / "elsewhere" / "deep", target_is_directory=True)
    with pytest.raises(PathEscape):
        confine(root, "jump/../x")  # lands in elsewhere/, not in root/


def test_a_root_given_through_a_symlink_works(root: Path) -> None:
    alias = root.parent / "root-alias"
    alias.symlink_to(root, target_is_directory=True)
    assert confine(alias, "sub/a.txt") == (root / "sub" / "a.txt").resolve()
    with pytest.raises(PathEscape):
        confine(alias, "../outside.txt")


@pytest.mark.parametrize("path", ["", "a\x00b", "\x00"])
def test_empty_and_nul_are_refused_with_a_reason(root: Path, path: str) -> None:
    with pytest.raises(PathEscape) as info:
        confine(root, path)
    assert ("empty" in str(info.value)) or ("NUL" in str(info.value))


def test_home_is_not_a_way_out(root: Path) -> None:
    with pytest.raises(PathEscape):
        confine(root, "~/.ssh/id_rsa")


def test_a_folder_named_tilde_inside_is_not_confused_with_home(root: Path) -> None:
    assert confine(root, "sub/~") == root.resolve() / "sub" / "~"


def test_unicode_names_are_fine(root: Path) -> None:
    assert confine(root, "sub/naïve-日本.txt") == root.resolve() / "sub" / "naïve-日本.txt"


def test_a_grant_widens_only_what_it_allows(root: Path, tmp_path: Path) -> None:
    grant = tmp_path / "grant"
    grant.mkdir()
    (grant / "g.txt").write_text("g")
    asked: list[Path] = []

    def inside_grant(real: Path) -> bool:
        asked.append(real)
        return real.is_relative_to(grant.resolve())

    assert confine(root, str(grant / "g.txt"), grant=inside_grant) == (grant / "g.txt").resolve()
    with pytest.raises(PathEscape):
        confine(root, str(grant / "g.txt"))
    with pytest.raises(PathEscape):
        confine(root, str(tmp_path / "outside.txt"), grant=inside_grant)
    # The grant is asked about real paths only: a link inside the grant pointing out is refused.
    (grant / "door").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(PathEscape):
        confine(root, str(grant / "door"), grant=inside_grant)
    assert all(p == Path(os.path.realpath(p)) for p in asked)


def test_the_workspace_reads_through_grants_but_never_writes_there(root: Path, tmp_path: Path) -> None:
    grant = tmp_path / "grant"
    grant.mkdir()
    ws = Workspace(root, read_grant=lambda real: real.is_relative_to(grant.resolve()))
    assert ws.resolve(str(grant / "x")) == (grant / "x").resolve()
    with pytest.raises(PathEscape):
        ws.resolve(str(grant / "x"), for_write=True)


def test_a_long_path_is_refused_or_confined_never_a_crash(root: Path) -> None:
    deep = "/".join(["d"] * 2000)
    assert confine(root, deep).is_relative_to(root.resolve())
    with pytest.raises(PathEscape):
        confine(root, "/".join([".."] * 2000))


def test_a_symlink_loop_does_not_hang(root: Path) -> None:
    (root / "loop1").symlink_to(root / "loop2")
    (root / "loop2").symlink_to(root / "loop1")
    try:
        result = confine(root, "loop1")
    except (PathEscape, OSError):
        return
    assert result.is_relative_to(root.resolve())


def test_every_caller_goes_through_confine() -> None:
    """No other module in lev_nb re-implements the rule with realpath/resolve checks of its own."""
    package = ROOT / "lev_nb"
    offenders = []
    for file in package.rglob("*.py"):
        if file.name == "workspace.py" and file.parent == package:
            continue
        text = file.read_text(encoding="utf-8")
        if "is_relative_to(" in text or "os.path.realpath(" in text:
            offenders.append(str(file.relative_to(package)))
    assert offenders == [], f"confinement re-implemented in {offenders}; call lev_nb.workspace.confine"


if os.name != "posix":  # pragma: no cover - the project runs on Linux
    pytest.skip("symlink semantics are POSIX", allow_module_level=True)


@pytest.mark.parametrize("name", [
    "root", "root/sub/a.txt", "root/sub/../sub/a.txt", "to-sub", "to-sub/a.txt", "to-sub/../outside.txt",
    "chain", "chain/a.txt", "root/missing", "root/missing/deeper", "dangling", "dangling/x", "loop", "loop/x",
    "root/sub/a.txt/not-a-dir", "root/./sub//a.txt", "relative-sub",
    # the last part missing: its folder's real path and the name, unless a link or an error is there
    "to-sub/missing", "chain/missing", "dangling/missing", "loop/missing", "root/sub/a.txt/missing",
    "root/missing/..", "root/sub/.",
])
def test_real_path_answers_as_pythons_realpath(root: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The native walk (one call) answers for paths that exist; the rest fall back to Python's walk.
    # Either way confine must see exactly what os.path.realpath sees, links and '..' included.
    base = root.parent
    (base / "to-sub").symlink_to(root / "sub")
    (base / "chain").symlink_to(base / "to-sub")
    (base / "dangling").symlink_to(base / "nowhere")
    (base / "loop").symlink_to(base / "loop")
    monkeypatch.chdir(base)
    path = name[len("relative-"):] if name.startswith("relative-") else str(base / name)
    assert real_path(path) == os.path.realpath(path)
