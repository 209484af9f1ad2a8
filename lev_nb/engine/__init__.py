"""Running one blueprint (docs/runs.md). The map, in the order a run meets it:

Starting a run
    api.py          ``start_run`` / ``run``: what ``bp.run(...)``, ``lev_nb.run`` and ``lev run`` call
    resume.py       ``resume_run``: a paused or abandoned run continued from its record (lev resume)
    prepare.py      before the run exists: the cached RunPlan, and the stage hooks, custom-region
                    scripts and output validators compiled once (a broken one fails at launch)
    plan/           the RunPlan: ``types`` (the frozen dataclasses the loop reads) and ``build``
                    (from a Blueprint; the engine's only reader of the blueprint model)
    handle.py       ``Run``: the handle a user holds (status, events, result, wait, cancel)
    loop.py         the engine thread whose asyncio loop runs every run

Running it
    runner.py       ``Runner``: the lifecycle and the loop; holds the collaborators below, each
                    given the shared RunState and what else it needs explicitly
    state.py        ``RunState`` (the one shared state), ``StageProgress``, ``Outcome``, ``Ending``
    pipeline/       one module per step of the loop:
        inference.py    ``Inference``: provider choice, requests, retries, the record of each call
        tools.py        ``StageTools``: a stage's tools and a batch of calls (submit_output, ...)
        holds.py        ``ExitHolds``: the text-only nudge and what a stage owes before it leaves
        transitions.py  ``Transitions``: where a finished stage goes, and entering a stage
        hooks.py        ``RunHooks``: the stage hooks
        fanout.py       ``FanOut``: worker runs and their merged report
        subagents.py    ``SubAgents``: child runs, the sub-agent tools, requires_children, messages
        watchdogs.py    iteration cap, stuck thresholds, a vanished workdir
        routing.py, gates.py, repetition.py, submission.py, outputs.py: pure rules and deciders
    context/        the context window: ``regions``, ``window``, ``assembly`` (to a request),
                    ``access`` (the context_* tools), ``custom`` (scripted regions), ``run_context``
                    (one run's window) and ``seeds`` (filling regions at the start)

Recording it
    record.py       ``Recorder``: meta.json, events.jsonl and transcript.jsonl in step with the run;
                    ``UsageBook`` / ``roll_up_usage``: tokens and cost, workers' rolled into parents
    journal.py      ``Journal``: each model call, tool result and seed journaled before it is used,
                    and replayed when a run is resumed
    events.py       the typed events; eventlog.py: the live log readers follow
    run_warnings.py what a run tells the person (RunState.warn): the codes and ``RunWarning``
    webhook.py      the completion POST; artifacts.py: reading workdir files in windows
    views.py        the slots the notebook layer fills with displays
"""
