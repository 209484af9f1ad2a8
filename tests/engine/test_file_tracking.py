"""``[context.file_tracking]`` (issue 24): the files a run reads and writes are kept in their
hashmap region under their paths, as the next model call shows."""

from __future__ import annotations

from pathlib import Path

from support import call, events_of, say

AGENT = """
[agent]
name = "tracker"
[tool_permissions]
write_file = "allow"
edit_file = "allow"
[context.regions]
system = {{ kind = "pinned", max_tokens = 4000 }}
files = {{ kind = "{kind}", max_tokens = 4000 }}
conversation = {{ kind = "sliding_window", max_items = 40, max_tokens = 8000 }}
[context.file_tracking]
region = "files"
{extra}
[stages.work]
available_tools = ["read_file", "write_file", "edit_file"]
nudge = {{ enabled = false }}
[stages.work.transitions]
"""

TURNS = [call("read_file", path="notes.md"), call("write_file", path="out.md", content="first draft"),
         call("edit_file", path="out.md", old_str="first", new_str="second"), say("ok")]


def _system(model, index: int = -1) -> str:
    return "\n".join(model.requests[index].system)


def test_reads_and_writes_land_in_the_region(engine, workdir: Path, blueprint_permissions: Path) -> None:
    (workdir / "notes.md").write_text("the notes")
    run, model = engine.run(AGENT.format(kind="hashmap", extra=""), TURNS)
    assert run.status == "complete", run.error
    assert "## files" not in _system(model, 0)
    after_read = _system(model, 1)
    assert "notes.md" in after_read and "the notes" in after_read
    last = _system(model)
    assert "second draft" in last and "first draft" not in last  # the entry for out.md was replaced


def test_reads_only_and_a_token_cap(engine, workdir: Path, blueprint_permissions: Path) -> None:
    (workdir / "notes.md").write_text("x" * 400)
    run, model = engine.run(AGENT.format(kind="hashmap", extra="track_writes = false\nmax_file_tokens = 10"), TURNS)
    last = _system(model)
    assert "x" * 40 in last and "x" * 41 not in last and "tracked up to 10 tokens" in last
    assert "draft" not in last


def test_a_region_that_is_not_a_hashmap_is_named_once(engine, workdir: Path, blueprint_permissions: Path) -> None:
    (workdir / "notes.md").write_text("the notes")
    run, _ = engine.run(AGENT.format(kind="temporary", extra=""), TURNS)
    warnings = [e.message for e in events_of(run, "warning") if "file_tracking" in e.message]
    assert len(warnings) == 1 and "not a hashmap" in warnings[0]
