"""Datasets of an evaluation (issue 22): rows from a list of dicts, a pandas DataFrame or a CSV /
JSONL file, fitted to a blueprint as :class:`Case` values.

How the columns map: ``task`` (or ``input``, the upstream's test key) is the task; a column named
after one of the blueprint's inputs fills that input; ``expected`` is what checks compare with; any
other column rides along for checks to read (``row.difficulty`` in a scorer). A dataset that does
not fit (a column that looks like a misspelt input, a required input left empty, a task given to a
blueprint that takes none) raises :class:`DatasetError` naming the column and the row.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.blueprint.errors import did_you_mean
from lev_nb.errors import CleanError, Problem
from lev_nb.records import record

__all__ = ["Case", "DatasetError", "fit_cases", "read_rows", "rows_hash"]

TASK_COLUMNS = ("task", "input")
EXPECTED = "expected"


class DatasetError(CleanError, ValueError):
    """A dataset that cannot be read or does not fit the blueprint: says where (file, row, column)."""

    def __init__(self, message: str, where: str | None = None, todo: str | None = None) -> None:
        super().__init__(" ".join(p for p in (where and f"{where}:", message, todo and f"({todo})") if p))
        self.message, self.where, self.todo = message, where, todo

    def problem(self) -> Problem:
        return Problem(self.message, self.where, self.todo)


@record
class Case:
    """One row of a dataset as a run sees it: its ``index`` (0-based row), the ``task``, the
    blueprint ``inputs``, the ``expected`` value (None when the dataset has none) and the whole
    row (``row``, every column, for checks)."""

    index: int
    task: str
    inputs: dict[str, str] = field(default_factory=dict)
    expected: Any = None
    row: dict[str, Any] = field(default_factory=dict)

    def launch(self) -> dict[str, Any]:
        """What ``run_many`` takes for this case: the task and the inputs in one dict."""
        return {"task": self.task, **self.inputs}


def read_rows(dataset: Any) -> tuple[list[dict[str, Any]], str]:
    """The dataset's rows as dicts, and a name for messages (the file, ``DataFrame`` or ``list``)."""
    if isinstance(dataset, (str, os.PathLike)):
        return _read_file(Path(dataset)), str(dataset)
    if hasattr(dataset, "to_dict") and hasattr(dataset, "columns"):  # a pandas DataFrame
        rows = dataset.to_dict(orient="records")
        return [{str(k): _plain(v) for k, v in row.items()} for row in rows], "DataFrame"
    if isinstance(dataset, Iterable) and not isinstance(dataset, (bytes, Mapping)):
        rows = []
        for i, row in enumerate(dataset):
            if isinstance(row, str):
                row = {"task": row}
            if not isinstance(row, Mapping):
                raise DatasetError(f"row {i + 1} is a {type(row).__name__}, not a dict of columns", "dataset",
                                   "give each row as a dict such as {'task': ..., 'expected': ...}")
            rows.append({str(k): v for k, v in row.items()})
        return rows, "dataset"
    raise DatasetError(f"a dataset must be a list of dicts, a pandas DataFrame or a CSV / JSONL file, "
                       f"not {type(dataset).__name__}")


def _plain(value: Any) -> Any:
    """A DataFrame cell as plain Python: NaN (an empty cell) becomes None, numpy scalars numbers."""
    if isinstance(value, float) and value != value:
        return None
    item = getattr(value, "item", None)
    return item() if callable(item) and type(value).__module__ == "numpy" else value


def _read_file(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".ndjson", ".csv", ".tsv"):
        raise DatasetError(f"unknown dataset file type '{suffix or path.name}'", str(path),
                           "use a .csv, .tsv or .jsonl file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read the dataset: {getattr(exc, 'strerror', None) or exc}", str(path)) from None
    if suffix in (".jsonl", ".ndjson"):
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"not valid JSON ({exc.msg})", f"{path}:{number}") from None
            if not isinstance(row, dict):
                raise DatasetError("each line must be a JSON object of columns", f"{path}:{number}")
            rows.append(row)
        return rows
    reader = csv.DictReader(text.splitlines(), delimiter="\t" if suffix == ".tsv" else ",")
    return [{k: v for k, v in row.items() if k is not None} for row in reader]


def rows_hash(rows: list[dict[str, Any]]) -> str:
    """A digest of the rows (order and content), recorded so a rerun can tell it used the same data."""
    text = json.dumps(rows, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def fit_cases(rows: list[dict[str, Any]], source: str, inputs: list[tuple[str, bool]], takes_task: bool,
              task_required: bool = False) -> list[Case]:
    """Fit ``rows`` to a blueprint whose inputs are ``inputs`` (name, required) and which takes a
    task when ``takes_task`` (one in every row when ``task_required``); raise DatasetError for the
    first misfit, naming row and column."""
    if not rows:
        raise DatasetError("the dataset has no rows", source)
    names = [name for name, _ in inputs]
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    task_column = next((c for c in TASK_COLUMNS if c in columns), None)
    for column in columns:
        if column in names or column in TASK_COLUMNS or column == EXPECTED:
            continue
        hint = did_you_mean(column, names + list(TASK_COLUMNS) + [EXPECTED])
        if hint:
            raise DatasetError(f"column '{column}' is not one of the blueprint's inputs ({hint})", source,
                               "rename the column, or give it a name far from the inputs to keep it as data")
    if task_column and not takes_task:
        raise DatasetError(f"column '{task_column}' gives a task, but the blueprint takes none: its inputs are "
                           f"{', '.join(repr(n) for n in names)}", source, "rename it to one of the inputs")
    cases = []
    for i, row in enumerate(rows):
        task = _text(row.get(task_column)) if task_column else ""
        given = {name: _text(row[name]) for name in names if row.get(name) is not None}
        for name, required in inputs:
            if required and not given.get(name, "").strip():
                raise DatasetError(f"row {i + 1}: column '{name}' is empty, and the blueprint requires that input",
                                   source, f"fill '{name}' in every row")
        if takes_task and (task_required or not names) and not task.strip():
            raise DatasetError(f"row {i + 1}: no task (columns: {', '.join(columns)})", source,
                               "give each row a 'task' column")
        cases.append(Case(i, task, given, row.get(EXPECTED), dict(row)))
    return cases


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
