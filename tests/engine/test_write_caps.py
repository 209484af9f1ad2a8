"""Issue 25: ``[limits] max_tool_call_write_bytes`` and ``max_run_write_bytes`` bound how much an
agent puts on disk, and no write may leave less than 1 GiB free (upstream configuration.md). A
refused write is an ``[error]`` the model reads and a ``write-refused`` warning the person sees."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import call, say

from lev_nb.messages import ToolResultBlock
from lev_nb.tools import write_budget

STAGE = """
[stages.work]
available_tools = ["write_file", "edit_file", "shell"]
tool_permissions = { write_file = "allow", edit_file = "allow", shell = "allow" }
max_iterations = 10
[stages.work.transitions]
"""


def _limits(home: Path, text: str) -> None:
    config = home / "config.toml"  # the blueprint_permissions fixture wrote [security] already
    config.write_text(config.read_text() + "[limits]\n" + text)


def results(model) -> list[str]:
    """Every tool result the model was shown, in order."""
    last = model.requests[-1]
    return [str(b.content) for m in last.messages if m.role == "user"
            for b in m.blocks() if isinstance(b, ToolResultBlock)]


@pytest.mark.usefixtures("blueprint_permissions")
def test_one_call_over_the_per_call_cap_is_refused_before_a_byte_lands(engine, home: Path, workdir: Path) -> None:
    _limits(home, "max_tool_call_write_bytes = 10\n")
    run, model = engine.run(STAGE, [call("write_file", path="big.txt", content="x" * 11),
                                    call("write_file", path="small.txt", content="x" * 10), say("done")])
    assert run.status == "complete", run.error
    refused, written = results(model)
    assert refused.startswith("[error] write_file:") and "max_tool_call_write_bytes" in refused
    assert not (workdir / "big.txt").exists() and (workdir / "small.txt").read_text() == "x" * 10
    assert [w.code for w in run.warnings] == ["write-refused"]
    assert "big.txt" in run.warnings[0].message and written.startswith("Wrote 10 bytes")


@pytest.mark.usefixtures("blueprint_permissions")
def test_the_run_cap_counts_every_write_of_the_run(engine, home: Path, workdir: Path) -> None:
    _limits(home, "max_run_write_bytes = 25\n")
    run, model = engine.run(STAGE, [call("write_file", path="a.txt", content="0123456789"),
                                    call("edit_file", path="a.txt", old_str="0123", new_str="abcd"),  # 10 more
                                    call("write_file", path="b.txt", content="b" * 6), say("done")])
    assert run.status == "complete", run.error
    first, edited, refused = results(model)
    assert edited.startswith("Edited") and "max_run_write_bytes" in refused and not (workdir / "b.txt").exists()
    assert [w.code for w in run.warnings] == ["write-refused"]


@pytest.mark.usefixtures("blueprint_permissions")
def test_a_shell_redirect_is_measured_after_the_call_and_stops_the_next(engine, home: Path, workdir: Path) -> None:
    _limits(home, "max_tool_call_write_bytes = 100\nmax_run_write_bytes = 300\n")
    run, model = engine.run(STAGE, [call("shell", command="head -c 500 /dev/zero > big.bin"),
                                    call("shell", command="echo hi > small.txt"),
                                    call("shell", command="echo read only"), say("done")])
    assert run.status == "complete", run.error
    overran, refused, plain = results(model)
    assert (workdir / "big.bin").stat().st_size == 500  # the bytes were not ours to stop
    assert "500 bytes" in overran and "max_tool_call_write_bytes" in overran
    assert refused.startswith("[error] shell:") and not (workdir / "small.txt").exists()
    assert plain.strip() == "read only"  # a command that writes no file is never refused
    assert [w.code for w in run.warnings] == ["write-refused", "write-refused"]


@pytest.mark.usefixtures("blueprint_permissions")
def test_no_write_may_leave_less_than_the_reserve_free(engine, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    free = write_budget.free_bytes(workdir)
    assert free is not None
    monkeypatch.setattr(write_budget, "MIN_FREE_BYTES", free + (1 << 40))  # this disk is "nearly full"
    run, model = engine.run(STAGE, [call("write_file", path="a.txt", content="a"),
                                    call("shell", command="echo hi > b.txt"), say("done")])
    assert run.status == "complete", run.error
    for text in results(model):
        assert text.startswith("[error]") and "free" in text
    assert not (workdir / "a.txt").exists() and not (workdir / "b.txt").exists()
    assert [w.code for w in run.warnings] == ["write-refused", "write-refused"]


def test_a_disk_whose_free_space_cannot_be_read_is_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(path: object) -> None:
        raise OSError("no statvfs here")

    monkeypatch.setattr(write_budget.os, "statvfs", unreadable)
    budget = write_budget.WriteBudget(per_call=5)
    assert write_budget.free_bytes(tmp_path) is None
    assert budget.admit("write_file", "a", tmp_path / "a", 5) is None
    assert budget.admit("write_file", "a", tmp_path / "a", 6) is not None  # the caps still apply


def test_a_script_tools_host_functions_answer_to_the_same_caps(tmp_path: Path) -> None:
    from lev_nb.tools.scripts import RunToolHost
    from lev_nb.workspace import Workspace

    told: list[str] = []
    budget = write_budget.WriteBudget(per_call=5, per_run=8, tell=told.append)
    host = RunToolHost(Workspace(tmp_path), shell_allowed=True, writes=budget,
                       refusals={"shell": None, "write_file": None})
    with pytest.raises(PermissionError, match="max_tool_call_write_bytes"):
        host.write_file("a.txt", "123456")
    assert host.write_file("a.txt", "12345") == "wrote 5 bytes to a.txt"
    assert "max_run_write_bytes" in host.shell("printf 1234 > b.txt")  # 9 written now: over the run's 8
    with pytest.raises(PermissionError, match="max_run_write_bytes"):
        host.shell("printf x > c.txt")
    assert len(told) == 3 and not (tmp_path / "c.txt").exists()
