"""The run record's files on disk: ``$LEV_HOME/runs/<run_id>/`` with meta.json, events.jsonl, final_output
and transcript.jsonl, and ``inbox/``: one small JSON file per message or answer that another
process (``lev msg``, ``lev respond``) leaves for the process that owns the run.

meta.json and final_output are replaced atomically (a sibling file in the same folder, written,
fsynced when it matters, then put in the file's place in one step), so a crash mid-write leaves the
previous version readable; during a run meta.json's sibling ``.meta.json.tmp`` is kept (see
:func:`replace_files`). The JSONL files are append-only,
one object per line; a torn last line (a crash mid-append) is skipped when reading.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lev_nb.settings.paths import in_home, lev_home

__all__ = [
    "RunStore",
    "lev_home",
    "runs_dir",
    "write_atomic",
    "read_jsonl",
    "encode_line",
    "encode_meta",
    "META",
    "EVENTS",
    "TRANSCRIPT",
    "FINAL_OUTPUT",
    "INBOX",
    "INBOX_ENTRY_LIMIT",
    "INBOX_DEPTH_LIMIT",
    "nesting_depth",
    "JOURNAL",
    "LAUNCH",
    "RecordBusy",
]

META = "meta.json"
EVENTS = "events.jsonl"
TRANSCRIPT = "transcript.jsonl"
FINAL_OUTPUT = "final_output"
INBOX = "inbox"
JOURNAL = "journal.jsonl"  # what a resumed run replays (lev_nb.engine.journal)
LAUNCH = "launch.json"  # how the run was started (lev_nb.engine.resume)
_CLAIM_LOCK = ".claim.lock"
# What an inbox entry may be: a message or an answer is small and flat.
INBOX_ENTRY_LIMIT = 1024 * 1024
INBOX_DEPTH_LIMIT = 64
REJECTED_SUFFIX = ".rejected"  # an unreadable inbox entry, set aside
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(rb"[\[\]{}]")


def runs_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding one subfolder per run."""
    return in_home("runs", home)


def write_atomic(path: str | os.PathLike[str], data: bytes, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new content, never a mix.

    The rename alone protects against a crashed process; ``durable`` adds an fsync, which also
    protects against a crashed machine but costs about a millisecond, so frequent progress writes
    skip it and the final write of a run keeps it. Callers serialise writes to the same path.
    """
    failure = replace_files([(path, data, durable)])[0]
    if failure is not None:
        raise failure


def replace_files(writes: list[tuple[str | os.PathLike[str], bytes, bool]],
                  keep_siblings: frozenset[str] = frozenset()) -> list[OSError | None]:
    """Replace each ``(path, data, durable)`` as :func:`write_atomic` does, through a temporary
    sibling ``.NAME.tmp`` that then takes the file's place. The disk work of the whole batch is one
    native call with the interpreter lock released; returns, for each file, None or the OSError that
    stopped it (the file then keeps what it had).

    ``keep_siblings`` names the files (meta.json of a run record, replaced on every turn) whose
    sibling and the file swap contents in one atomic step where the system can; the sibling, now
    holding the previous content, is kept for the next write until a durable write removes it.
    Renaming over the file freed one inode and allocated another on every turn of every run, and
    with hundreds of runs the file system's search for a free inode cost more processor time than
    the writes themselves.
    """
    from lev_nb._rhai import replace_batch as native_replace  # imported on first use: not on `lev --help`

    items = []
    for path, data, durable in writes:
        path = os.fspath(path)
        head, name = os.path.split(path)
        items.append((path, os.path.join(head, f".{name}.tmp"), data, durable, name in keep_siblings))
    codes = native_replace(items)
    return [OSError(code, os.strerror(code), item[0]) if code else None for item, code in zip(items, codes)]


def nesting_depth(data: bytes) -> int:
    """How deeply the arrays and objects of JSON text nest, counted without parsing it (brackets
    inside strings do not count), so that text too deep to parse is refused before it is parsed."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub(b"", data)):
        if bracket in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _read_inbox_entry(path: Path) -> tuple[dict[str, Any], None] | tuple[None, str]:
    """An inbox entry's object, or why it cannot be read (size and depth checked before parsing)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(INBOX_ENTRY_LIMIT + 1)
    except IsADirectoryError:
        return None, "it is a directory, not a file"
    except OSError as exc:
        return None, f"it cannot be read ({exc.strerror or exc})"
    if len(data) > INBOX_ENTRY_LIMIT:
        return None, f"it is larger than {INBOX_ENTRY_LIMIT // 1024} KiB"
    if nesting_depth(data) > INBOX_DEPTH_LIMIT:
        return None, f"it nests deeper than {INBOX_DEPTH_LIMIT} levels"
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None, "it is not valid JSON"
    if not isinstance(value, dict):
        return None, "it is not a JSON object"
    return value, None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON line of ``path``; a torn or corrupt line is skipped."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):  # a line nested too deep to parse is as corrupt
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


# orjson encodes a record line in a tenth of the time of json's C encoder; the record is written
# on every model call, so that was most of the engine's JSON work. What orjson refuses (a lone
# surrogate from a model's text, an integer wider than 64 bits) goes through json (json_line).
# orjson is imported on first use: `lev ps`, `lev show` and the run table read records and never
# write one, and its import (with uuid and platform) cost them 2% more instructions.
# Built once: json.dumps with options builds a new encoder on every call.
_LINE = json.JSONEncoder(ensure_ascii=False, default=str)
_META = json.JSONEncoder(ensure_ascii=False, default=str, indent=2)


_orjson: Any = None  # set by orjson_module()


def orjson_module() -> Any:
    """orjson, imported on first use and kept: an import statement in the encoders went through
    the import machinery for every event and exchange of every run."""
    global _orjson
    if _orjson is None:
        import orjson

        _orjson = orjson
    return _orjson


def json_line(record: dict[str, Any]) -> bytes:
    """``record`` as a JSON line by json's own encoder: what :func:`encode_line` falls back to."""
    return (_LINE.encode(record) + "\n").encode("utf-8", "backslashreplace")


def encode_line(record: dict[str, Any]) -> bytes:
    """``record`` as one JSON line of a .jsonl file (compact: no spaces after ``,`` and ``:``).

    A lone surrogate (from a model's text) cannot be UTF-8; written as ``\\udXXX`` it stays valid JSON.
    """
    orjson = orjson_module()
    try:
        return orjson.dumps(record, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return json_line(record)


def encode_meta(meta: dict[str, Any]) -> bytes:
    """``meta`` as the bytes of meta.json, indented for people who open it (a key a line)."""
    orjson = orjson_module()
    try:
        return orjson.dumps(meta, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError:
        return _META.encode(meta).encode("utf-8", "backslashreplace")


@contextlib.contextmanager
def _writing_into(stores: list[RunStore]) -> Iterator[None]:
    """Hold the lock of each store a batch writes into, its folder made first (each store once,
    taken in one order for every batch: never a lock cycle)."""
    unique = list({id(store): store for store in stores}.values())
    for store in unique:
        store.ensure()
    with contextlib.ExitStack() as held:
        for store in sorted(unique, key=id):
            held.enter_context(store._lock)
        yield


def append_batch(appends: list[tuple[RunStore, str, list[bytes]]]) -> list[OSError | None]:
    """Append each ``(store, name, lines)``: the lines, in one write, to the file ``name`` of the
    store's run folder (see :meth:`RunStore.append_lines` for what is checked). The disk work of
    the whole batch is one native call with the interpreter lock released; returns, for each
    append, None or the OSError that stopped it (its file then keeps only whole lines)."""
    from lev_nb._rhai import append_batch as native_append  # imported on first use: not on `lev --help`

    with _writing_into([store for store, _, _ in appends]):
        outcomes = native_append(
            [(store._path(name), b"".join(lines), store._sizes.get(name)) for store, name, lines in appends]
        )
        failures: list[OSError | None] = []
        for (store, name, _), (size, foreign, errno) in zip(appends, outcomes):
            if size >= 0:
                store._sizes[name] = size
            if foreign > 0:
                store._foreign.append(f"{name} had {foreign} bytes lev_nb did not write (removed)")
            elif foreign < 0:
                store._foreign.append(f"{name} was cut by {-foreign} bytes lev_nb did not remove")
            if errno:  # named as Python names it: the path only when the file could not be opened
                failures.append(OSError(errno, os.strerror(errno), *([store._path(name)] if size < 0 else [])))
            else:
                failures.append(None)
    return failures


# The record files replaced on every turn, whose sibling is kept between writes (replace_files);
# the others (final_output, launch.json) are written once or twice and leave no sibling behind.
_SWAPPED = frozenset({META})


def replace_batch(writes: list[tuple[RunStore, str, bytes, bool]]) -> list[OSError | None]:
    """Replace each ``(store, name, data, durable)``: the file ``name`` of the store's run folder,
    whole (see :func:`replace_files`, which does the work in one native call)."""
    with _writing_into([store for store, _, _, _ in writes]):
        return replace_files([(store._path(name), data, durable) for store, name, data, durable in writes],
                             keep_siblings=_SWAPPED)


_native_mtimes: Callable[[list[str]], list[int | None]] | None = None


def inbox_stamps(stores: list[RunStore]) -> list[int | None]:
    """:meth:`RunStore.inbox_stamp` of each store, in one native call for all of them."""
    global _native_mtimes
    if _native_mtimes is None:  # imported on first use, not on `lev --help`; kept, as this runs every turn
        from lev_nb._rhai import mtimes

        _native_mtimes = mtimes
    return _native_mtimes([store._path(INBOX) for store in stores])


class RecordUnwritable(OSError):
    """The run's record cannot be written (a read-only or full disk, a LEV_HOME that is a file):
    the run does not start. The message names the folder and the cause."""


class RecordBusy(OSError):
    """Another process is taking over the same run at this moment."""


class RunStore:
    """One run's folder, and the only code that writes into it.

    Methods are safe to call from several threads; the engine calls them from the background
    record writer (:mod:`lev_nb.store.writer`), so a slow disk never stalls a run.
    """

    def __init__(self, run_id: str, home: str | os.PathLike[str] | None = None) -> None:
        if not run_id or "/" in run_id or run_id in (".", ".."):
            raise ValueError(f"'{run_id}' is not a run id")
        self.run_id = run_id
        self.run_dir = runs_dir(home) / run_id
        self._lock = threading.Lock()
        self._made = False
        self._fresh = False  # ensure() made the folder: nothing in it was written before
        self._sizes: dict[str, int] = {}  # .jsonl file -> its size after this store's last append
        self._foreign: list[str] = []  # what was found written into them by anyone else
        self._paths: dict[str, str] = {}  # file name -> its path, joined once (see _path)
        self._rejected: set[str] = set()  # inbox entries set aside (see take_inbox)

    @property
    def dir(self) -> Path:
        """Short name for :attr:`run_dir`."""
        return self.run_dir

    def _path(self, name: str) -> str:
        """The path of ``name`` in the run folder, joined once: a Path join on every append and on
        every turn's inbox check took a tenth of the engine's time per model call."""
        path = self._paths.get(name)
        if path is None:
            path = self._paths[name] = os.path.join(self.run_dir, name)
        return path

    def ensure(self) -> Path:
        """Create the run folder (owner-only) if needed and return it."""
        if not self._made:
            try:
                os.mkdir(self.run_dir, 0o700)
                self._fresh = True
            except FileExistsError:
                pass  # a resumed run's folder (or not a folder: writing into it then says so)
            except FileNotFoundError:  # the first run of this home
                self.run_dir.parent.mkdir(parents=True, exist_ok=True)
                os.mkdir(self.run_dir, 0o700)
                self._fresh = True
            self._made = True
        return self.dir

    def create(self, meta: bytes, launch: bytes | None = None) -> None:
        """Create the run folder, its first meta.json and (``launch``) launch.json now, before the
        run starts; raise :class:`RecordUnwritable` when they cannot be written."""
        try:
            self.ensure()
            writes = [(self, META, meta, False)] + ([(self, LAUNCH, launch, False)] if launch is not None else [])
            for failure in replace_batch(writes):
                if failure is not None:
                    raise failure
            for name in (EVENTS, TRANSCRIPT):  # a new record: any line in them is foreign
                if self._fresh or not os.path.exists(self._path(name)):
                    self._sizes[name] = 0
        except OSError as exc:
            raise RecordUnwritable(
                f"cannot write the run record in '{self.dir}': {exc.strerror or exc}; make the folder "
                "writable, free some space, or point LEV_HOME elsewhere"
            ) from None

    def write_meta(self, meta: dict[str, Any] | bytes, durable: bool = True) -> None:
        """Replace meta.json atomically (``durable=False`` skips the fsync; see write_atomic)."""
        self.write_file(META, meta if isinstance(meta, bytes) else encode_meta(meta), durable)

    def write_file(self, name: str, data: bytes, durable: bool = True) -> None:
        """Replace the file ``name`` of the run folder atomically with ``data``."""
        failure = replace_batch([(self, name, data, durable)])[0]
        if failure is not None:
            raise failure

    def read_meta(self) -> dict[str, Any]:
        """The current meta.json (raises FileNotFoundError / ValueError if missing or unreadable)."""
        return json.loads((self.dir / META).read_text(encoding="utf-8"))

    def append_lines(self, name: str, lines: list[bytes]) -> None:
        """Append encoded lines to the .jsonl file ``name`` in one write, so writers never interleave.

        Only this store writes these files. Bytes found appended by anyone else since its last append
        (a command the agent ran, forging lines of its own record) are cut off before writing and
        reported by :meth:`take_foreign`. A write the disk refuses part-way (full, over a size limit)
        is undone, so the file keeps only whole lines, and the OSError is raised.
        """
        failure = append_batch([(self, name, lines)])[0]
        if failure is not None:
            raise failure

    def take_foreign(self) -> list[str]:
        """What :meth:`append_lines` found written into the record by someone else since the last call."""
        with self._lock:
            found, self._foreign = self._foreign, []
        return found

    def append_event(self, event: dict[str, Any]) -> None:
        """Append one event as a line of events.jsonl."""
        self.append_lines(EVENTS, [encode_line(event)])

    def append_transcript(self, entry: dict[str, Any]) -> None:
        """Append one transcript entry as a line of transcript.jsonl."""
        self.append_lines(TRANSCRIPT, [encode_line(entry)])

    def read_launch(self) -> dict[str, Any] | None:
        """launch.json (how the run was started), or None when missing or unreadable."""
        try:
            value = json.loads((self.dir / LAUNCH).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def read_journal(self) -> list[dict[str, Any]]:
        """Every journal entry recorded so far, in order (lev_nb.engine.journal)."""
        return read_jsonl(self.dir / JOURNAL)

    @contextlib.contextmanager
    def claim(self) -> Iterator[None]:
        """Hold the run's claim lock while deciding who owns it (one resume at a time, across
        processes); raises RecordBusy when another process holds it."""
        fd = os.open(self.dir / _CLAIM_LOCK, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RecordBusy(f"another process is resuming run '{self.run_id}' right now") from None
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def read_events(self) -> list[dict[str, Any]]:
        """Every event recorded so far, in order."""
        return read_jsonl(self.dir / EVENTS)

    def read_transcript(self) -> list[dict[str, Any]]:
        """Every transcript entry recorded so far, in order."""
        return read_jsonl(self.dir / TRANSCRIPT)

    def write_final_output(self, content: bytes | str) -> None:
        """Replace the final_output file atomically with the answer's raw bytes."""
        self.write_file(FINAL_OUTPUT, content.encode("utf-8") if isinstance(content, str) else bytes(content))

    def read_final_output(self) -> bytes | None:
        """The answer's raw bytes, or None if the run submitted none."""
        try:
            return (self.dir / FINAL_OUTPUT).read_bytes()
        except FileNotFoundError:
            return None

    # -- the inbox: messages and answers from other processes (docs/runs.md#a-person-in-the-loop) ----------
    def post_inbox(self, entry: dict[str, Any]) -> Path:
        """Leave ``entry`` in the run's ``inbox/`` for the process that owns the run.

        Each entry is its own file, written under a dot-name and renamed into place, so the owner
        never reads half of one; names sort in the order they were posted.
        """
        folder = self.dir / INBOX
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}.json"
        write_atomic(folder / name, json.dumps(entry, ensure_ascii=False).encode("utf-8"), durable=False)
        return folder / name

    def inbox_stamp(self) -> int | None:
        """The inbox folder's modification time (ns), None when nothing was ever posted: a cheap
        "has anything arrived" check before :meth:`take_inbox` lists it."""
        return inbox_stamps([self])[0]

    def take_inbox(self) -> list[dict[str, Any]]:
        """Read and remove every entry posted so far, oldest first.

        An entry that cannot be read (not a file, larger than :data:`INBOX_ENTRY_LIMIT`, nested
        deeper than :data:`INBOX_DEPTH_LIMIT`, not a JSON object) is set aside once, renamed
        ``NAME.rejected``, and comes back as ``{"type": "unreadable", "file": NAME, "reason": ...,
        "set_aside": NEW_NAME or None}``; it is not read again.
        """
        folder = self.dir / INBOX
        try:
            names = sorted(n for n in os.listdir(folder)
                           if n.endswith(".json") and not n.startswith(".") and n not in self._rejected)
        except OSError:
            return []
        entries: list[dict[str, Any]] = []
        for name in names:
            path = folder / name
            value, reason = _read_inbox_entry(path)
            if value is not None:
                try:
                    path.unlink()
                except OSError:
                    pass
                entries.append(value)
                continue
            entries.append({"type": "unreadable", "file": name, "reason": reason or "", "set_aside": self._set_aside(path)})
        return entries

    def _set_aside(self, path: Path) -> str | None:
        """Rename an unreadable inbox entry out of the way (the new name), or remember it when it
        cannot be moved (None): either way it is not read, or reported, again."""
        self._rejected.add(path.name)
        target = path.with_name(path.name + REJECTED_SUFFIX)
        try:
            os.rename(path, target)
        except OSError:
            return None
        return target.name
