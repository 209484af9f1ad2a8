"""Reading a run's artifacts a window at a time (spec/runtime.md §8.4, seeds "Large results")."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import call, say

from lev_nb.engine.artifacts import read_window

# ASCII, 2-, 3- and 4-byte characters, mixed so windows land mid-character in every way.
MIXED = "".join(f"row {i}: é€😀 ß中文 ok\n" for i in range(300))


def read_all(reader, path: str, window: int) -> tuple[str, list[dict]]:
    """Follow next_offset from 0 to the end; returns the concatenation and every window."""
    pieces, windows, offset = [], [], 0
    while True:
        answer = reader(path, offset=offset, window=window)
        windows.append(answer)
        pieces.append(answer["content"])
        if answer["next_offset"] is None:
            return "".join(pieces), windows
        assert answer["next_offset"] > offset  # always moves forward
        offset = answer["next_offset"]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mixed.txt").write_text(MIXED, encoding="utf-8")
    (tmp_path / "ascii.csv").write_text("a,b\n" * 1000, encoding="utf-8")
    (tmp_path / "empty.txt").write_bytes(b"")
    return tmp_path


@pytest.mark.parametrize("window", [4, 5, 6, 7, 8, 9, 10, 13, 16, 31, 64, 100, 255, 1000, 4096, 1 << 20])
def test_windows_concatenate_to_the_exact_file(files, window):
    reader = lambda p, **kw: read_window(files, p, **kw)
    text, windows = read_all(reader, "data/mixed.txt", window)
    assert text == MIXED
    assert text.encode("utf-8") == (files / "data" / "mixed.txt").read_bytes()
    size = len(MIXED.encode("utf-8"))
    for answer in windows:
        assert answer["path"] == "data/mixed.txt"
        assert answer["size"] == size
        assert "\ufffd" not in answer["content"]  # never a split character
        assert len(answer["content"].encode("utf-8")) <= window
    # Each window starts where the previous one said to continue.
    for before, after in itertools.pairwise(windows):
        assert after["offset"] == before["next_offset"]
    assert windows[-1]["next_offset"] is None


def test_a_small_file_fits_one_window(files):
    answer = read_window(files, "ascii.csv")
    assert answer["offset"] == 0
    assert answer["next_offset"] is None
    assert answer["content"] == "a,b\n" * 1000
    assert answer["size"] == 4000


def test_an_exact_window_ends_where_the_next_begins(files):
    first = read_window(files, "ascii.csv", offset=0, window=1000)
    assert (first["offset"], first["next_offset"], len(first["content"])) == (0, 1000, 1000)
    last = read_window(files, "ascii.csv", offset=3000, window=1000)
    assert last["next_offset"] is None
    assert last["content"] == "a,b\n" * 250


def test_an_offset_inside_a_character_starts_at_that_character(files):
    raw = MIXED.encode("utf-8")
    emoji = raw.index("😀".encode())
    answer = read_window(files, "data/mixed.txt", offset=emoji + 2, window=8)
    assert answer["offset"] == emoji
    assert answer["content"].startswith("😀")


def test_an_empty_file_is_one_empty_window(files):
    answer = read_window(files, "empty.txt")
    assert (answer["content"], answer["size"], answer["next_offset"]) == ("", 0, None)


def test_an_offset_past_the_end_reads_nothing(files):
    answer = read_window(files, "ascii.csv", offset=10_000, window=16)
    assert (answer["content"], answer["next_offset"]) == ("", None)


@pytest.mark.parametrize("path", ["../secret.txt", "ABSOLUTE", "data/../../secret.txt"])
def test_paths_outside_the_workdir_are_refused(files, path):
    secret = files.parent / "secret.txt"
    secret.write_text("no")
    with pytest.raises(ValueError, match="outside the run's working directory"):
        read_window(files, str(secret) if path == "ABSOLUTE" else path)


def test_a_symlink_leading_out_of_the_workdir_is_refused(files, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("no")
    os.symlink(outside / "secret.txt", files / "link.txt")
    with pytest.raises(ValueError, match="outside"):
        read_window(files, "link.txt")


def test_missing_files_and_folders_are_not_readable(files):
    with pytest.raises(FileNotFoundError):
        read_window(files, "nope.txt")
    with pytest.raises(FileNotFoundError):
        read_window(files, "data")


@pytest.mark.parametrize("window,offset", [(3, 0), (0, 0), (16, -1)])
def test_bad_windows_and_offsets_are_refused(files, window, offset):
    with pytest.raises(ValueError):
        read_window(files, "ascii.csv", offset=offset, window=window)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(text=st.text(min_size=0, max_size=400), window=st.integers(min_value=4, max_value=64))
def test_any_text_and_window_round_trips(tmp_path_factory, text, window):
    folder = tmp_path_factory.mktemp("prop")
    (folder / "f.txt").write_bytes(text.encode("utf-8"))
    joined, _ = read_all(lambda p, **kw: read_window(folder, p, **kw), "f.txt", window)
    assert joined.encode("utf-8") == text.encode("utf-8")


# ------------------------------------------------------------------------- through a Run
OUTPUT_WRITER = """
[tool_permissions]
write_file = "allow"
[stages.answer]
mode = "output"
available_tools = ["write_file", "submit_output"]
nudge = { enabled = false }
[stages.answer.transitions]
"""


@pytest.mark.slow
@pytest.mark.usefixtures("blueprint_permissions")
def test_run_read_artifact_reads_what_the_answer_names(engine):
    turns = [
        call("write_file", path="out/big.txt", content=MIXED),
        call("submit_output", content="300 rows, see the file", artifacts=["out/big.txt"]),
        say("done"),
    ]
    run, _ = engine.run(OUTPUT_WRITER, turns)
    assert run.status == "complete", run.error
    (path,) = run.result.artifacts
    for window in (4, 7, 333, 1 << 20):
        text, _ = read_all(run.read_artifact, path, window)
        assert text == MIXED
    first = run.read_artifact(path, window=50)
    assert first["offset"] == 0 and first["next_offset"] is not None
    with pytest.raises(ValueError):
        run.read_artifact("../meta.json")
    with pytest.raises(ValueError):
        run.read_artifact(str(Path(run.run_dir) / "meta.json"))


@pytest.mark.usefixtures("blueprint_permissions")
def test_read_artifact_default_window_is_one_mebibyte(engine):
    content = "x" * ((1 << 20) + 10)
    turns = [call("write_file", path="big.txt", content=content),
             call("submit_output", content="big", artifacts=["big.txt"]), say("done")]
    run, _ = engine.run(OUTPUT_WRITER, turns)
    assert run.status == "complete", run.error
    first = run.read_artifact("big.txt")
    assert len(first["content"]) == 1 << 20
    assert first["next_offset"] == 1 << 20
    rest = run.read_artifact("big.txt", offset=first["next_offset"])
    assert rest["content"] == "x" * 10 and rest["next_offset"] is None
