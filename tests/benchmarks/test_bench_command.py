"""``python -m bench``: one table and one JSON file with the machine's description (issue 15).

The smoke test runs two fast groups in process and checks the table and the JSON's shape; the
whole ``--quick`` pass (about two minutes) runs when LEV_BENCH=1 is set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

ROW_KEYS = {"group", "figure", "unit", "value", "spread", "baseline", "baseline_label", "target", "target_label",
            "met", "wall_ms"}


def check_results(folder: Path) -> dict:
    (path,) = folder.glob("*.json")
    data = json.loads(path.read_text())
    assert path.name.startswith(data["when"][:10]) and path.name.endswith(f"-{data['machine']['host']}.json")
    assert {"cpus", "cpu_model", "memory_bytes", "python", "platform"} <= set(data["machine"])
    assert data["rows"] and all(set(row) == ROW_KEYS for row in data["rows"])
    return data


def test_the_bench_command_prints_one_table_and_writes_the_json(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from bench.__main__ import main

    assert main(["--quick", "--only", "rhai,outputs,records", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "figure" in out and "baseline" in out and "target" in out
    assert "Rhai parse_json validator (1 KB)" in out and "json + JSON Schema" in out
    assert "meta.json write (200 runs x 6 turns)" in out and "renamed over (before)" in out
    data = check_results(tmp_path)
    assert data["mode"] == "quick"
    assert all(row["baseline"] is not None for row in data["rows"])  # each figure next to its baseline


def test_only_keeps_the_raw_data_of_the_sections_it_did_not_measure(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from bench.__main__ import _merged_raw

    path = tmp_path / "today.json"
    path.write_text(json.dumps({"rows": [], "raw": {"script": [{"agents": 100}], "seconds": {"script": 9.5}}}))
    merged = _merged_raw(path, {"seconds": {"cold": 40.0}})
    assert merged == {"script": [{"agents": 100}], "seconds": {"script": 9.5, "cold": 40.0}}
    assert _merged_raw(path, {"script": [], "seconds": {"script": 1.0}}) == {"script": [], "seconds": {"script": 1.0}}


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("LEV_BENCH") != "1", reason="the whole quick pass takes minutes: LEV_BENCH=1")
def test_the_quick_pass_runs_every_benchmark(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    data = check_results(tmp_path)
    figures = {row["figure"] for row in data["rows"]}
    assert {"engine CPU per model call", "drain", "lev --help", "2 processes: speed-up"} <= figures
    assert "targets met" in proc.stdout
