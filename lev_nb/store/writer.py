"""The run-record writer: one background thread does every disk write of every run.

The engine loop hands it bytes and moves on, so a slow disk never stalls the runs; the writes
themselves are :mod:`lev_nb.store.files`' functions, the one implementation. Writes queued for the
same run are batched (one open per file per batch; a whole batch's lines are appended, and its
files replaced, in one native call each, which takes the interpreter lock once, not once a system
call) and only the newest meta.json of a run is written. meta.json is still replaced atomically,
so whatever is on disk parses. A run's end waits for :meth:`RecordWriter.flush`, so
``run.wait()`` returns with the record complete.
Lines that cannot be written (a full disk) or a record someone else wrote into are reported to the
run (:meth:`RecordWriter.watch`), which then ends in error; its files keep only whole lines. A
file with a handler of its own (:meth:`RecordWriter.on_failure`: the resume journal) reports to it
instead.

A line that must be on disk before the engine goes on (the journal entry of a call that may change
something) is written by :meth:`RecordWriter.write_through`, after the lines queued before it for
the same file: a file's lines always reach the disk in the order they were given.

The thread is woken only when it sleeps with nothing to do, and it then gathers writes for
``GATHER_S`` before writing them (a flush cuts that short): waking it for every event made the
engine thread and the writer hand the interpreter lock back and forth on every line, which cost
more CPU than the writes themselves (issue 15, "cheaper turns").
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import threading
from collections.abc import Callable

from lev_nb.store.files import META, RunStore, append_batch, replace_batch

__all__ = ["RecordWriter", "record_writer"]

# How long the writer gathers writes after it wakes, unless someone waits for them (a flush).
GATHER_S = 0.05


class RecordWriter:
    """A queue of pending writes per run, drained by a daemon thread."""

    def __init__(self) -> None:
        # Taken as itself (C code), not through a Condition's Python-level __enter__/__exit__: the
        # engine queues several lines on every model call of every run.
        self._lock = lock = threading.RLock()
        self._cond = threading.Condition(lock)
        # Woken when the thread has written a batch's lines (write_through waits on it, never on
        # _cond: a flush's notify() must reach the thread, not a waiting caller).
        self._written = threading.Condition(lock)
        self._writing: set[tuple[str, str]] = set()  # (run id, file) whose lines are being written now
        self._handlers: dict[str, dict[str, Callable[[str], None]]] = {}  # run id -> file -> handler (on_failure)
        self._meta: dict[str, tuple[RunStore, bytes, bool]] = {}
        self._lines: dict[tuple[str, str], tuple[RunStore, list[bytes]]] = {}
        self._files: dict[tuple[str, str], tuple[RunStore, bytes]] = {}
        self._waiters: list[concurrent.futures.Future[None]] = []
        self._meta_failures: dict[str, str] = {}  # run id -> why its newest meta.json is not on disk
        # run id -> why its event or transcript lines stopped reaching the disk (the first reason)
        self._line_failures: dict[str, str] = {}
        self._watchers: dict[str, Callable[[str], None]] = {}
        self._stopped: set[str] = set()  # runs whose lines are no longer written (a write failed)
        self._idle = False  # the thread sleeps with nothing queued: the next write wakes it
        self._deferring = False  # durable meta.json writes skip their fsync until sync() (a batch worker)
        self._unsynced: set[str] = set()  # meta.json paths written while deferring, not yet synced
        self._thread = threading.Thread(target=self._main, name="lev-record-writer", daemon=True)
        self._thread.start()

    def write_meta(self, store: RunStore, data: bytes, durable: bool = False) -> None:
        """Queue meta.json; a newer one replaces a queued older one."""
        with self._lock:
            previous = self._meta.get(store.run_id)
            durable = durable or (previous is not None and previous[2])
            self._meta[store.run_id] = (store, data, durable)
            self._wake()

    def write_file(self, store: RunStore, name: str, data: bytes) -> None:
        """Queue a whole-file replacement (e.g. the final_output sidecar), written before meta."""
        with self._lock:
            self._files[(store.run_id, name)] = (store, data)
            self._wake()

    def append(self, store: RunStore, name: str, line: bytes) -> None:
        """Queue one line for ``name`` (events.jsonl or transcript.jsonl)."""
        with self._lock:
            entry = self._lines.get((store.run_id, name))
            if entry is None:
                self._lines[(store.run_id, name)] = (store, [line])
            else:
                entry[1].append(line)
            self._wake()

    def write_through(self, store: RunStore, name: str, line: bytes) -> None:
        """Append ``line`` to ``name`` now, after the lines queued for it before (raises OSError
        when the disk refuses them; a write someone else made into the file is reported as for
        queued lines). For the few lines that must be on disk before the engine goes on."""
        key = (store.run_id, name)
        with self._lock:
            while key in self._writing:  # the thread is writing earlier lines of this file
                self._written.wait()
            entry = self._lines.pop(key, None)
            self._writing.add(key)
        try:
            store.append_lines(name, [*entry[1], line] if entry is not None else [line])
        finally:
            with self._lock:
                self._writing.discard(key)
                self._written.notify_all()
            for found in store.take_foreign():
                self._lines_failed(store.run_id, f"{found}: something other than lev_nb wrote into the run record")

    def on_failure(self, store: RunStore, name: str, handler: Callable[[str], None]) -> None:
        """Report a failed write of ``name``'s queued lines to ``handler(reason)`` (on the writer's
        thread), instead of stopping the run's lines and ending it in error: for a file the run
        can go on without."""
        with self._lock:
            self._handlers.setdefault(store.run_id, {})[name] = handler

    def _wake(self) -> None:
        """Wake the thread if it sleeps with nothing to do (call holding the condition)."""
        if self._idle:
            self._idle = False
            self._cond.notify()

    def flush(self) -> concurrent.futures.Future[None]:
        """A future that resolves once everything queued so far is on disk."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._lock:
            # Resolved by the writer after the batch it takes next, which comes after any batch
            # it is writing now, so everything queued before this call is on disk by then.
            self._waiters.append(future)
            self._cond.notify()
        return future

    def defer_durability(self) -> None:
        """From now on write a run's final meta.json without its fsync, and fsync it in :meth:`sync`.

        A batch worker calls this and syncs once per share: each fsync commits the filesystem's
        journal, which with dozens of runs ending per second cost more system time than the runs'
        own work, and made a batch's speed depend on the disk's other writers."""
        with self._lock:
            self._deferring = True

    def sync(self) -> None:
        """Wait for everything queued so far, then fsync every meta.json whose fsync was deferred."""
        self.flush().result()
        with self._lock:
            paths, self._unsynced = self._unsynced, set()
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue  # the run's folder is gone: nothing left to make durable
            try:
                os.fsync(fd)
            except OSError:
                pass  # the record is written and readable; only a machine crash could still lose it
            finally:
                os.close(fd)

    def _main(self) -> None:
        while True:
            with self._lock:
                while not (self._meta or self._lines or self._files or self._waiters):
                    self._idle = True
                    self._cond.wait()
                self._idle = False
                if not self._waiters:  # gather more writes for a moment (flush() wakes it early)
                    self._cond.wait(GATHER_S)
                files, self._files = self._files, {}
                metas, self._meta = self._meta, {}
                lines, self._lines = self._lines, {}
                waiters, self._waiters = self._waiters, []
                self._writing.update(lines)
            # A batch's meta.json goes before its lines, so one never lags the events on disk (a
            # process killed now leaves a meta.json that says where the run was), except a run's
            # last word (durable), which goes after them: whoever sees the run ended finds every
            # line it wrote (lev log --follow stops there). Sidecars go before any meta.json.
            deferring = self._deferring
            self._replace_metas(files, [m for m in metas.values() if not m[2]], deferring)
            try:
                self._write_lines(lines)
            finally:  # whatever happened, write_through must not wait for these any longer
                if lines:
                    with self._lock:
                        self._writing.difference_update(lines)
                        self._written.notify_all()
            self._replace_metas({}, [m for m in metas.values() if m[2]], deferring)
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def _replace_metas(self, files: dict[tuple[str, str], tuple[RunStore, bytes]],
                       metas: list[tuple[RunStore, bytes, bool]], deferring: bool) -> None:
        """Replace the sidecar ``files``, then each of ``metas``, noting which meta.json failed and
        which durable one still owes its fsync (``deferring``: see defer_durability)."""
        if not files and not metas:
            return
        replaces = [(store, name, data, False) for (_, name), (store, data) in files.items()]
        replaces += [(store, META, data, durable and not deferring) for store, data, durable in metas]
        outcomes = self._replace(replaces)[len(files):]
        for (store, _, durable), failure in zip(metas, outcomes):
            with self._lock:
                if failure is None:
                    self._meta_failures.pop(store.run_id, None)
                    if durable and deferring:
                        self._unsynced.add(str(store.dir / META))
                else:
                    self._meta_failures[store.run_id] = failure

    def _write_lines(self, lines: dict[tuple[str, str], tuple[RunStore, list[bytes]]]) -> None:
        """Append a batch's lines and report what failed (a stopped run's files keep what was
        written before the failure, whole)."""
        todo = [(store, name, chunk) for (run_id, name), (store, chunk) in lines.items() if run_id not in self._stopped]
        for (store, name, _), failure in zip(todo, self._append(todo)):
            run_id = store.run_id
            if failure is not None:
                handler = self._handlers.get(run_id, {}).get(name)
                if handler is not None:
                    _call(handler, f"{failure} (writing {name})")
                else:
                    self._stopped.add(run_id)
                    self._lines_failed(run_id, f"{failure} (writing {name})")
            for found in store.take_foreign():
                self._lines_failed(run_id, f"{found}: something other than lev_nb wrote into the run record")

    def _lines_failed(self, run_id: str, reason: str) -> None:
        with self._lock:
            if run_id in self._line_failures:
                return
            self._line_failures[run_id] = reason
            watcher = self._watchers.get(run_id)
        if watcher is not None:
            _call(watcher, reason)

    def watch(self, run_id: str, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` (on the writer's thread) when ``run_id``'s lines first fail to
        reach the disk, or its record is found written by someone else."""
        with self._lock:
            self._watchers[run_id] = callback

    def line_failure(self, run_id: str) -> str | None:
        """Why ``run_id``'s event or transcript lines stopped reaching the disk, or None."""
        with self._lock:
            return self._line_failures.get(run_id)

    def meta_failure(self, run_id: str) -> str | None:
        """Why the newest meta.json queued for ``run_id`` could not be written, or None (call
        after :meth:`flush`)."""
        with self._lock:
            return self._meta_failures.get(run_id)

    def forget(self, run_id: str) -> None:
        """Drop what is remembered about ``run_id`` (its run is over)."""
        with self._lock:
            self._meta_failures.pop(run_id, None)
            self._line_failures.pop(run_id, None)
            self._watchers.pop(run_id, None)
            self._stopped.discard(run_id)
            self._handlers.pop(run_id, None)

    @staticmethod
    def _append(todo: list[tuple[RunStore, str, list[bytes]]]) -> list[str | None]:
        """Write a batch's lines (one native call for all of them); why each append failed, or None."""
        try:
            failures = append_batch(todo)
        except Exception as exc:  # never the end of the writer: every run of the batch hears of it
            return [f"the record writer failed: {type(exc).__name__}: {exc}"] * len(todo)
        return [None if failure is None else str(failure.strerror or failure) for failure in failures]

    @staticmethod
    def _replace(todo: list[tuple[RunStore, str, bytes, bool]]) -> list[str | None]:
        """Replace a batch's files (one native call for all of them); why each failed, or None."""
        try:
            failures = replace_batch(todo)
        except Exception as exc:  # a full or vanished disk must not kill the writer; the runs go on in memory
            return [f"the record writer failed: {type(exc).__name__}: {exc}"] * len(todo)
        return [None if failure is None else str(failure.strerror or failure) for failure in failures]


def _call(callback: Callable[[str], None], reason: str) -> None:
    """Tell ``callback``; one that raises must not end the thread every run writes through."""
    try:
        callback(reason)
    except Exception:  # a bug in the callback: said in the log, and the writer goes on
        logging.getLogger(__name__).exception("a record-failure callback failed")


_lock = threading.Lock()
_writer: RecordWriter | None = None


def record_writer() -> RecordWriter:
    """The process-wide record writer, started on first use."""
    global _writer
    with _lock:
        if _writer is None:
            _writer = RecordWriter()
            atexit.register(_drain_at_exit, _writer)
        return _writer


def _drain_at_exit(writer: RecordWriter) -> None:
    """Give queued writes a moment to land when the interpreter exits (the thread is a daemon)."""
    try:
        writer.flush().result(timeout=5)
    except Exception:
        pass
