"""``lev doctor``: what this install can do, checked end to end (upstream ``cli.md`` ``lev doctor``).

The checks run in order and the first that fails stops those after it, so the one that fails is
the diagnosis: ``config`` (config.toml reads), ``rhai`` (the native Rhai module loads and runs a
script), ``store`` (``$LEV_HOME`` is writable), ``resolve`` (the model a one-stage agent would use,
its provider registered and its key present), ``run`` (that agent runs to its answer: one real
model call, in a throwaway run store that is deleted afterwards, so nothing shows in ``lev ps``).
``sandbox`` and ``jupyter`` only inform (they never fail the doctor). ``--model mock`` checks
everything offline; ``--no-run`` stops before anything is billed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lev_nb.cli.verbosity import is_verbose

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

_PROBE = '''
[agent]
name = "doctor"
description = "lev doctor's throwaway agent: one stage, no tools"
[context.regions]
system = { kind = "pinned", max_tokens = 1000 }
task = { kind = "pinned", max_tokens = 200, seed = "task_input" }
conversation = { kind = "sliding_window", max_items = 10, max_tokens = 4000 }
[stages.reply]
mode = "output"
max_iterations = 3
system_prompt = "Answer with submit_output and the single word PONG."
output = { format = "text" }
'''


def add_doctor(subparsers: SubParsers) -> None:
    """Register ``lev doctor``."""
    p = subparsers.add_parser(
        "doctor", help="check what this install can do, end to end",
        description=("Check, in order: the configuration, the Rhai module, the run store, the model a "
                     "one-stage agent would use (provider and key), and one real run of it (deleted "
                     "afterwards). The first failure stops the rest; exit 1 when one fails. Also says "
                     "which sandbox this machine gives and whether Jupyter is there."),
    )
    p.add_argument("-m", "--model", default=None, metavar="SPEC",
                   help="the model to try (provider/model, scripted:FILE or mock); default: your defaults")
    p.add_argument("--no-run", "--no-daemon", dest="no_run", action="store_true",
                   help="stop before the run: bills nothing, writes nothing")
    p.add_argument("--json", action="store_true", help='print {"checks": [...], "passed": bool}')
    p.set_defaults(func=run_doctor)


class _Failed(Exception):
    """A check that failed; the message is the diagnosis."""


def _config(state: dict[str, Any]) -> str:
    from lev_nb.providers.resolve import known_providers
    from lev_nb.settings import ConfigError, current

    try:
        settings = current()
    except ConfigError as exc:
        raise _Failed(str(exc)) from None
    state["settings"] = settings
    where = settings.path if settings.file_exists else f"{settings.path} (absent: defaults)"
    ignored = f"; {len(settings.warnings)} keys ignored (lev config)" if settings.warnings else ""
    return (f"{where}; default_provider={settings.default_provider}; "
            f"providers: {', '.join(known_providers())} (script providers by name){ignored}")


def _rhai(state: dict[str, Any]) -> str:
    try:
        from lev_nb.rhai import Engine

        value = Engine().eval("let x = [1, 2, 3]; x.len() * 14")
    except Exception as exc:  # a missing or broken native module: the diagnosis, not a traceback
        raise _Failed(f"the native Rhai module does not work: {exc}") from None
    if value != 42:
        raise _Failed(f"the Rhai module answered {value!r} to a sum worth 42")
    return "the native module runs scripts"


def _store(state: dict[str, Any]) -> str:
    from lev_nb.settings.paths import lev_home

    home = lev_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
            pass
    except OSError as exc:
        raise _Failed(f"{home} is not writable: {exc.strerror or exc}") from None
    return f"{home} is writable"


def _resolve(state: dict[str, Any]) -> str:
    from lev_nb.catalog import load
    from lev_nb.engine.launch import LaunchError, check_launch
    from lev_nb.engine.pipeline.inference import model_label
    from lev_nb.engine.prepare import cached_plan

    plan = cached_plan(load(_PROBE))
    try:
        launch = check_launch(plan, task="ping", model=state["model"], settings=state["settings"])
    except LaunchError as exc:
        raise _Failed(exc.for_cli()) from None
    state["plan"] = plan
    return model_label(launch.provider, plan.stages[0], state["settings"])


def _run(state: dict[str, Any]) -> str:
    from lev_nb.catalog import load
    from lev_nb.settings import launch_options

    folder = Path(tempfile.mkdtemp(prefix="lev-doctor-"))
    try:
        with launch_options({"title": {"enabled": False}}):  # one model call, not a second for a title
            run = load(_PROBE).run("ping", model=state["model"], home=folder / "home", workdir=folder / "work")
            run.wait(300)
        if run.status != "complete":
            raise _Failed(f"the run ended {run.status}: {run.error or 'no answer'}")
        total = run.usage["total"]
        calls = total.get("calls", 0)
        tokens = (f"{calls} call(s), {total.get('prompt_tokens', 0)} in / {total.get('completion_tokens', 0)} out, "
                  if calls else "")
        answer = (run.result.content if run.result is not None else "").strip()
        return f"{tokens}answered {answer[:40]!r} after {len(run.events)} events (run deleted)"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _sandbox(state: dict[str, Any]) -> str:
    from lev_nb.sandbox import SandboxSpec, choose, describe

    choice = choose(SandboxSpec(kind="namespace"))
    if choice.reason:
        return f"no namespace sandbox here ({choice.reason}): blueprints that require one are refused"
    return "a namespace sandbox runs commands " + describe(choice).split(":", 1)[0]


def _jupyter(state: dict[str, Any]) -> str:
    found = [name for name in ("ipykernel", "ipywidgets", "jupyterlab") if find_spec(name) is not None]
    missing = [name for name in ("ipykernel", "ipywidgets", "jupyterlab") if name not in found]
    text = f"{', '.join(found)} installed" if found else "no Jupyter packages"
    return text + (f"; missing {', '.join(missing)} (pip install 'lev_nb[notebook]')" if missing else
                   "; `%load_ext lev_nb` in a notebook adds the magics")


Check = tuple[str, Callable[[dict[str, Any]], str], bool]
CHECKS: tuple[Check, ...] = (
    ("config", _config, True), ("rhai", _rhai, True), ("store", _store, True), ("resolve", _resolve, True),
    ("run", _run, True), ("sandbox", _sandbox, False), ("jupyter", _jupyter, False),
)


def run_doctor(args: argparse.Namespace) -> int:
    """``lev doctor [--model SPEC] [--no-run] [--json]``."""
    verbose = is_verbose(args)  # every check runs, and each one's time is shown
    state: dict[str, Any] = {"model": args.model}
    results: list[dict[str, Any]] = []
    failed: str | None = None
    for name, check, gating in CHECKS:
        if name == "run" and args.no_run:
            continue
        if failed is not None and gating and not verbose:
            results.append({"name": name, "ok": None, "detail": f"not run: {failed} failed", "seconds": 0.0})
            continue
        started = time.monotonic()
        try:
            detail, ok = check(state), True
        except _Failed as exc:
            detail, ok = str(exc), False
            failed = failed or name
        except Exception as exc:  # -v only: a check that needs what an earlier failed one gives
            if failed is None:
                raise
            detail, ok = f"cannot run after {failed} failed ({type(exc).__name__}: {exc})", None
        results.append({"name": name, "ok": ok, "detail": detail, "seconds": round(time.monotonic() - started, 2)})
    passed = failed is None
    if args.json:
        print(json.dumps({"checks": results, "passed": passed}, indent=2))
        return 0 if passed else 1
    for row in results:
        mark = {True: "OK", False: "FAIL", None: "--"}[row["ok"]]
        took = f"  ({row['seconds']:.1f}s)" if row["seconds"] >= 0.1 or verbose else ""
        print(f"  {row['name']:<9} {mark:<4} {row['detail']}{took}")
    print()
    print("doctor passed" if passed else f"doctor failed at {failed}", file=sys.stdout if passed else sys.stderr)
    return 0 if passed else 1
