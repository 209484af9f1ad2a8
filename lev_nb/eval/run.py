"""``lev_nb.evaluate``: an agent over a dataset, every case a run of ``run_many``, every answer
judged by the checks, the whole recorded under ``$LEV_HOME/evals/<id>/`` (issue 22).

The runs go where ``run_many`` sends them (local processes or a Dask cluster), so a worker that
dies mid-evaluation has its unfinished cases run again, and a case that still cannot run is a
failed case with the reason: nothing is lost. The checks run here, in the caller's process, once
each run has ended; the judge checks' model calls go out together (at most ``judge_concurrency``
at once) after the runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from lev_nb.eval.checks import Answer, Check, Verdict, as_check
from lev_nb.eval.datasets import Case, fit_cases, read_rows, rows_hash
from lev_nb.eval.evaluation import CaseResult, Evaluation
from lev_nb.eval.judge import Judge, run_coroutine
from lev_nb.store import parse_stamp

__all__ = ["evaluate", "blueprint_hash"]

JUDGE_CONCURRENCY = 8


def evaluate(
    agent: Any,
    dataset: Any,
    *,
    checks: Iterable[Any] | Any = (),
    model: Any = None,
    repeats: int = 1,
    processes: int | None = None,
    client: Any = None,
    label: str | None = None,
    home: str | os.PathLike[str] | None = None,
    record: bool = True,
    judge_concurrency: int = JUDGE_CONCURRENCY,
    on_progress: Callable[[Any], None] | None = None,
    show: bool | None = None,
    **options: Any,
) -> Evaluation:
    """Run ``agent`` once per case of ``dataset`` (``repeats`` times each) and judge every answer.

    ``agent`` is a Blueprint, a path or a bundled agent's name; ``dataset`` a list of dicts, a
    pandas DataFrame or a CSV / JSONL file (columns: ``task``, the blueprint's inputs, ``expected``,
    anything else for checks; see :mod:`lev_nb.eval.datasets`). ``checks`` are checks of
    :mod:`lev_nb.eval.checks` (``equals()``, ``contains()``, ``regex(...)``, ``json_schema(...)``,
    ``json_field(...)``, ``scorer(...)``), ``Judge(rubric, model=...)``, Python callables
    ``f(answer, case)`` or ``--check`` strings; none: a case passes when its run completes.
    ``model``, ``processes``, ``client`` and the other keyword options go to ``run_many``.
    ``label`` names the evaluation in views and comparisons. The evaluation is recorded under
    ``$LEV_HOME/evals/<id>/`` unless ``record=False``; ``lev_nb.load_evaluation(id)`` reads it back.
    """
    from lev_nb.batch import run_many
    from lev_nb.blueprint import load
    from lev_nb.engine.prepare import cached_plan
    from lev_nb.errors import UsageError

    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise UsageError(f"repeats must be a whole number of 1 or more, got {repeats!r}")
    blueprint = _load_agent(agent, load)
    plan = cached_plan(blueprint)
    declared = [(s.key or s.region, s.required) for s in plan.caller_inputs]
    inputs = [(name, required) for name, required in declared if name != "task"]
    takes_task = not declared or any(name == "task" for name, _ in declared)
    task_required = any(name == "task" and required for name, required in declared)
    rows, source = read_rows(dataset)
    cases = fit_cases(rows, source, inputs, takes_task, task_required)
    check_list = [as_check(c) for c in (checks if _is_many(checks) else [checks])]
    _check_first_launch(plan, cases[0], model, options)
    for check in check_list:
        problem = check.missing_key() if isinstance(check, Judge) else None
        if problem:  # refused once, rather than every case failing for the same reason
            raise UsageError(problem, "set the key, or give the judge another model (Judge(rubric, model=...))")

    started = time.monotonic()
    eval_id = new_eval_id(blueprint.name)
    view = _progress_view(show, label or blueprint.name, len(cases) * repeats)
    runs = [case for case in cases for _ in range(repeats)]
    summaries = run_many(blueprint, [c.launch() for c in runs], model, processes=processes, client=client,
                         home=home, show=False, on_progress=_both(view, on_progress), **options)
    results = _results(runs, repeats, summaries, home)
    _judge_all(results, runs, check_list, judge_concurrency)
    evaluation = Evaluation(
        id=eval_id, agent=blueprint.name, blueprint_path=str(blueprint.source_path) if blueprint.source_path else None,
        blueprint_hash=blueprint_hash(blueprint), model=_model_name(model), dataset=source,
        dataset_hash=rows_hash(rows), checks=[c.spec() for c in check_list], results=results, repeats=repeats,
        created_at=datetime.now().astimezone().isoformat(timespec="seconds"),
        duration_s=time.monotonic() - started, label=label,
    )
    if record:
        from lev_nb.eval.record import save_evaluation

        save_evaluation(evaluation, home)
    if view is not None:
        view.done(evaluation)
    return evaluation


def _check_first_launch(plan: Any, case: Case, model: Any, options: dict[str, Any]) -> None:
    """Refuse once, before any worker starts, what would fail every case alike (a model spec in no
    accepted form, a missing API key, an unknown output format): raises LaunchError."""
    from lev_nb.engine.launch import check_launch
    from lev_nb.settings import current as current_settings

    check_launch(plan, task=case.task, inputs=case.inputs, model=model,
                 output_format=options.get("output_format"), settings=current_settings())


def _is_many(checks: Any) -> bool:
    return isinstance(checks, (list, tuple, set))


def _load_agent(agent: Any, load: Callable[[Any], Any]) -> Any:
    """A Blueprint from a Blueprint, a path, or the name of a bundled agent."""
    if isinstance(agent, str) and not os.path.exists(agent) and "/" not in agent and os.sep not in agent:
        bundled = Path(__file__).resolve().parent.parent / "agents" / agent
        if bundled.is_dir():
            return load(bundled)
    return load(agent)


def new_eval_id(agent: str) -> str:
    """``<agent>-<unix seconds>-<8 hex>``, like a run id."""
    safe = "".join(ch if ch.isalnum() or ch == "-" else "-" for ch in agent) or "agent"
    return f"{safe}-{int(time.time())}-{secrets.token_hex(4)}"


def blueprint_hash(blueprint: Any) -> str:
    """A digest of the blueprint and the scripts beside it (tools, validators, hooks): what the
    record keeps so a later evaluation can tell whether it ran the same agent."""
    digest = hashlib.sha256((blueprint.source_text or blueprint.to_toml()).encode())
    folder = blueprint.source_path.parent if blueprint.source_path else None
    if folder is not None:
        for path in sorted(folder.rglob("*.rhai")):
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return "sha256:" + digest.hexdigest()


def _model_name(model: Any) -> str | None:
    if model is None or isinstance(model, str):
        return model
    return str(getattr(model, "name", type(model).__name__))


def _results(runs: list[Case], repeats: int, summaries: list[Any], home: Any) -> list[CaseResult]:
    """One result per run: the summary of run_many plus what its meta.json says (format, tokens,
    cost, duration, stage path)."""
    from lev_nb.store.files import RunStore

    out = []
    for i, (case, summary) in enumerate(zip(runs, summaries)):
        meta: dict[str, Any] = {}
        if summary.run_id:
            try:
                meta = RunStore(summary.run_id, home).read_meta()
            except (OSError, ValueError):
                meta = {}
        final = meta.get("final_output") or {}
        out.append(CaseResult(
            index=case.index, task=case.task, run_id=summary.run_id, status=summary.status, passed=False,
            inputs=case.inputs, expected=case.expected, content=summary.output, format=final.get("format"),
            error=summary.error, prompt_tokens=int(meta.get("prompt_tokens") or 0),
            completion_tokens=int(meta.get("completion_tokens") or 0), cost_usd=float(meta.get("cost_usd") or 0.0),
            duration_s=_duration(meta), stage_path=list(meta.get("stage_history") or []), repeat=i % repeats,
            attempts=summary.attempts,
        ))
    return out


def _duration(meta: dict[str, Any]) -> float | None:
    start, end = parse_stamp(meta.get("started_at")), parse_stamp(meta.get("updated_at"))
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def _judge_all(results: list[CaseResult], runs: list[Case], checks: list[Check], concurrency: int) -> None:
    """Fill every result's verdicts and ``passed``: the plain checks at once, the judges' model
    calls together afterwards (in case order, at most ``concurrency`` at once)."""
    pending: list[tuple[int, int, Judge, Answer, Case]] = []
    verdicts: list[list[Verdict | None]] = []
    for i, (result, case) in enumerate(zip(results, runs)):
        answer = Answer(result.content, result.format, result.status, result.error, result.run_id)
        row: list[Verdict | None] = []
        for j, check in enumerate(checks if result.status == "complete" else []):
            if isinstance(check, Judge):
                pending.append((i, j, check, answer, case))
                row.append(None)
            else:
                row.append(_safely(check, answer, case))
        verdicts.append(row)
    if pending:
        for (i, j, *_), verdict in zip(pending, run_coroutine(_ask_judges(pending, concurrency))):
            verdicts[i][j] = verdict
    for i, result in enumerate(results):
        done = [v for v in verdicts[i] if v is not None]
        result.verdicts = done
        result.passed = result.status == "complete" and all(v.passed for v in done)


def _safely(check: Check, answer: Answer, case: Case) -> Verdict:
    try:
        return check(answer, case)
    except Exception as exc:  # a check that raises fails this case, and the evaluation goes on
        return Verdict(check.name, False, f"the check raised {type(exc).__name__}: {exc}")


async def _ask_judges(pending: list[tuple[int, int, Judge, Answer, Case]], concurrency: int) -> list[Verdict]:
    slots = asyncio.Semaphore(max(1, concurrency))

    async def one(judge: Judge, answer: Answer, case: Case) -> Verdict:
        async with slots:
            try:
                return await judge.ajudge(answer, case)
            except Exception as exc:
                return Verdict(judge.name, False, f"the judge raised {type(exc).__name__}: {exc}")

    return list(await asyncio.gather(*(one(j, a, c) for _, _, j, a, c in pending)))


def _progress_view(show: bool | None, title: str, total: int) -> Any:
    from lev_nb.batch.many import _in_kernel
    from lev_nb.engine import views

    if not (show if show is not None else _in_kernel()) or not views.has_view(views.EVAL_PROGRESS):
        return None
    return views.view(views.EVAL_PROGRESS, title, total)


def _both(view: Any, on_progress: Callable[[Any], None] | None) -> Callable[[Any], None] | None:
    if view is None:
        return on_progress

    def both(progress: Any) -> None:
        view.update(progress)
        if on_progress is not None:
            on_progress(progress)

    return both
