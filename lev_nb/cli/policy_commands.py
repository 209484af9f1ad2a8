"""``lev policy list | add | test``: the taint gate's policy (upstream cli.md ``lev policy``). The
files are ``$LEV_HOME/policy.toml`` and ``$LEV_HOME/rules/*.rhai`` (:mod:`lev_nb.taint`); this
module prints them, appends allowlist rules, and dry-runs the gate for one tool. A policy file or
label lev_nb cannot use is one line on stderr naming the file and key, and exit status 1.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from lev_nb.cli.dispatch import chosen_action, fail

LEVEL_CHOICES = "public|internal|private"


def add_policy(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev policy``."""
    policy = subparsers.add_parser(
        "policy", help="the taint gate's policy: list, add or test rules",
        description=("Taint tracking's policy: the allowlist and per-tool overrides of "
                     "$LEV_HOME/policy.toml, and the scripted rules in $LEV_HOME/rules/*.rhai."),
        epilog=('examples:\n  lev policy list\n  lev policy add send_email --target "*.example.com" '
                "--max-sensitivity internal\n  lev policy test shell --target example.com"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = policy.add_subparsers(dest="policy_action", metavar="ACTION", title="actions",
                                    help="list, add or test")
    listing = actions.add_parser("list", help="the rules in force, static and scripted")
    listing.add_argument("--json", action="store_true", help="print JSON")
    add = actions.add_parser("add", help="append an allowlist rule to policy.toml")
    add.add_argument("tool", metavar="TOOL", help="the tool the rule allows")
    add.add_argument("--target", default=None, help="where it may send (a pattern: *, *suffix, prefix* or exact)")
    add.add_argument("--max-sensitivity", default="internal", metavar=LEVEL_CHOICES,
                     help="the most sensitive data it may carry (default internal)")
    test = actions.add_parser("test", help="would a call of TOOL be gated?")
    test.add_argument("tool", metavar="TOOL", help="the tool to check")
    test.add_argument("--target", default=None, help="where the call sends")
    test.add_argument("--taint", default="private", metavar=LEVEL_CHOICES,
                      help="the sensitivity of the data in context (default private)")
    test.add_argument("--json", action="store_true", help="print JSON")
    policy.set_defaults(func=run_policy)


def run_policy(args: argparse.Namespace) -> int:
    """``lev policy list|add|test``; returns the exit status."""
    from lev_nb.taint import PolicyError

    action = chosen_action(args, "policy", ("list", "add", "test"))
    if action is None:
        return 2
    try:
        if action == "list":
            return _list(args)
        if action == "add":
            return _add(args)
        return _test(args)
    except PolicyError as exc:
        return fail("policy", str(exc))


def _list(args: argparse.Namespace) -> int:
    from lev_nb.taint import load_policy, load_rules, policy_path, rules_dir

    policy = load_policy()
    rules = load_rules(rules_dir())
    if args.json:
        print(json.dumps({
            "policy_file": str(policy_path()),
            "allowlist": [{"tool": r.tool, "to": list(r.to), "channel": list(r.channel),
                           "max_sensitivity": r.max_sensitivity} for r in policy.allowlist],
            "rules": [{"name": r.name, "path": r.label} for r in rules.rules],
            "rule_problems": rules.problems,
            "overrides": {k: {f: v for f, v in o.__dict__.items() if v is not None} for k, o in policy.overrides.items()},
        }, indent=2))
        return 0
    print(f"Policy file: {policy_path()}" + ("" if policy_path().exists() else " (none)"))
    if policy.allowlist:
        print(f"Static rules ({len(policy.allowlist)}):")
        for i, allow in enumerate(policy.allowlist, 1):
            print(f"  {i}. {allow.describe()}")
    else:
        print("No static allowlist rules.")
    if rules.rules:
        print(f"Scripted rules ({len(rules.rules)}), in the order they are tried:")
        for rule in rules.rules:
            print(f"  - {rule.name} ({rule.label})")
    else:
        print(f"No scripted rules in {rules_dir()}.")
    for problem in rules.problems:
        print(f"  ! {problem}")
    if policy.overrides:
        print(f"Tool overrides ({len(policy.overrides)}):")
        for key, override in policy.overrides.items():
            print(f"  {key} [{override.describe()}]")
    return 0


def _add(args: argparse.Namespace) -> int:
    from lev_nb.taint import add_rule

    rule, path = add_rule(args.tool, args.max_sensitivity, args.target)
    print(f"Added rule: {rule.describe()}")
    print(f"Saved to: {path}")
    return 0


def _test(args: argparse.Namespace) -> int:
    from lev_nb.taint import LEVELS, TaintGate, load_policy, load_rules, rules_dir

    if args.taint not in LEVELS:
        return fail("policy", f"--taint {args.taint!r} is not a sensitivity label (one of {', '.join(LEVELS)})")
    gate = TaintGate(load_policy(), load_rules(rules_dir()))
    cls = gate.classify(args.tool)
    arguments: dict[str, Any] = {"target": args.target} if args.target else {}
    verdict = gate.check(args.tool, arguments, args.taint, {"scenario": args.taint})
    if args.json:
        print(json.dumps({"tool": args.tool, "sensitivity": cls.sensitivity, "direction": cls.direction,
                          "clearance": cls.clearance, "taint": args.taint, "target": args.target,
                          "outcome": verdict.outcome, "allowed": verdict.allowed, "rule": verdict.rule,
                          "problems": list(verdict.problems)}, indent=2))
        return 0
    print(f"Tool: {args.tool}")
    print(f"  sensitivity {cls.sensitivity}, direction {cls.direction}, clearance {cls.clearance}")
    print(f"Data in context: {args.taint}" + (f", sent to {args.target}" if args.target else ""))
    for problem in verdict.problems:
        print(f"  ! {problem}")
    results = {
        "not-outbound": "ALLOWED (the tool sends nothing off the machine, so it is not gated)",
        "within-clearance": f"ALLOWED ({args.taint} is within its {cls.clearance} clearance)",
        "allowlist": f"ALLOWED by {verdict.rule}",
        "rule": f"ALLOWED by scripted rule '{verdict.rule}'",
        "blocked": (f"BLOCKED ({args.taint} is above its {cls.clearance} clearance and no rule allows it): "
                    "a run would ask you, or refuse the call when nobody can be asked"),
    }
    print(f"Result: {results[verdict.outcome]}")
    return 0
