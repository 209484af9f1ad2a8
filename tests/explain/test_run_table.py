"""``lev_nb.runs()``: the run store as a table over 10,000 records (filters, newest first, limit,
to_pandas, its text and HTML), rows that follow their record when it changes, and pandas being
optional; ``run.events.to_pandas()`` of a real run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import lev_nb
from lev_nb.explain.table import RunRow, RunTable, forget
from lev_nb.frames import PandasMissing

pytestmark = pytest.mark.slow  # a store of 10,000 records is written once for the module

STORE_SIZE = 10_000
START = 1_790_000_000  # unix seconds of the oldest run in the store


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def meta(i: int, **changes: Any) -> dict[str, Any]:
    """Record ``i`` of the store: every third a sub-agent of the one before, a mix of agents and statuses."""
    secs = START + i * 60
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(secs))
    end = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(secs + 30))
    agent = ("triage", "coder", "summary")[i % 3]
    data: dict[str, Any] = {
        "run_id": f"{agent}-{secs}-{i:012x}", "agent_name": agent, "task": f"task {i}", "pid": 0,
        "status": ("complete", "error", "cancelled", "complete")[i % 4], "current_stage": "b",
        "iteration": 3, "prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": 0, "cache_write_tokens": 0,
        "tool_calls": 2, "started_at": stamp, "updated_at": end, "error": "boom" if i % 4 == 1 else None,
        "parent_run_id": None, "stage_history": ["a", "b"], "cost_usd": 0.5 if i % 2 else None,
        "usage": {"total": {"calls": 4, "prompt_tokens": 100, "completion_tokens": 10}},
    }
    data.update(changes)
    return data


def write(home: Path, data: dict[str, Any]) -> Path:
    folder = home / "runs" / data["run_id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LEV_HOME holding STORE_SIZE recorded runs, one of them abandoned and one broken."""
    home = tmp_path_factory.mktemp("store")
    for i in range(STORE_SIZE):
        data = meta(i)
        if i == STORE_SIZE - 5:
            data.update(status="running", pid=dead_pid())
        write(home, data)
    broken = home / "runs" / f"triage-{START - 60}-{'f' * 12}"
    broken.mkdir()
    (broken / "meta.json").write_text("{not json", encoding="utf-8")
    return home


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    forget()


def test_every_run_newest_first(store: Path) -> None:
    table = lev_nb.runs(home=store)
    assert isinstance(table, RunTable) and isinstance(table, list)
    assert len(table) == STORE_SIZE + 1
    assert all(isinstance(row, RunRow) for row in table)
    started = [row.started for row in table if row.started is not None]
    assert started == sorted(started, reverse=True)
    newest = table[0]
    i = STORE_SIZE - 1
    assert (newest.run_id, newest.agent, newest.status) == (f"triage-{START + i * 60}-{i:012x}", "triage", "complete")
    assert newest.stages == ("a", "b") and newest.calls == 4 and newest.tokens == 110 and newest.tool_calls == 2
    assert newest.cost_usd == 0.5 and newest.duration_s == 30.0 and newest.error is None
    assert newest.started == datetime.fromtimestamp(START + i * 60, timezone.utc)
    gone = next(row for row in table if row.status == "running")
    assert gone.abandoned and gone.duration_s == 30.0  # ended with its last record, not now
    assert table[-1].status == "broken" and "meta.json" in (table[-1].error or "")


def test_filters(store: Path) -> None:
    complete = lev_nb.runs(status="complete", home=store)
    assert len(complete) == STORE_SIZE // 2 - 1 and {r.status for r in complete} == {"complete"}  # one is running
    both = lev_nb.runs(status=["error", "cancelled"], agent="coder", home=store)
    assert both and {r.status for r in both} <= {"error", "cancelled"} and {r.agent for r in both} == {"coder"}
    assert len(both) == sum(1 for i in range(STORE_SIZE) if i % 3 == 1 and i % 4 in (1, 2))
    newest = lev_nb.runs(limit=5, home=store)
    assert [r.run_id for r in newest] == [r.run_id for r in lev_nb.runs(home=store)[:5]]
    since = datetime.fromtimestamp(START + (STORE_SIZE - 10) * 60, timezone.utc)
    assert len(lev_nb.runs(since=since, home=store)) == 10
    assert len(lev_nb.runs(since=since.isoformat(), home=store)) == 10
    assert len(lev_nb.runs(since=timedelta(days=1), home=store)) == 0  # the store is long past
    assert lev_nb.runs(agent="nobody", home=store) == []
    with pytest.raises(ValueError, match="is not a time"):
        lev_nb.runs(since="yesterday", home=store)
    with pytest.raises(ValueError, match="limit must be"):
        lev_nb.runs(limit=-1, home=store)


def test_children_and_top_level(tmp_path: Path) -> None:
    parent = meta(1, status="complete")
    write(tmp_path, parent)
    for i in (2, 3):
        write(tmp_path, meta(i, parent_run_id=parent["run_id"]))
    assert {r.run_id for r in lev_nb.runs(parent=parent["run_id"], home=tmp_path)} == {meta(2)["run_id"], meta(3)["run_id"]}
    assert [r.run_id for r in lev_nb.runs(top_level=True, home=tmp_path)] == [parent["run_id"]]
    assert lev_nb.runs(parent=parent["run_id"], home=tmp_path)[0].parent == parent["run_id"]


def test_to_pandas_and_the_views(store: Path) -> None:
    pandas = pytest.importorskip("pandas")
    table = lev_nb.runs(home=store)
    frame = table.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == STORE_SIZE + 1
    assert list(frame.columns)[:4] == ["run_id", "status", "agent", "stages"]
    assert frame.iloc[0]["stages"] == "a → b"
    assert (frame["status"] == "complete").sum() == STORE_SIZE // 2 - 1
    text = repr(table)
    assert text.splitlines()[0].split()[:3] == ["RUN", "ID", "AGENT"]
    assert f"... and {STORE_SIZE + 1 - 30} more" in text
    page = table._repr_html_()
    assert page.startswith("<table class='lev-runs'>") and page.count("<tr>") == 31
    assert repr(lev_nb.runs(agent="nobody", home=store)) == "no runs match"


def test_without_pandas_the_table_says_how_to_get_it(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    table = lev_nb.runs(limit=3, home=store)
    assert len(table) == 3  # still a list of records
    with pytest.raises(PandasMissing, match="pip install pandas"):
        table.to_pandas()


def test_a_row_follows_its_record(tmp_path: Path) -> None:
    now = datetime.now(timezone.utc).isoformat()
    data = meta(0, status="running", pid=os.getpid(), updated_at=now)  # moved just now: not abandoned
    folder = write(tmp_path, data)
    first = lev_nb.runs(home=tmp_path)[0]
    assert first.status == "running" and not first.abandoned
    assert first.duration_s is not None and first.duration_s > 0  # still going: up to now
    data.update(status="complete", cost_usd=1.25, updated_at=meta(0)["updated_at"])
    (folder / "meta.json").write_text(json.dumps(data), encoding="utf-8")  # another size: a new record
    again = lev_nb.runs(home=tmp_path)[0]
    assert (again.status, again.cost_usd, again.duration_s) == ("complete", 1.25, 30.0)


def test_run_events_to_pandas(engine: Any) -> None:
    pandas = pytest.importorskip("pandas")
    run, _ = engine.run("""
        [stages.work]
        available_tools = []
        [stages.work.transitions]
    """, [{"text": "hello"}])
    frame = run.events.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == len(run.events)
    assert list(frame.columns)[:4] == ["type", "run_id", "stage", "ts"]
    assert frame.iloc[0]["type"] == "run_started" and frame.iloc[-1]["type"] == "completed"
    assert frame[frame["type"] == "model_call"]["text"].tolist()[0] == "hello"
