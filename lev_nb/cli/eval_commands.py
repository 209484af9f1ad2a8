"""``lev eval``, ``lev evals`` and ``lev test`` (issue 22): an agent measured over a dataset from the
terminal (for CI: a table, a results file, exit 1 under ``--min-pass``), the recorded evaluations
listed and compared, and the upstream's one-inference prompt tests of a blueprint's ``tests/``.

Exit statuses: 0 all good; 1 an evaluation under ``--min-pass``, a failed test, or an agent,
dataset or test file that cannot be used; 2 a bad command line or a launch refused (a model spec,
a missing API key), as for ``lev run``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lev_nb.errors import CleanError, UsageError

__all__ = ["add_eval", "add_evals", "add_test"]

REASON_WIDTH = 70
TASK_WIDTH = 28


def add_eval(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev eval``."""
    from lev_nb.eval.forms import CHECK_FORMS

    ev = subparsers.add_parser(
        "eval", help="measure an agent over a dataset", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=("Run AGENT once per row of DATASET (a CSV or JSONL file: a task column, the blueprint's\n"
                     "inputs, an expected column) across worker processes, check every answer, print a table\n"
                     "and a summary, and record the evaluation under $LEV_HOME/evals (`lev evals` lists them).\n"
                     f"Checks: {', '.join(CHECK_FORMS)}."),
        epilog=("examples:\n  lev eval blueprints/triage cases.jsonl --check contains --model mock\n"
                "  lev eval my-agent cases.csv --check equals --check rhai:score.rhai --min-pass 0.9 --out results.jsonl"),
    )
    ev.add_argument("agent", help="the blueprint: a folder, an agent.leviath file or a bundled agent's name")
    ev.add_argument("dataset", help="a .csv, .tsv or .jsonl file of cases")
    ev.add_argument("--check", action="append", default=[], metavar="CHECK",
                    help="a check of every answer (repeatable; none: a case passes when its run completes)")
    ev.add_argument("--model", help="model for every stage: mock, scripted:FILE or provider/model")
    ev.add_argument("--judge-model", help="model of judge: checks (default anthropic/claude-haiku-4-5)")
    ev.add_argument("--workers", type=int, default=None, metavar="K", help="worker processes (default: CPUs)")
    ev.add_argument("--repeats", type=int, default=1, metavar="N", help="runs of each case (default 1)")
    ev.add_argument("--min-pass", type=float, default=None, metavar="RATE",
                    help="exit 1 when the pass rate is under RATE (0-1)")
    ev.add_argument("--out", metavar="FILE", help="write the results: FILE.json (one document) or FILE.jsonl (a line per case)")
    ev.add_argument("--label", help="a name for this evaluation in listings and comparisons")
    ev.add_argument("--json", action="store_true", help="print the evaluation as JSON instead of a table")
    ev.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    """``lev eval``: evaluate, print, write ``--out``, and judge ``--min-pass``."""
    from lev_nb.eval import evaluate, parse_check

    try:
        if args.min_pass is not None and not 0 <= args.min_pass <= 1:
            raise UsageError(f"--min-pass takes a rate from 0 to 1, got {args.min_pass}")
        if args.workers is not None and args.workers < 1:
            raise UsageError(f"--workers takes a number of at least 1, got {args.workers}")
        if args.out and Path(args.out).suffix not in (".json", ".jsonl"):
            raise UsageError(f"--out {args.out}: write a .json or a .jsonl file")
        checks = [parse_check(spec, judge_model=args.judge_model) for spec in args.check]
        evaluation = evaluate(args.agent, args.dataset, checks=checks, model=args.model, repeats=args.repeats,
                              processes=args.workers, label=args.label, show=False,
                              on_progress=None if args.json else _Progress())
    except Exception as exc:
        return _refused("lev eval", exc)
    if args.out:
        _write_results(evaluation, Path(args.out))
    if args.json:
        print(json.dumps({**evaluation.spec(), "results": [r.to_dict() for r in evaluation.results]}, default=str))
    else:
        print_table(evaluation)
        print(f"recorded as {evaluation.id}" + (f"; results in {args.out}" if args.out else ""))
    if args.min_pass is not None and evaluation.pass_rate < args.min_pass:
        print(f"lev eval: pass rate {evaluation.pass_rate:.1%} is under --min-pass {args.min_pass:.1%}", file=sys.stderr)
        return 1
    return 0


class _Progress:
    """The batch's counts on one stderr line while the runs go."""

    def __init__(self) -> None:
        from lev_nb.cli.progress import ProgressLine

        self.line = ProgressLine(sys.stderr)

    def __call__(self, progress: Any) -> None:
        self.line.show(progress.line(), permanent=progress.done)


def _refused(command: str, exc: Exception) -> int:
    """One line for what the user can fix (exit 2 for a bad command line, else 1); anything else
    is lev_nb's own bug and goes up with its traceback."""
    if not isinstance(exc, (CleanError, ValueError, LookupError, OSError)):
        raise exc
    message = exc.for_cli() if hasattr(exc, "for_cli") else str(exc)
    print(f"{command}: {message}", file=sys.stderr)
    return 2 if isinstance(exc, UsageError) else 1


def _write_results(evaluation: Any, path: Path) -> None:
    from lev_nb.store.files import write_atomic

    if path.suffix == ".jsonl":
        data = "".join(json.dumps(r.to_dict(), default=str) + "\n" for r in evaluation.results)
    else:
        data = json.dumps({**evaluation.spec(), "results": [r.to_dict() for r in evaluation.results]},
                          indent=1, default=str)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data.encode())


def _clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def print_table(evaluation: Any) -> None:
    """One row per run (case, result, tokens, seconds, task, reason), then the summary."""
    print(f"{'CASE':>4}  {'RESULT':<6} {'TOKENS':>7} {'SECS':>6}  {'TASK':<{TASK_WIDTH}}  REASON")
    for r in evaluation.results:
        case = f"{r.index + 1}" + (f".{r.repeat + 1}" if evaluation.repeats > 1 else "")
        secs = "-" if r.duration_s is None else f"{r.duration_s:.2f}"
        print(f"{case:>4}  {'pass' if r.passed else 'FAIL':<6} {r.tokens:>7} {secs:>6}  "
              f"{_clip(r.task, TASK_WIDTH):<{TASK_WIDTH}}  {_clip(r.reason, REASON_WIDTH)}")
    print()
    print(f"{evaluation.name}: " + str(evaluation.summary()))


def add_evals(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev evals``."""
    evals = subparsers.add_parser(
        "evals", help="list recorded evaluations, show or compare them",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=("List the evaluations recorded under $LEV_HOME/evals, newest first. With an ID: that\n"
                     "evaluation's table and summary; with --compare OTHER: the two side by side, case by case."),
        epilog="examples:\n  lev evals\n  lev evals triage-1796 --compare triage-1797",
    )
    evals.add_argument("id", nargs="?", help="an evaluation id (or a unique prefix)")
    evals.add_argument("--compare", metavar="OTHER", help="compare ID (before) with OTHER (after)")
    evals.add_argument("--json", action="store_true", help="print the listing as JSON")
    evals.set_defaults(func=cmd_evals)


def cmd_evals(args: argparse.Namespace) -> int:
    """``lev evals``: list, show or compare recorded evaluations."""
    from lev_nb.eval import list_evaluations, load_evaluation

    if args.compare and not args.id:
        print("lev evals: --compare needs the ID of the evaluation to compare it with", file=sys.stderr)
        return 2
    try:
        if args.id:
            evaluation = load_evaluation(args.id)
            if args.compare:
                print(evaluation.compare(load_evaluation(args.compare)))
            elif args.json:
                print(json.dumps({**evaluation.spec(), "results": [r.to_dict() for r in evaluation.results]}))
            else:
                print_table(evaluation)
            return 0
    except Exception as exc:
        return _refused("lev evals", exc)
    listing = list_evaluations()
    if args.json:
        print(json.dumps(listing))
        return 0
    if not listing:
        print("no evaluations recorded (lev eval AGENT DATASET records one)")
        return 0
    print(f"{'ID':<36} {'AGENT':<18} {'MODEL':<22} {'CASES':>5} {'PASS':>7}  CREATED")
    for spec in listing:
        s = spec.get("summary") or {}
        print(f"{spec.get('id', '?'):<36} {_clip(spec.get('label') or spec.get('agent', ''), 18):<18} "
              f"{_clip(spec.get('model') or 'own models', 22):<22} {s.get('cases', 0):>5} "
              f"{s.get('pass_rate', 0):>7.1%}  {spec.get('created_at', '')}")
    return 0


def add_test(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev test``."""
    test = subparsers.add_parser(
        "test", help="run a blueprint's prompt tests (tests/*.toml, tests/*.rhai)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=("Run everything in the blueprint's tests/ folder against the real provider. A tests/*.toml\n"
                     "case is one inference, not a run: its input is seeded as the task, the first request of\n"
                     "the entry stage goes to the model once, and the assertions (expect_contains,\n"
                     "expect_tool_call) are checked on the answer; nothing the model asks for is executed.\n"
                     "A tests/*.rhai script fails when it returns false."),
        epilog="examples:\n  lev test blueprints/triage --dry-run\n  lev test . --filter greeting",
    )
    test.add_argument("path", nargs="?", default=".", help="the blueprint folder or file (default: .)")
    test.add_argument("-f", "--filter", metavar="PATTERN", help="only cases whose name contains PATTERN")
    test.add_argument("--dry-run", action="store_true",
                      help="read and check the cases without calling a provider, so nothing is spent")
    test.add_argument("--model", help="run the cases on this model instead of the entry stage's (mock, "
                                      "scripted:FILE, provider/model)")
    test.set_defaults(func=cmd_test)


def cmd_test(args: argparse.Namespace) -> int:
    """``lev test``: one line per case or script, a count, exit 1 when any failed."""
    from lev_nb.blueprint import BlueprintError, load
    from lev_nb.eval.prompt_tests import TestFileError, case_problems, load_tests, run_case, run_script
    from lev_nb.scripting.scorers import check_test_script

    path = Path(args.path)
    try:
        blueprint = load(path)
        folder = (path if path.is_dir() else path.parent) / "tests"
        if not folder.is_dir():
            print(f"lev test: {folder} does not exist: put the cases in tests/*.toml", file=sys.stderr)
            return 1
        cases, scripts = load_tests(folder, args.filter)
    except (BlueprintError, TestFileError) as exc:
        print(f"lev test: {exc}", file=sys.stderr)
        return 1
    if not cases and not scripts:
        print(f"lev test: no tests in {folder}" + (f" match '{args.filter}'" if args.filter else ""), file=sys.stderr)
        return 1
    failed = 0
    for case in cases:
        if args.dry_run:
            problems = case_problems(case, blueprint)
            expects = [f"{k}={v!r}" for k, v in (("contains", case.expect_contains),
                                                 ("tool_call", case.expect_tool_call),
                                                 ("max_tokens", case.max_tokens)) if v is not None]
            status = "FAIL" if problems else "ok"
            detail = problems[0] if problems else (", ".join(expects) or "no assertion")
            failed += bool(problems)
            print(f"{status:<4} {case.name} ({Path(case.file).name}): {_clip(case.input, 50)!r}; {detail}")
            continue
        try:
            outcome = run_case(case, blueprint, args.model)
        except Exception as exc:
            return _refused("lev test", exc)
        failed += not outcome.passed
        print(f"{'ok' if outcome.passed else 'FAIL':<4} {case.name}" + ("" if outcome.passed else f": {outcome.reason}"))
    for script in scripts:
        if args.dry_run:
            problem = check_test_script(script)
            failed += problem is not None
            print(f"FAIL {script.name}: {problem}" if problem else f"ok   {script.name} (script: compiles; not run in a dry run)")
            continue
        outcome = run_script(script)
        failed += not outcome.passed
        print(f"{'ok' if outcome.passed else 'FAIL':<4} {script.name}" + ("" if outcome.passed else f": {outcome.reason}"))
    total = len(cases) + len(scripts)
    verb = "checked" if args.dry_run else "passed"
    print(f"{total - failed} of {total} {verb}" + (f", {failed} failed" if failed else "") +
          (" (dry run: no provider called)" if args.dry_run else ""))
    return 1 if failed else 0
