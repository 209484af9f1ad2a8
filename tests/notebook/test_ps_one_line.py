"""`%lev ps` (and `lev ps`) keep one line per run, however long a run's error is."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from support import ROOT

import lev_nb
from lev_nb.cli.run_status import STATUS_WIDTH, one_line

LONG = "the provider said: " + "this is a very long explanation of what went wrong\nover several lines " * 6


def test_one_line_folds_and_cuts_with_an_ellipsis() -> None:
    assert one_line("a\n  b") == "a b"
    cut = one_line(LONG)
    assert len(cut) <= STATUS_WIDTH and cut.endswith("…") and "\n" not in cut


def test_ps_rows_stay_one_line_with_long_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))
    bp = lev_nb.load(ROOT / "blueprints" / "triage")
    failing = lev_nb.ScriptedModel([{"error": {"kind": "auth", "message": LONG}}])
    bad = bp.run("R-1", model=failing).wait(60)
    good = bp.run("R-2", model="mock").wait(60)
    assert bad.status == "error" and len(bad.error or "") > STATUS_WIDTH
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "lev_nb.notebook")
    capsys.readouterr()
    shell.run_line_magic("lev", "ps")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3  # the header and one line per run
    row = next(line for line in lines if bad.run_id in line)
    assert "error: the model call failed" in row and "…" in row
    assert any(good.run_id in line and "complete" in line for line in lines)
    widths = {len(line.rstrip()) for line in lines}
    assert max(widths) < 200
