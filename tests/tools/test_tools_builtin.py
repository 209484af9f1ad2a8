"""Built-in tool handlers, run against a real temporary working directory."""

from __future__ import annotations

import asyncio
import os
import re

import pytest

from lev_nb.tools import READ_FILE_CAP, SHELL_STREAM_CAP, ToolContext, default_registry
from lev_nb.workspace import Workspace
from lev_nb.workspace import PathEscape


class FakeContext:
    """Records what the context tools forward."""

    def __init__(self):
        self.calls = []

    def write(self, region, content, key=None):
        self.calls.append(("write", region, content, key))
        return f"stored in {region}"

    async def todo_done(self, region, id):
        self.calls.append(("todo_done", region, id))
        return f"item {id} done"


@pytest.fixture
def ctx(tmp_path):
    return ToolContext(Workspace(tmp_path), run_id="r1")


def call(ctx, name, **args):
    tool = default_registry().get(name)
    return asyncio.run(tool.handler(ctx, args))


# read_file ---------------------------------------------------------------------------------------

def test_read_file_returns_content(ctx, tmp_path):
    (tmp_path / "a.txt").write_text("héllo")
    assert call(ctx, "read_file", path="a.txt") == "héllo"


def test_read_file_missing(ctx):
    assert call(ctx, "read_file", path="nope.txt").startswith("[error] 'nope.txt' does not exist")


def test_read_file_directory_is_an_error(ctx, tmp_path):
    (tmp_path / "d").mkdir()
    result = call(ctx, "read_file", path="d")
    assert result.startswith("[error] 'd' is a directory, not a file.") and "list_dir" in result


def test_read_file_caps_at_256_kib_with_a_note(ctx, tmp_path):
    (tmp_path / "big.txt").write_bytes(b"a" * (READ_FILE_CAP + 10))
    result = call(ctx, "read_file", path="big.txt")
    body, note = result.split("\n[truncated] ", 1)
    assert body == "a" * READ_FILE_CAP
    assert f"{READ_FILE_CAP + 10} bytes" in note and f"first {READ_FILE_CAP}" in note


def test_read_file_cap_never_splits_a_character(ctx, tmp_path):
    (tmp_path / "u.txt").write_bytes(b"a" * (READ_FILE_CAP - 1) + "é".encode() + b"z" * 5)
    body = call(ctx, "read_file", path="u.txt").split("\n[truncated] ")[0]
    assert body == "a" * (READ_FILE_CAP - 1)


# read_files --------------------------------------------------------------------------------------

def test_read_files_headings_and_inline_errors(ctx, tmp_path):
    (tmp_path / "a.txt").write_text("A")
    (tmp_path / "b.txt").write_text("B")
    result = call(ctx, "read_files", paths=["a.txt", "missing", "b.txt"])
    assert result == "### [a.txt]\nA\n\n### [missing]\n[error] 'missing' does not exist. Call list_dir to see which files there are.\n\n### [b.txt]\nB"


# write_file --------------------------------------------------------------------------------------

def test_write_file_creates_parents_and_reports_bytes(ctx, tmp_path):
    result = call(ctx, "write_file", path="deep/er/x.txt", content="hé")
    assert result == "Wrote 3 bytes to 'deep/er/x.txt'."
    assert (tmp_path / "deep/er/x.txt").read_text() == "hé"


def test_write_file_overwrites(ctx, tmp_path):
    (tmp_path / "x.txt").write_text("old")
    call(ctx, "write_file", path="x.txt", content="new")
    assert (tmp_path / "x.txt").read_text() == "new"


def test_write_file_outside_raises_path_escape(ctx):
    with pytest.raises(PathEscape):
        call(ctx, "write_file", path="../x.txt", content="no")


def test_write_file_refuses_when_workdir_is_gone(tmp_path):
    gone = tmp_path / "w"
    gone.mkdir()
    ctx = ToolContext(Workspace(gone))
    gone.rmdir()
    with pytest.raises(Exception, match="no longer exists"):
        call(ctx, "write_file", path="a.txt", content="x")


# edit_file ---------------------------------------------------------------------------------------

def test_edit_file_replaces_the_single_occurrence(ctx, tmp_path):
    (tmp_path / "f.py").write_text("a = 1\nb = 2\n")
    assert call(ctx, "edit_file", path="f.py", old_str="b = 2", new_str="b = 3") == "Edited 'f.py': replaced 1 occurrence."
    assert (tmp_path / "f.py").read_text() == "a = 1\nb = 3\n"


def test_edit_file_not_found_text(ctx, tmp_path):
    (tmp_path / "f.py").write_text("a = 1\n")
    result = call(ctx, "edit_file", path="f.py", old_str="zzz", new_str="y")
    assert result.startswith("[error] edit_file: the text to replace was not found in 'f.py'.")
    assert (tmp_path / "f.py").read_text() == "a = 1\n"


def test_edit_file_several_occurrences_text(ctx, tmp_path):
    (tmp_path / "f.py").write_text("x\nx\nx\n")
    result = call(ctx, "edit_file", path="f.py", old_str="x", new_str="y")
    assert result.startswith("[error] edit_file: the text to replace occurs 3 times in 'f.py'.")
    assert (tmp_path / "f.py").read_text() == "x\nx\nx\n"


def test_edit_file_missing_file(ctx):
    assert call(ctx, "edit_file", path="none.py", old_str="a", new_str="b").startswith("[error] 'none.py' does not exist")


# list_dir ----------------------------------------------------------------------------------------

def test_list_dir_sorted_with_sizes_and_slashes(ctx, tmp_path):
    (tmp_path / "b.txt").write_text("12345")
    (tmp_path / "a_dir").mkdir()
    (tmp_path / "c.md").write_text("")
    assert call(ctx, "list_dir") == "a_dir/\nb.txt (5B)\nc.md (0B)"


def test_list_dir_empty(ctx, tmp_path):
    (tmp_path / "e").mkdir()
    assert call(ctx, "list_dir", path="e") == "(empty directory: e)"


def test_list_dir_on_a_file_is_an_error(ctx, tmp_path):
    (tmp_path / "f").write_text("x")
    assert call(ctx, "list_dir", path="f").startswith("[error] 'f' is a file")


# shell -------------------------------------------------------------------------------------------

def test_shell_runs_in_the_workdir(ctx, tmp_path):
    assert call(ctx, "shell", command="pwd").strip() == os.path.realpath(tmp_path)


def test_shell_success_without_output(ctx):
    assert call(ctx, "shell", command="true") == "(the command succeeded and printed nothing)"


def test_shell_failure_shape(ctx):
    result = call(ctx, "shell", command="echo out; echo err >&2; exit 3")
    assert result == "[exit code 3]\nstdout:\nout\n\nstderr:\nerr\n"


@pytest.mark.slow
def test_shell_timeout_kills_the_process_group(tmp_path):
    ctx = ToolContext(Workspace(tmp_path), shell_timeout_s=1)
    # The background child writes a marker after 3 s unless the whole group was killed.
    result = call(ctx, "shell", command="(sleep 3; touch survived) & sleep 5")
    assert result == "[timed out] The command ran past its 1s limit and was stopped: (sleep 3; touch survived) & sleep 5"
    asyncio.run(asyncio.sleep(3))
    assert not (tmp_path / "survived").exists()


def test_shell_output_is_capped_per_stream(ctx):
    result = call(ctx, "shell", command=f"head -c {SHELL_STREAM_CAP + 500} /dev/zero | tr '\\0' 'a'")
    body, note = result.split("\n[truncated] ", 1)
    assert body == "a" * SHELL_STREAM_CAP
    assert note == f"stdout was {SHELL_STREAM_CAP + 500} bytes; only the first {SHELL_STREAM_CAP} are shown."


def test_bash_alias_uses_the_shell_handler():
    registry = default_registry()
    assert registry.get("bash") is registry.get("shell")


# current_time ------------------------------------------------------------------------------------

def test_current_time_shape(ctx):
    result = call(ctx, "current_time")
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ UTC; unix \d+$", result)


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "Pacific/Chatham",
                                  "America/St_Johns", "Africa/Monrovia"])
@pytest.mark.parametrize("now", [0, 1e9, 1796458827.5, -2e9, -3.3e9, 4e9])
def test_current_time_says_what_datetime_says(ctx, monkeypatch, zone, now):
    """Built from time's structs, the answer is datetime's isoformat to the character: offsets with
    half hours, quarter hours and seconds (Monrovia's before 1972), far past and future."""
    import time
    from datetime import datetime, timezone

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    monkeypatch.setattr(time, "time", lambda: now)
    try:
        local = datetime.fromtimestamp(now).astimezone()
        utc = datetime.fromtimestamp(now, tz=timezone.utc)
        expected = (f"{local.strftime('%A')} {local.isoformat(timespec='seconds')} local; "
                    f"{utc.isoformat(timespec='seconds').replace('+00:00', 'Z')} UTC; unix {int(now)}")
        assert call(ctx, "current_time") == expected
    finally:
        monkeypatch.undo()
        time.tzset()


# context tools -----------------------------------------------------------------------------------

def test_context_tools_without_engine_are_unavailable(ctx):
    assert call(ctx, "context_write", region="notes", content="x").startswith("[unavailable]")


def test_context_tools_delegate_sync_and_async(tmp_path):
    fake = FakeContext()
    ctx = ToolContext(Workspace(tmp_path), context=fake)
    assert call(ctx, "context_write", region="notes", content="x", key="k") == "stored in notes"
    assert call(ctx, "todo_done", region="plan", id=2) == "item 2 done"
    assert fake.calls == [("write", "notes", "x", "k"), ("todo_done", "plan", 2)]


def test_inline_tools_have_no_handler_and_the_fixed_submit_schema():
    registry = default_registry()
    for name in ("submit_output", "fan_out", "runtime_info"):
        assert registry.is_inline(name) and registry.get(name).handler is None
    params = registry.get("submit_output").parameters
    assert params["required"] == ["content"]
    assert params["properties"]["artifacts"]["items"] == {"type": "string"}
