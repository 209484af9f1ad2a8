"""Resuming a run from its record: ``lev_nb.resume(run_id)`` and ``lev resume RUN_ID``
(docs/runs.md#pausing-and-resuming; issue 12 "Resume").

A run can be resumed when it is ``paused`` (it waits for credits or the network) or when it still
says ``running``/``starting``/``waiting_input`` but the process that ran it is gone (killed,
crashed). A person's answers (approvals, questions, checkpoints) and the sub-agents it started are
journaled too, so none is asked or started again; a run that waited for an answer asks the same
request again (same id), and an answer given meanwhile (``lev respond``) is taken when it does.
The open requests themselves are kept in meta.json (``pending``, with ``waiting_on``), which plays
the part of the spec's ``interactions.json``: the replay rebuilds each request as it was, so the
record needs no second copy. The resumed
run keeps its id and folder: it is rebuilt from how it was started (``launch.json``: the
blueprint's text and path, the model spec, the inputs, the output request, the webhook) and
replays its journal (:mod:`lev_nb.engine.journal`), so the conversation, the stage and the
counters come back as they were and no completed tool call runs twice (one that was running when
the process stopped is reported to the model as interrupted instead of running again, unless its
tool is read-only); then it goes on. A run stopped with Ctrl-C is ``paused`` (blocker
``interrupted``) and resumes like any paused run. A run
that ended (complete, error, cancelled), a worker run (its parent is resumed instead), an
unknown id and a run still owned by a live process are refused with one clear message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import field
from typing import TYPE_CHECKING, Any, Callable

from lev_nb.errors import CleanError
from lev_nb.records import record

if TYPE_CHECKING:
    from lev_nb.engine.handle import Run
    from lev_nb.engine.pipeline.inference import RetryPolicy
    from lev_nb.engine.plan.types import OutputSpec
    from lev_nb.providers.base import Provider
    from lev_nb.store import RunMeta, RunStore

__all__ = ["ResumeError", "Resumption", "launch_record", "resume_run", "RESUMABLE"]

#: Statuses a run can be resumed from (all but ``paused`` only when its process is gone).
RESUMABLE = ("paused", "running", "starting", "waiting_input")


class ResumeError(CleanError, ValueError):
    """A run that cannot be resumed; the message says which, why and what to do instead."""


@record(frozen=False)
class Resumption:
    """What a resumed run takes from its previous life: its id, its meta.json, its journal and
    its events."""

    run_id: str
    old_meta: dict[str, Any]
    journal: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings the resumed run tells first
    # The model is the one the run was started with (not one given again at the resume): a script
    # then goes on where the run stopped, while a new one answers from its own first turn.
    same_model: bool = False

    @property
    def from_status(self) -> str:
        """The status the run is resumed from (paused, or running for a run whose process died)."""
        return str(self.old_meta.get("status") or "running")

    def carry_into(self, meta: RunMeta) -> None:
        """Keep what the new meta.json must say about the run's history: when it started, its
        metadata, its title, what it warned of, and how often (and when) it was resumed."""
        from lev_nb.store import utc_now

        old = self.old_meta
        if isinstance(old.get("started_at"), str):
            meta.started_at = old["started_at"]
        if isinstance(old.get("metadata"), dict):
            meta.metadata = dict(old["metadata"])
        if isinstance(old.get("title"), str):
            meta.title = old["title"]
        if isinstance(old.get("warnings"), list):
            meta.warnings = [dict(w) for w in old["warnings"] if isinstance(w, dict)]
        previous: dict[str, Any] = old["resumed"] if isinstance(old.get("resumed"), dict) else {}
        count = int(previous.get("count") or 0) + 1
        meta.resumed = {
            "count": count,
            "at": [*list(previous.get("at") or []), utc_now()],
            "from": [*list(previous.get("from") or []), self.from_status],
        }


def launch_record(
    blueprint: Any,
    *,
    model: Any,
    task: str,
    workdir: Any,
    inputs: dict[str, Any],
    output_request: OutputSpec | None,
    output_validator: Any,
    webhook: str | None,
    yolo: bool = False,
    allow: Any = (),
    max_depth: int | None = None,
) -> dict[str, Any]:
    """How a run was started, as ``launch.json`` keeps it for a resume: the blueprint (its text
    and path), the model spec (a string; a Provider object is named, and must be given again to
    resume), the inputs, the output request and validator source, the webhook, and the launch
    permissions and depth limit (--yolo, --allow, --max-depth), which a resumed run keeps."""
    if isinstance(model, str) and model.strip().startswith("scripted:"):
        # A resume may start in another folder: keep the script's absolute path.
        model = "scripted:" + os.path.abspath(model.strip()[len("scripted:"):])
    request = None
    if output_request is not None and not output_request.is_empty():
        request = {k: v for k, v in output_request.__dict__.items() if v is not None}
    return {
        "blueprint": {
            "path": str(blueprint.source_path) if getattr(blueprint, "source_path", None) else None,
            "text": getattr(blueprint, "source_text", None),
            # A blueprint given as text (a %%blueprint cell) keeps the folder its scripts resolve in.
            "base_dir": str(blueprint.base_dir) if getattr(blueprint, "base_dir", None) else None,
        },
        "model": model if isinstance(model, str) or model is None else None,
        "model_object": None if isinstance(model, str) or model is None else type(model).__name__,
        "task": task,
        "workdir": None if workdir is None else str(workdir),
        "inputs": {k: str(v) for k, v in inputs.items()},
        "output_request": request,
        "output_validator": output_validator if isinstance(output_validator, str) else None,
        "webhook": webhook,
        "yolo": bool(yolo),
        "allow": list(allow or ()),
        "max_depth": max_depth,
    }


@contextlib.contextmanager
def _claimed(store: RunStore) -> Iterator[None]:
    """Hold the run's claim lock (one resume at a time); ResumeError when it is taken."""
    from lev_nb.store import RecordBusy

    claim = store.claim()
    try:
        claim.__enter__()
    except RecordBusy as exc:
        raise ResumeError(str(exc)) from None
    except OSError as exc:
        raise ResumeError(f"run '{store.run_id}' cannot be taken over: {exc.strerror or exc}") from None
    try:
        yield
    finally:
        claim.__exit__(None, None, None)


def _claimable(store: RunStore, meta: dict[str, Any]) -> None:
    """Refuse (ResumeError) a run that is not paused and not abandoned by a dead process."""
    from lev_nb.engine.runner import ACTIVE_RUNS
    from lev_nb.store import TERMINAL_STATUSES, owner_gone

    run_id = store.run_id
    status = meta.get("status")
    parent = meta.get("parent_run_id")
    if parent:
        if _child_kind(store, str(parent), run_id) == "agent":
            raise ResumeError(
                f"run '{run_id}' is a sub-agent of run '{parent}' and is not resumed on its own; resume "
                f"the parent run instead (`lev resume {parent}`), which starts this sub-agent again for "
                "the same task when it was paused")
        raise ResumeError(
            f"run '{run_id}' is a worker of run '{parent}'; resume that run instead "
            "(its fan-out starts the workers it still needs)")
    if status in TERMINAL_STATUSES:
        raise ResumeError(
            f"run '{run_id}' ended ({status}) and cannot be resumed; only a paused run, or one whose "
            "process was killed, can. Start a new run instead")
    if status not in RESUMABLE:
        raise ResumeError(f"run '{run_id}' has the status '{status}', which lev_nb cannot resume")
    if status == "paused":
        return
    pid = meta.get("pid")
    if pid == os.getpid():
        alive = run_id in ACTIVE_RUNS
    else:
        alive = not owner_gone(meta) and isinstance(pid, int) and pid > 0
    if alive:
        raise ResumeError(
            f"run '{run_id}' is still running in process {pid}; wait for it, or stop it first "
            "(Ctrl-C in its terminal, run.cancel() in Python)")


def _child_kind(store: RunStore, parent_id: str, run_id: str) -> str | None:
    """How ``run_id`` was started by its parent (``agent``: spawn_agent; ``worker``: fan_out), as
    the parent's record lists it; None when the parent's record cannot say."""
    from lev_nb.store import RunStore as Store

    try:  # the parent's folder sits beside the child's
        parent = Store(parent_id, home=store.dir.parent.parent).read_meta()
    except (OSError, ValueError):  # a parent record that is gone or unreadable: the generic message
        return None
    if not isinstance(parent, dict):
        return None
    for entry in parent.get("child_runs") or []:
        if isinstance(entry, dict) and entry.get("run_id") == run_id:
            return str(entry.get("kind") or "") or None
    return None


def _blueprint(run_id: str, source: dict[str, Any]) -> tuple[Any, list[str]]:
    """The run's blueprint: its file as it is now when it still exists (a remedy may be an edit
    to it, such as another model in a stage's list; a resume then follows the edit), else the
    text kept in launch.json. Returns it with the notes the resumed run should tell."""
    from pathlib import Path

    from lev_nb.blueprint import BlueprintError, load, load_text

    path, text = source.get("path"), source.get("text")
    try:
        if path and Path(path).is_file():
            blueprint = load(Path(path))
            if text is not None and blueprint.source_text != text:
                return blueprint, [f"the blueprint {path} changed since the run started; the resumed run "
                                   "follows it as it is now"]
            return blueprint, []
        if text is not None:
            return load_text(text, path=path, base_dir=None if path else source.get("base_dir")), []
    except BlueprintError as exc:
        raise ResumeError(f"the blueprint of run '{run_id}' cannot be loaded again: {exc}") from None
    raise ResumeError(f"the blueprint of run '{run_id}' is gone ({path}) and launch.json keeps no copy of it")


def resume_run(
    run_id: str,
    *,
    model: str | Provider | None = None,
    home: str | os.PathLike[str] | None = None,
    approver: Callable[..., Any] | None = None,
    on_complete: Callable[[Run], None] | None = None,
    output_validator: Any = None,
    retry: RetryPolicy | None = None,
    interactive: bool | None = None,
) -> Run:
    """Continue the paused or abandoned run ``run_id`` (an id or a unique prefix) in its own folder
    and return its :class:`Run` at once (see the module docstring).

    ``model`` replaces the model spec the run was started with (needed when it was a Provider
    object, such as a ``ScriptedModel``); ``approver``, ``on_complete`` and ``output_validator``
    are given again as a launch would take them, since a record cannot keep Python objects;
    ``interactive`` says who can answer its requests now, as for a launch. The launch's --yolo,
    --allow and --max-depth are kept from the record.
    Raises ResumeError when the run cannot be resumed, LaunchError when it cannot start as
    recorded (a missing API key, a model that no longer resolves).
    """
    from lev_nb.engine.handle import Run
    from lev_nb.engine.launch import check_launch
    from lev_nb.engine.plan.types import OutputSpec
    from lev_nb.engine.prepare import LAUNCH_VALIDATOR, cached_plan, compile_run_scripts, compile_validators
    from lev_nb.engine.runner import Runner
    from lev_nb.settings import current as current_settings
    from lev_nb.store import LAUNCH, RunNotFound, find_run

    try:
        store = find_run(run_id, home)
    except (RunNotFound, ValueError) as exc:
        raise ResumeError(str(exc)) from None
    launch = store.read_launch()
    with _claimed(store):
        try:
            meta = store.read_meta()
        except (OSError, ValueError) as exc:
            raise ResumeError(f"the record of run '{store.run_id}' cannot be read ({exc}), so it cannot be resumed") from None
        if not isinstance(meta, dict):
            raise ResumeError(f"the record of run '{store.run_id}' is damaged, so it cannot be resumed")
        _claimable(store, meta)
        if not isinstance(launch, dict):
            raise ResumeError(
                f"run '{store.run_id}' has no {LAUNCH} (it was recorded by a lev_nb that could not resume runs); "
                "start a new run instead")
        blueprint, notes = _blueprint(store.run_id, launch.get("blueprint") or {})
        same_model = model is None
        if model is None:
            model = launch.get("model")
            if model is None and launch.get("model_object"):
                raise ResumeError(
                    f"run '{store.run_id}' was started with a {launch['model_object']} object as its model, "
                    "which a record cannot keep; pass it again: lev_nb.resume(run_id, model=...)")
        settings = current_settings()
        plan = cached_plan(blueprint)
        inputs = dict(launch.get("inputs") or {})
        task = str(launch.get("task") if launch.get("task") is not None else meta.get("task") or "")
        request_data = launch.get("output_request")
        request = OutputSpec(**request_data) if isinstance(request_data, dict) else None
        validator = output_validator if output_validator is not None else launch.get("output_validator")
        if validator is None and request is not None and request.validator == LAUNCH_VALIDATOR:
            raise ResumeError(
                f"run '{store.run_id}' was started with a compiled output validator, which a record cannot "
                "keep; pass it again: lev_nb.resume(run_id, output_validator=...)")
        if validator is not None and request is not None and request.validator is None:
            request = dataclasses.replace(request, validator=LAUNCH_VALIDATOR)
        checked = check_launch(
            plan, task=task, inputs=inputs, model=model,
            output_format=request.format if request else None,
            workdir=meta.get("workdir") or None, webhook=launch.get("webhook"), settings=settings, home=home,
        )
        validators = compile_validators(plan, validator)
        hook_scripts, region_scripts = compile_run_scripts(plan)
        resumption = Resumption(
            run_id=store.run_id, old_meta=meta, journal=store.read_journal(), events=store.read_events(), notes=notes,
            same_model=same_model,
        )
        runner = Runner(
            plan, task=task, provider=checked.provider, workdir=checked.workdir, inputs=inputs,
            output_request=request, on_complete=on_complete, home=home, retry=retry, approver=approver,
            validators=validators, webhook=launch.get("webhook"), hook_scripts=hook_scripts,
            region_scripts=region_scripts, settings=settings, resume=resumption,
            yolo=bool(launch.get("yolo")), allow=[str(a) for a in launch.get("allow") or ()],
            max_depth=launch.get("max_depth") if isinstance(launch.get("max_depth"), int) else None,
            interactive=interactive,
        )
    # Requests open when the process stopped are asked again under the same ids.
    runner.interaction.expect([str(p.get("id")) for p in meta.get("pending") or [] if isinstance(p, dict)])
    runner.blueprint = blueprint
    run = Run(runner)
    runner.handle = run
    from lev_nb.engine import views

    if interactive is None and views.person_here():
        run.attend()  # as at launch: a notebook person is asked from the start
    run.start()
    return run
