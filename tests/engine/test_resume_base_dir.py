"""A blueprint given as text with a folder (a %%blueprint cell, lev_nb.designer) keeps that folder
in launch.json, so a resumed run finds its scripts where the first life did."""

from __future__ import annotations

from pathlib import Path

from lev_nb.blueprint import load_text
from lev_nb.engine.resume import _blueprint, launch_record

TEXT = '[agent]\nname = "t"\n[stages.a]\nmax_iterations = 2\n[stages.a.transitions]\n'


def record_of(bp: object) -> dict[str, object]:
    return launch_record(bp, model="mock", task="t", workdir=None, inputs={}, output_request=None,
                         output_validator=None, webhook=None)["blueprint"]


def test_the_folder_of_a_text_blueprint_survives_a_resume(tmp_path: Path) -> None:
    source = record_of(load_text(TEXT, base_dir=tmp_path))
    assert source == {"path": None, "text": TEXT, "base_dir": str(tmp_path.resolve())}
    again, notes = _blueprint("run-1", source)
    assert again.base_dir == tmp_path.resolve() and again.source_path is None and notes == []


def test_text_without_a_folder_stays_without_one() -> None:
    source = record_of(load_text(TEXT))
    assert source["base_dir"] is None
    assert _blueprint("run-1", source)[0].base_dir is None
