"""``%lev show RUN``: a recorded run's story in a notebook, through a real IPython shell."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from support import ROOT

import lev_nb
from lev_nb.notebook.display import RecordedRun

TRIAGE = str(ROOT / "blueprints" / "triage")


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "lev_nb.notebook")
    yield shell


def test_show_tells_a_recorded_run(ip: InteractiveShell) -> None:
    run = lev_nb.load(TRIAGE).run("Sort these bug reports:\n1. crash on save\n2. typo", model="mock").wait(60)
    assert run.status == "complete", run.error
    shown = ip.run_line_magic("lev", f"show {run.run_id[:-2]}")
    assert isinstance(shown, RecordedRun)
    data, _ = ip.display_formatter.format(shown)
    plain, page = data["text/plain"], data["text/html"]
    assert plain.startswith(f"triage  {run.run_id}  complete\n")
    assert "path: " + " → ".join(run.stage_history) in plain
    for stage in set(run.stage_history):
        assert f"<td style='text-align:left'>{stage}</td>" in page  # the stage table
    assert "class='lev-run'" in page and f"data-run-id='{run.run_id}'" in page  # the run view's snapshot
    assert "Final output" in page and run.result.content.splitlines()[0] in page


def test_show_of_an_unknown_run_is_one_line(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("lev", "show nosuchrun")
    message = str(info.value)
    assert message.startswith("%lev show: no run id starts with 'nosuchrun'") and "\n" not in message


def test_help_names_show(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("lev", "help")
    assert "%lev show RUN" in capsys.readouterr().out
