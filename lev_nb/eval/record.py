"""The record of an evaluation (issue 22): ``$LEV_HOME/evals/<id>/`` holding ``eval.json`` (what
makes it repeatable: the blueprint's hash and path, the model, the dataset's hash, the checks, the
repeats; and its summary) and ``cases.jsonl`` (one result per line).

The folder is written whole under a hidden temporary name and renamed into place, so a reader (or
``lev evals``) sees a complete evaluation or none. :func:`load_evaluation` reads one back by id or
unique prefix; :func:`list_evaluations` lists them, newest first.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from lev_nb.errors import CleanError
from lev_nb.eval.evaluation import CaseResult, Evaluation
from lev_nb.settings.paths import lev_home
from lev_nb.store.files import write_atomic

__all__ = ["EvaluationNotFound", "evals_dir", "list_evaluations", "load_evaluation", "save_evaluation"]

SPEC_FILE = "eval.json"
CASES_FILE = "cases.jsonl"


class EvaluationNotFound(CleanError, LookupError):
    """No recorded evaluation has that id (or the prefix names several)."""


def evals_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding one subfolder per evaluation."""
    return lev_home(home) / "evals"


def save_evaluation(evaluation: Evaluation, home: str | os.PathLike[str] | None = None) -> Path:
    """Write ``evaluation``'s record (atomically, as a whole folder) and return its folder."""
    root = evals_dir(home)
    root.mkdir(parents=True, exist_ok=True)
    final = root / evaluation.id
    staging = root / f".{evaluation.id}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        lines = b"".join(json.dumps(r.to_dict(), ensure_ascii=False, default=str).encode() + b"\n"
                         for r in evaluation.results)
        write_atomic(staging / CASES_FILE, lines)
        write_atomic(staging / SPEC_FILE, json.dumps(evaluation.spec(), indent=1, ensure_ascii=False).encode())
        if final.exists():  # saved again (a new label): the old folder goes once the new one is whole
            old = root / f".{evaluation.id}.old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
            os.replace(staging, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def _folder(eval_id: str, home: str | os.PathLike[str] | None) -> Path:
    root = evals_dir(home)
    exact = root / eval_id
    if eval_id and (exact / SPEC_FILE).is_file():
        return exact
    found = [p for p in root.glob(f"{eval_id}*") if not p.name.startswith(".") and (p / SPEC_FILE).is_file()] \
        if eval_id and root.is_dir() else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise EvaluationNotFound(f"no evaluation '{eval_id}' under {root} (`lev evals` lists them)")
    raise EvaluationNotFound(f"'{eval_id}' names {len(found)} evaluations: {', '.join(p.name for p in found[:5])}; "
                             f"give more of the id")


def load_evaluation(eval_id: str, home: str | os.PathLike[str] | None = None) -> Evaluation:
    """The recorded evaluation ``eval_id`` (or a unique prefix of it)."""
    folder = _folder(eval_id, home)
    spec = json.loads((folder / SPEC_FILE).read_text(encoding="utf-8"))
    results = [CaseResult.from_dict(json.loads(line))
               for line in (folder / CASES_FILE).read_text(encoding="utf-8").splitlines() if line.strip()]
    fields = {k: spec.get(k) for k in ("id", "agent", "blueprint_path", "blueprint_hash", "model", "dataset",
                                         "dataset_hash", "checks", "created_at", "label")}
    return Evaluation(**fields, results=results, repeats=spec.get("repeats", 1),
                      duration_s=spec.get("duration_s", 0.0), warnings=spec.get("warnings", []))


def list_evaluations(home: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Every recorded evaluation's eval.json (summary included), newest first; unreadable ones skipped."""
    root = evals_dir(home)
    out = []
    for folder in root.iterdir() if root.is_dir() else []:
        if folder.name.startswith("."):
            continue
        try:
            out.append(json.loads((folder / SPEC_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda s: s.get("created_at") or "", reverse=True)
