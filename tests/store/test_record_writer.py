"""The record writer's ordering promises: queued lines reach a file in order, a line written
through lands after everything queued before it (even while the writer thread is mid-batch), and
a file with its own failure handler does not stop the run's other lines. The journal uses these
to keep what must never happen twice on disk before the engine goes on (docs/runs.md#pausing-and-resuming)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from lev_nb.engine.journal import Journal
from lev_nb.messages import ModelRequest, ModelResponse, ToolCall
from lev_nb.store import EVENTS, JOURNAL, RunStore
from lev_nb.store import files
from lev_nb.store import writer as writer_module
from lev_nb.store.writer import RecordWriter


def lines(store: RunStore, name: str) -> list[bytes]:
    path = store.dir / name
    return path.read_bytes().splitlines() if path.exists() else []


@pytest.fixture
def store(home: Path) -> RunStore:
    made = RunStore("writer-run", home)
    made.create(b"{}")
    return made


def test_a_line_written_through_lands_after_the_lines_queued_before_it(store: RunStore) -> None:
    writer = RecordWriter()
    writer.append(store, JOURNAL, b"one\n")
    writer.append(store, JOURNAL, b"two\n")
    writer.write_through(store, JOURNAL, b"three\n")
    assert lines(store, JOURNAL) == [b"one", b"two", b"three"]  # on disk without a flush
    writer.append(store, JOURNAL, b"four\n")
    writer.flush().result(timeout=10)
    assert lines(store, JOURNAL) == [b"one", b"two", b"three", b"four"]


def test_a_line_written_through_waits_for_the_batch_the_writer_thread_is_writing(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = RecordWriter()
    in_batch, release = threading.Event(), threading.Event()

    def slow_batch(appends: list[tuple[RunStore, str, list[bytes]]]) -> list[OSError | None]:
        in_batch.set()
        assert release.wait(10)
        return files.append_batch(appends)

    monkeypatch.setattr(writer_module, "append_batch", slow_batch)  # the thread's batches only
    writer.append(store, JOURNAL, b"queued\n")
    writer.flush()  # the thread takes the queued line now and holds it in slow_batch
    assert in_batch.wait(10)
    through = threading.Thread(target=writer.write_through, args=(store, JOURNAL, b"through\n"))
    through.start()
    through.join(0.2)
    assert through.is_alive()  # it waits for the earlier line instead of overtaking it
    release.set()
    through.join(10)
    assert lines(store, JOURNAL) == [b"queued", b"through"]


def test_a_file_with_its_own_failure_handler_does_not_stop_the_runs_other_lines(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = RecordWriter()
    heard: list[str] = []
    writer.on_failure(store, JOURNAL, heard.append)

    def full_for_the_journal(appends: list[tuple[RunStore, str, list[bytes]]]) -> list[OSError | None]:
        others = [a for a in appends if a[1] != JOURNAL]
        written = iter(files.append_batch(others))
        return [OSError(28, "No space left on device") if name == JOURNAL else next(written) for _, name, _ in appends]

    monkeypatch.setattr(writer_module, "append_batch", full_for_the_journal)
    writer.append(store, JOURNAL, b"lost\n")
    writer.append(store, EVENTS, b'{"type": "kept"}\n')
    writer.flush().result(timeout=10)
    assert heard == [f"No space left on device (writing {JOURNAL})"]
    assert writer.line_failure(store.run_id) is None  # the run is not ended for it
    writer.append(store, EVENTS, b'{"type": "later"}\n')
    writer.flush().result(timeout=10)
    assert [json.loads(line)["type"] for line in lines(store, EVENTS)] == ["kept", "later"]


def test_one_batch_appends_to_many_files_and_reports_each_outcome(home: Path) -> None:
    stores = [RunStore(f"batch-{i}", home) for i in range(3)]
    for store in stores:
        store.create(b"{}")
        store.append_lines(EVENTS, [b"first\n"])
    with open(stores[1].dir / EVENTS, "ab") as forged:  # someone else appends to one of them
        forged.write(b"forged\n")
    (stores[2].dir / JOURNAL).mkdir()  # and one cannot be written at all
    outcomes = files.append_batch([(stores[0], EVENTS, [b"a\n", b"b\n"]), (stores[1], EVENTS, [b"c\n"]),
                                   (stores[2], JOURNAL, [b"d\n"])])
    assert outcomes[:2] == [None, None]
    assert isinstance(outcomes[2], IsADirectoryError) and outcomes[2].filename == str(stores[2].dir / JOURNAL)
    assert lines(stores[0], EVENTS) == [b"first", b"a", b"b"]
    assert lines(stores[1], EVENTS) == [b"first", b"c"]  # the forged line cut off, and reported
    assert stores[1].take_foreign() == [f"{EVENTS} had 7 bytes lev_nb did not write (removed)"]


def test_the_journal_is_on_disk_before_a_call_that_may_change_something_runs(store: RunStore) -> None:
    writer = RecordWriter()
    journal = Journal(store, writer=writer)
    request = ModelRequest(provider="mock", model="mock", purpose="stage", stage="work")
    journal.record_model(request, ModelResponse(text="", tool_calls=[ToolCall("c1", "shell", {"command": "make"})]))
    journal.record_call(ToolCall("c1", "shell", {"command": "make"}))
    # No flush: the model's answer and the call's start are both there, in order.
    assert [json.loads(line)["t"] for line in lines(store, JOURNAL)] == ["model", "call"]
    journal.record_tool("c1", "shell", "built", False, None, changed=True)
    assert [json.loads(line)["t"] for line in lines(store, JOURNAL)] == ["model", "call", "tool"]


@pytest.mark.parametrize("durable", [False, True])
def test_a_batchs_meta_goes_before_its_lines_and_a_last_word_after_them(
    store: RunStore, monkeypatch: pytest.MonkeyPatch, durable: bool
) -> None:
    # A meta.json never lags the events on disk (a killed run's says where it was), but the run's
    # last word (durable) lands after its lines, so whoever sees the run ended finds them all.
    writer = RecordWriter()
    seen: list[bytes] = []

    def appending(appends: list[tuple[RunStore, str, list[bytes]]]) -> list[OSError | None]:
        seen.append((store.dir / "meta.json").read_bytes())
        return files.append_batch(appends)

    monkeypatch.setattr(writer_module, "append_batch", appending)
    with writer._cond:  # queued together: one batch
        writer.append(store, EVENTS, b'{"type": "tool_started"}\n')
        writer.write_meta(store, b'{"status": "running"}', durable=durable)
    writer.flush().result(timeout=10)
    assert seen == [b"{}" if durable else b'{"status": "running"}']
    assert (store.dir / "meta.json").read_bytes() == b'{"status": "running"}'
