"""Datasets of an evaluation: a list of dicts, a DataFrame, CSV and JSONL files, fitted to the
blueprint's task and inputs, and one clear error naming the column and row when they do not fit."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lev_nb.eval.datasets import DatasetError, fit_cases, read_rows, rows_hash

INPUTS = [("audience", True), ("tone", False)]
ROWS = [{"task": "R-1", "audience": "devs", "expected": "bug"}, {"task": "R-2", "audience": "ops", "tone": "dry"}]


def fit(dataset: object, inputs: list[tuple[str, bool]] = INPUTS, takes_task: bool = True) -> list:
    rows, source = read_rows(dataset)
    return fit_cases(rows, source, inputs, takes_task)


def test_every_kind_of_dataset_gives_the_same_cases(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    (tmp_path / "d.csv").write_text("task,audience,tone,expected\nR-1,devs,,bug\nR-2,ops,dry,\n")
    kinds = [ROWS, pd.DataFrame(ROWS), tmp_path / "d.jsonl", str(tmp_path / "d.csv")]
    for dataset in kinds:
        cases = fit(dataset)
        assert [c.task for c in cases] == ["R-1", "R-2"], dataset
        assert cases[0].inputs["audience"] == "devs" and cases[1].inputs == {"audience": "ops", "tone": "dry"}
        assert cases[0].expected == "bug" and cases[1].expected in (None, "")
        assert cases[0].launch() == {"task": "R-1", **cases[0].inputs}


def test_other_columns_ride_along_for_checks_and_a_string_row_is_a_task() -> None:
    cases = fit([{"task": "R-1", "audience": "devs", "difficulty": 3}, ])
    assert cases[0].row["difficulty"] == 3
    assert fit(["just a task"], inputs=[])[0].task == "just a task"


def test_a_column_that_looks_like_a_misspelt_input_is_refused_naming_it() -> None:
    with pytest.raises(DatasetError, match="column 'audiance' is not one of the blueprint's inputs "
                                           r"\(did you mean 'audience'\?\)"):
        fit([{"task": "R-1", "audiance": "devs"}])


def test_a_required_input_left_empty_names_the_row_and_the_column(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("task,audience\nR-1,devs\nR-2,\n")
    with pytest.raises(DatasetError) as info:
        fit(tmp_path / "d.csv")
    assert str(info.value).startswith(f"{tmp_path / 'd.csv'}: row 2: column 'audience' is empty")


def test_a_task_column_for_a_blueprint_that_takes_no_task_is_refused() -> None:
    with pytest.raises(DatasetError, match="column 'task' gives a task, but the blueprint takes none"):
        fit([{"task": "R-1", "audience": "devs"}], takes_task=False)


def test_a_broken_file_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"task": "a"}\n{"task": \n')
    with pytest.raises(DatasetError, match=r"d.jsonl:2: not valid JSON"):
        fit(tmp_path / "d.jsonl")
    with pytest.raises(DatasetError, match="unknown dataset file type '.txt'"):
        fit(tmp_path / "d.txt")


def test_the_dataset_hash_follows_the_content_and_the_order() -> None:
    assert rows_hash(ROWS) == rows_hash([dict(r) for r in ROWS])
    assert rows_hash(ROWS) != rows_hash(ROWS[::-1])
