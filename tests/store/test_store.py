"""The run record: ids, meta fields, atomic writes, JSONL appends, listing and lookup."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import sys
import textwrap

import pytest
from support import ROOT

from lev_nb.store import files as store_files
from lev_nb.store import RunMeta, RunNotFound, RunStore, find_run, list_runs, new_run_id


def new_meta(run_id: str, agent_name: str, task: str, **fields: object) -> dict:
    """A fresh meta.json dict, as the engine writes it when a run starts."""
    return RunMeta(run_id=run_id, agent_name=agent_name, task=task, **fields).to_dict()  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "levhome"))
    return tmp_path / "levhome"


def test_run_id_shape():
    run_id = new_run_id("my agent_v2.x", now=1700000000)
    assert re.fullmatch(r"my-agent-v2-x-1700000000-[0-9a-f]{12}", run_id)
    assert new_run_id("a") != new_run_id("a")


def test_run_ids_stay_unique_across_refills_threads_and_a_fork():
    import os
    from concurrent.futures import ThreadPoolExecutor

    from lev_nb.store import meta

    def draw(_: int) -> list[str]:
        return [new_run_id("a", now=1) for _ in range(600)]  # more than one refill of random bytes each

    with ThreadPoolExecutor(4) as pool:
        seen = [run_id for drawn in pool.map(draw, range(4)) for run_id in drawn]
    assert len(set(seen)) == len(seen) == 2400
    meta._random_hex()  # the parent holds random bytes it has not used yet
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child must draw bytes of its own, not the rest of its parent's
        os.write(write, new_run_id("a", now=1).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    theirs = os.read(read, 100).decode()
    os.close(read)
    assert theirs != new_run_id("a", now=1)


def test_lev_home_is_read_at_call_time(monkeypatch, tmp_path):
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "elsewhere"))
    assert RunStore("x").dir == tmp_path / "elsewhere" / "runs" / "x"


def test_lev_home_defaults_to_dot_lev(monkeypatch, tmp_path):
    monkeypatch.delenv("LEV_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert store_files.runs_dir() == tmp_path / ".lev" / "runs"


def test_new_meta_has_every_upstream_field():
    meta = new_meta("r-1", "agent", "do it", model="mock", workdir="/w", num_stages=3, current_stage="plan")
    expected = {
        "run_id", "agent_name", "agent_path", "task", "model", "pid", "status", "current_stage", "stage_index",
        "num_stages", "iteration", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens",
        "tool_calls", "workdir", "started_at", "updated_at", "last_progress_at", "error", "metadata",
        "parent_run_id", "children", "depth", "max_child_depth", "child_runs", "waiting_on", "flags",
        "final_output", "output_request", "stage_history", "cost_usd", "usage", "needs_setup", "yolo",
        "allowed_tools", "pending", "resumed", "warnings", "title",
    }
    assert set(meta) == expected
    assert (meta["cost_usd"], meta["usage"]) == (0.0, {})  # no call yet: a known zero
    assert set(meta["flags"]) == {
        "modified_files", "modified_file_count", "empty_output", "no_output_tools", "searches_run", "searches_empty",
        "max_iterations_hit", "gates_forced", "required_regions_abandoned", "workspace_lost", "produced_output",
        "output_forced", "splits_degraded",
    }
    assert (meta["pid"], meta["status"], meta["stage_history"], meta["num_stages"]) == (0, "starting", [], 3)
    assert meta["started_at"].endswith("Z")


def test_meta_round_trip_with_owner_only_permissions():
    run = RunStore("r-1")
    run.write_meta(new_meta("r-1", "agent", "task"))
    assert run.read_meta()["task"] == "task"
    assert stat.S_IMODE(os.stat(run.dir / "meta.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(run.dir).st_mode) & 0o077 == 0


def test_a_failed_meta_write_keeps_the_previous_meta(tmp_path):
    # A real failure part-way through the write: a child process whose files may not grow past
    # 4 KiB (RLIMIT_FSIZE) replaces its small meta.json with a large one.
    script = textwrap.dedent("""
        import resource, signal, sys
        from lev_nb.store import RunStore
        run = RunStore("r-1", sys.argv[1])
        run.write_meta({"run_id": "r-1", "status": "running", "iteration": 1})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        try:
            run.write_meta({"run_id": "r-1", "status": "complete", "notes": "x" * 20000})
        except OSError as exc:
            print(exc.errno)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=60, check=True)
    assert done.stdout.strip() == str(errno.EFBIG), done.stderr
    run = RunStore("r-1", tmp_path)
    assert run.read_meta() == {"run_id": "r-1", "status": "running", "iteration": 1}
    assert sorted(p.name for p in run.dir.iterdir()) == ["meta.json"]  # no temporary file left behind


def test_events_append_one_line_each_and_read_back():
    run = RunStore("r-1")
    run.append_event({"type": "Status", "status": "running"})
    run.append_event({"type": "Log", "text": "line\nbreak"})
    lines = (run.dir / "events.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert run.read_events() == [{"type": "Status", "status": "running"}, {"type": "Log", "text": "line\nbreak"}]


def test_torn_last_event_line_is_skipped():
    run = RunStore("r-1")
    run.append_event({"n": 1})
    with open(run.dir / "events.jsonl", "a") as handle:
        handle.write('{"n": 2')
    assert run.read_events() == [{"n": 1}]


def test_transcript_appends():
    run = RunStore("r-1")
    run.append_transcript({"role": "user", "content": "hi"})
    assert run.read_transcript() == [{"role": "user", "content": "hi"}]


def test_final_output_bytes_round_trip():
    run = RunStore("r-1")
    assert run.read_final_output() is None
    run.write_final_output("héllo".encode())
    run.write_final_output(b"\x00raw")
    assert run.read_final_output() == b"\x00raw"


def test_list_runs_newest_first_with_broken_entries(home):
    old, new = RunStore("a-1"), RunStore("b-2")
    old_meta = new_meta("a-1", "a", "t")
    old_meta["started_at"] = "2024-01-01T00:00:00.000Z"
    new_meta_ = new_meta("b-2", "b", "t")
    new_meta_["started_at"] = "2025-01-01T00:00:00.000Z"
    old.write_meta(old_meta)
    new.write_meta(new_meta_)
    broken = home / "runs" / "c-3"
    broken.mkdir(parents=True)
    (broken / "meta.json").write_text("{not json")
    os.utime(broken, (0, 0))
    runs = list_runs()
    assert [r["run_id"] for r in runs] == ["b-2", "a-1", "c-3"]
    assert runs[2]["status"] == "broken" and runs[2]["broken"] is True and "meta.json" in runs[2]["error"]


def test_list_runs_without_a_home_is_empty():
    assert list_runs() == []


def test_find_run_by_prefix():
    RunStore("agent-100-aaa").write_meta({"run_id": "agent-100-aaa"})
    RunStore("agent-100-abb").write_meta({"run_id": "agent-100-abb"})
    assert find_run("agent-100-aa").run_id == "agent-100-aaa"
    assert find_run("agent-100-abb").run_id == "agent-100-abb"
    with pytest.raises(RunNotFound, match="matches 2 runs"):
        find_run("agent-100-a")
    with pytest.raises(RunNotFound, match="no run id starts with 'zzz'"):
        find_run("zzz")


def test_bad_run_id_is_refused():
    with pytest.raises(ValueError):
        RunStore("../escape")


def test_meta_is_json_with_the_upstream_names_on_disk():
    run = RunStore("r-1")
    run.write_meta(new_meta("r-1", "agent", "task"))
    on_disk = json.loads((run.dir / "meta.json").read_text())
    assert on_disk["flags"]["modified_files"] == [] and on_disk["children"] == []


def test_inbox_stamps_of_many_runs_in_one_call_are_what_stat_says(home):
    posted, quiet = RunStore("posted-run", home), RunStore("quiet-run", home)
    for run in (posted, quiet):
        run.create(b"{}")
    posted.post_inbox({"type": "message", "text": "hello"})
    stamps = store_files.inbox_stamps([posted, quiet])
    assert stamps == [os.stat(posted.dir / "inbox").st_mtime_ns, None]  # None: nothing ever posted
    assert posted.inbox_stamp() == stamps[0]
    # A few paths are looked at with the interpreter lock held, many with it released: same answers.
    many = [posted, quiet] * 5
    assert store_files.inbox_stamps(many) == stamps * 5


def test_record_lines_and_meta_encode_whatever_a_run_holds() -> None:
    """Lines and meta.json read back as what was given; what the fast encoder refuses (a lone
    surrogate from a model's text, an integer wider than 64 bits) is still written, as valid JSON."""
    import json

    from lev_nb.store import encode_line, encode_meta

    plain = {"type": "model_call", "text": "héllo ✓", "n": 3, "x": 0.5, "none": None, "list": [1, {"a": True}]}
    line = encode_line(plain)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and json.loads(line) == plain
    assert json.loads(encode_line({1: os.path})) == {"1": str(os.path)}  # int keys and unknown types as text
    odd = {"text": "a\ud800b", "big": 2**70}
    line = encode_line(odd)
    assert line.count(b"\n") == 1 and json.loads(line) == {"text": "a\ud800b", "big": 2**70}
    meta = encode_meta({"status": "running", "pid": 42, "usage": {"stage": {"prompt_tokens": 1}}})
    assert b'\n  "status": "running",\n' in meta  # a key a line, which `lev ps` peeks at without parsing
    assert json.loads(meta)["usage"] == {"stage": {"prompt_tokens": 1}}
    assert json.loads(encode_meta({"note": "\udcff", "big": -(2**80)})) == {"note": "\udcff", "big": -(2**80)}


def test_meta_json_is_swapped_with_a_kept_sibling_not_renamed_over(tmp_path) -> None:
    """Each turn's meta.json swaps contents with its sibling `.meta.json.tmp` in one step: the two
    files keep their inodes (renaming over the file freed one and allocated one every turn), a
    reader sees a whole document each time, and a durable write (a run's last) removes the sibling."""
    store = RunStore("r-1", home=tmp_path)
    store.create(b'{"n": 0}')
    meta, sibling = store.dir / "meta.json", store.dir / ".meta.json.tmp"
    inodes = set()
    for n in range(1, 6):
        store.write_meta({"n": n}, durable=False)
        assert json.loads(meta.read_text()) == {"n": n}
        inodes.add(meta.stat().st_ino)
        assert json.loads(sibling.read_text()) == {"n": n - 1}  # the previous content, written over next time
    assert len(inodes) == 2  # the same two files all along
    store.write_meta({"n": 6, "status": "complete"}, durable=True)
    assert json.loads(meta.read_text())["n"] == 6 and not sibling.exists()
    store.write_meta({"n": 7}, durable=False)  # after a durable write: a fresh sibling, as at first
    assert json.loads(meta.read_text()) == {"n": 7}


def test_a_link_planted_as_the_sibling_is_not_written_through(tmp_path) -> None:
    store = RunStore("r-2", home=tmp_path)
    store.create(b'{"n": 0}')
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    (store.dir / ".meta.json.tmp").symlink_to(target)
    with pytest.raises(OSError) as refused:
        store.write_meta({"n": 1}, durable=False)
    assert refused.value.errno == errno.ELOOP
    assert target.read_text() == "keep me" and json.loads((store.dir / "meta.json").read_text()) == {"n": 0}
    store.write_meta({"n": 2}, durable=False)  # the link is gone with the failed write; the next one lands
    assert json.loads((store.dir / "meta.json").read_text()) == {"n": 2}


def test_record_files_written_once_or_twice_leave_no_sibling(tmp_path) -> None:
    """Only meta.json keeps a sibling: final_output and launch.json, rewritten now and then, are
    renamed over as before."""
    store = RunStore("r-3", home=tmp_path)
    store.create(b'{"n": 0}', b'{"task": "t"}')
    for text in (b"first", b"second"):
        store.write_file("final_output", text, durable=False)
        store.write_file("launch.json", b'{"task": "' + text + b'"}', durable=False)
    assert (store.dir / "final_output").read_bytes() == b"second"
    assert sorted(p.name for p in store.dir.iterdir() if p.name.startswith(".")) == []


def test_files_outside_a_run_record_are_still_renamed_over_without_a_leftover(tmp_path) -> None:
    from lev_nb.store import write_atomic

    path = tmp_path / "config.toml"
    for text in (b"a = 1\n", b"a = 2\n"):
        write_atomic(path, text, durable=False)
    assert path.read_bytes() == b"a = 2\n" and sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


def test_record_stamps_are_rfc3339_milliseconds_of_now() -> None:
    import re
    import time
    from datetime import datetime, timezone

    from lev_nb.store.meta import parse_stamp, utc_now

    before = datetime.now(timezone.utc).replace(microsecond=0)
    stamps = []
    for _ in range(3):  # across a second's change the date part is formatted again
        stamps.append(utc_now())
        time.sleep(0.6)
    after = datetime.now(timezone.utc)
    for stamp in stamps:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
        when = parse_stamp(stamp)
        assert when is not None and before <= when <= after
    assert stamps == sorted(stamps) and len({s[:19] for s in stamps}) >= 2
