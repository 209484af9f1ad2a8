"""What a run record's writes cost: meta.json replaced on every turn, and the lines encoded.

- meta.json: ``runs`` run folders, each replaced ``turns`` times (as every turn of every run does),
  by swapping contents with a kept sibling (what lev_nb does) and, side by side in the same run, by
  renaming a new file over it (the alternative, and what lev_nb did before). The figure is process
  CPU (user and kernel) per write: the kernel's part is most of it, and renaming frees an inode and
  allocates one on every write. The modes take turns, each in fresh folders.
- Lines: one transcript-sized record encoded by ``encode_line`` (orjson) and by json's C encoder.

    python bench/bench_record_writes.py
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import timeit
from pathlib import Path

import scratch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

META = json.dumps({"run_id": "bench-1", "status": "running", "usage": {"work": {"prompt_tokens": 1234}},
                   "task": "summarise the report " * 20}, indent=2).encode()
LINE = {"type": "model_call", "stage": "work", "ts": "2026-12-03T10:00:00.123Z", "usage": {"prompt_tokens": 123},
        "messages": [{"role": "user", "content": "item 3: summarise the report " * 5},
                     {"role": "assistant", "content": [{"type": "text", "text": "ok " * 50},
                                                       {"type": "tool_use", "id": "c1", "name": "read_file",
                                                        "input": {"path": "a.txt"}}]}] * 3}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def meta_writes(runs: int, turns: int, rounds: int) -> dict[str, list[float]]:
    """Microseconds of process CPU per meta.json write, per mode, one sample a round."""
    from lev_nb.store.files import replace_files

    samples: dict[str, list[float]] = {"swap with a kept sibling": [], "rename over": []}
    with scratch.folder() as tmp:
        for round_ in range(rounds):
            for label, keep in (("swap with a kept sibling", True), ("rename over", False)):
                folders = [os.path.join(tmp, f"{round_}-{keep}-{i}") for i in range(runs)]
                for folder in folders:
                    os.mkdir(folder)
                start = _cpu()
                for _ in range(turns):
                    replace_files([(os.path.join(f, "meta.json"), META, False) for f in folders],
                                  keep_siblings=frozenset({"meta.json"} if keep else ()))
                samples[label].append((_cpu() - start) / (runs * turns) * 1e6)
    return samples


def line_encoding(repeats: int = 5, number: int = 2000) -> dict[str, float]:
    """Microseconds to encode one transcript-sized line: ``encode_line`` and json's C encoder."""
    from lev_nb.store.files import encode_line, json_line

    out = {}
    ways = (("encode_line (orjson)", lambda: encode_line(LINE)), ("json's C encoder", lambda: json_line(LINE)))
    for label, fn in ways:
        out[label] = min(timeit.repeat(fn, number=number, repeat=repeats)) / number * 1e6
    return out


def main() -> None:
    """Print both measurements."""
    for label, values in meta_writes(500, 6, 3).items():
        print(f"meta.json, {label:<26} {statistics.median(values):8.1f} us of CPU per write  {values}")
    for label, value in line_encoding().items():
        print(f"a record line, {label:<22} {value:8.1f} us")


if __name__ == "__main__":
    main()
