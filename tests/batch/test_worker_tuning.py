"""How a batch worker spends its CPU (issue 15, "every core"): shares of one size in whole rounds,
each local worker kept on a CPU of its own, no jsonschema warm-up beside the runs, and one fsync
per share instead of one per run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support import ROOT

from lev_nb import _rhai, schemas
from lev_nb.batch import many
from lev_nb.batch.many import share_size
from lev_nb.store import RunStore
from lev_nb.store import writer as writer_module


@pytest.mark.parametrize(("tasks", "per_worker", "workers", "size", "shares"), [
    (1200, 64, 2, 60, 20),  # 19 full shares would leave one worker the last one alone
    (600, 64, 2, 60, 10),
    (10, 64, 2, 5, 2),
    (130, 64, 1, 44, 3),
    (1, 64, 4, 1, 1),
    (0, 64, 2, 1, 0),
])
def test_shares_are_of_one_size_and_fill_whole_rounds(tasks: int, per_worker: int, workers: int, size: int,
                                                      shares: int) -> None:
    assert share_size(tasks, per_worker, workers) == size
    assert len(many._shares([str(i) for i in range(tasks)], size)) == shares
    assert size <= per_worker


def test_workers_are_pinned_one_to_a_cpu_when_there_is_a_cpu_for_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5, 7})
    assert many._cpus_to_pin(2, None) == [3, 5]
    assert many._cpus_to_pin(3, None) == [3, 5, 7]
    assert many._cpus_to_pin(4, None) == []  # more workers than CPUs: let the system place them
    assert many._cpus_to_pin(4, True) == [3, 5, 7, 3]  # asked for: wrap around
    assert many._cpus_to_pin(2, False) == []


def test_a_local_worker_keeps_to_the_cpu_it_is_given() -> None:
    cpu = sorted(os.sched_getaffinity(0))[-1]
    code = ("import os, queue\nfrom lev_nb.batch.worker import init_local\n"
            f"cpus = queue.Queue(); cpus.put({cpu})\ninit_local(None, cpus)\n"
            "print(sorted(os.sched_getaffinity(0)))\n"
            "init_local(None, cpus)  # no CPU left for a second worker: it runs anywhere, no error\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout) == [cpu]


def test_a_batch_worker_does_not_warm_jsonschema_up(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    monkeypatch.setattr(threading.Thread, "start", lambda self: started.append(self.name))
    monkeypatch.setattr(schemas, "_warmed", False)
    schemas.set_warm_up(False)
    schemas.warm_up()
    assert started == []
    schemas.set_warm_up(True)
    schemas.warm_up()
    assert started == ["lev-warm-up"]


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int | str]:
    """The fsyncs from now on (each still happens): a file descriptor fsynced from Python, or the
    path of a file the native replace writes durably."""
    synced: list[int | str] = []
    real_fsync, real_replace = os.fsync, _rhai.replace_batch
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))

    def replace_batch(files: list[tuple[str, str, bytes, bool, bool]]) -> list[int]:
        synced.extend(path for path, _, _, durable, _ in files if durable)
        return real_replace(files)

    monkeypatch.setattr(_rhai, "replace_batch", replace_batch)
    return synced


def final_meta_written(home: Path, run_id: str, defer: bool) -> tuple[writer_module.RecordWriter, RunStore]:
    """A fresh record writer that has written ``run_id``'s final (durable) meta.json."""
    store = RunStore(run_id, home)
    store.create(b"{}")
    writer = writer_module.RecordWriter()
    if defer:
        writer.defer_durability()
    writer.write_meta(store, b'{"status": "complete"}', durable=True)
    writer.flush().result(timeout=10)
    return writer, store


def test_a_deferred_final_meta_is_fsynced_by_sync_not_by_its_write(home: Path, fsyncs: list[int | str]) -> None:
    writer, store = final_meta_written(home, "deferred-run", defer=True)
    assert fsyncs == []  # written (and readable) without its fsync
    assert json.loads((store.dir / "meta.json").read_text()) == {"status": "complete"}
    writer.sync()
    assert len(fsyncs) == 1
    writer.sync()
    assert len(fsyncs) == 1  # each deferred meta.json once


def test_a_final_meta_is_fsynced_as_it_is_written_by_default(home: Path, fsyncs: list[int | str]) -> None:
    final_meta_written(home, "durable-run", defer=False)
    assert len(fsyncs) == 1


def test_a_local_worker_process_collects_young_objects_less_often() -> None:
    """A local pool's processes are lev_nb's own, like the lev command's: their collector is tuned
    as the command's is (lev_nb.own_process); the process that calls run_many keeps its own."""
    code = ("import gc\nfrom lev_nb.batch.worker import init_local\nfrom lev_nb.own_process import COLLECTOR_THRESHOLDS\n"
            "before = gc.get_threshold()\ninit_local(None)\nprint(before == (700, 10, 10), gc.get_threshold() == COLLECTOR_THRESHOLDS)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
