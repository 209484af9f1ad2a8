"""The taint gate: before an outbound tool runs, compare the label of the data in context with the
tool's clearance, and decide (upstream security.md "Taint tracking").

Order, as the upstream has it: a tool that is not outbound runs; data at or below the clearance
runs; else the first ``[[allowlist]]`` rule that fits allows it; else the first scripted rule that
returns true allows it; else the call is blocked, and the run asks a person (or, with nobody to ask,
refuses it). Rules only ever allow: they cannot tighten the gate.

Where the upstream passes no target to its rules at run time, lev_nb reads the call's destinations
from its arguments (a ``url`` and its host, ``to``, ``channel``, a URL in a shell command...), and a
rule with target patterns must fit every one of them, so one allowed address cannot carry a second.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any
from urllib.parse import urlsplit

from lev_nb.records import record

from .levels import ToolClass, builtin_class, rank
from .policy import Policy
from .rules import RuleSet

__all__ = ["READ_TOOLS", "TaintGate", "Verdict", "destinations"]

READ_TOOLS = ("read_file", "read_files", "list_dir")
_TARGET_KEYS = ("url", "uri", "urls", "to", "recipient", "recipients", "channel", "target", "host",
                "email", "address", "endpoint")
_URL = re.compile(r"""\b(?:https?|ftp|wss?)://[^\s'"`<>|;&)]+""", re.IGNORECASE)
MAX_TARGETS = 32


@record
class Verdict:
    """The gate's decision on one call.

    ``outcome``: ``not-outbound`` | ``within-clearance`` | ``allowlist`` | ``rule`` | ``blocked``;
    ``rule`` names what allowed it (``allowlist #N`` or a rule file's stem); ``regions`` are the
    regions whose label exceeds the clearance; ``problems`` are rule failures met on the way.
    """

    tool: str
    outcome: str
    level: str
    clearance: str
    rule: str | None = None
    regions: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    problems: tuple[str, ...] = field(default=(), compare=False)

    @property
    def allowed(self) -> bool:
        """Whether the call may run without a person's say."""
        return self.outcome != "blocked"

    def describe(self) -> str:
        """One sentence on why the call was stopped (for prompts and refusals)."""
        where = ", ".join(self.regions) or "context"
        to = f" to {', '.join(self.targets)}" if self.targets else ""
        return (f"'{self.tool}' would send {self.level} data{to}, above its {self.clearance} clearance "
                f"(the {self.level} data is in: {where})")


def destinations(tool: str, arguments: Mapping[str, Any] | None) -> list[tuple[str, ...]]:
    """Where a call sends data, as read from its arguments: each destination with its spellings
    (a URL and its host). Empty when the arguments name none."""
    args = arguments or {}
    values: list[str] = []
    for key in _TARGET_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            values.append(value)
        elif isinstance(value, list):
            values.extend(v for v in value if isinstance(v, str) and v)
    command = args.get("command")
    if isinstance(command, str):
        values.extend(_URL.findall(command))
    out: list[tuple[str, ...]] = []
    for value in values[:MAX_TARGETS]:
        spellings = [value]
        if "://" in value:
            try:
                host = urlsplit(value).hostname
            except ValueError:
                host = None
            if host:
                spellings.append(host)
        if tuple(spellings) not in out:
            out.append(tuple(spellings))
    return out


class TaintGate:
    """One run's gate: the policy file, the scripted rules, and whether the agent reads outside its
    workdir (then the read tools' results are ``private``, as the upstream has it)."""

    def __init__(self, policy: Policy | None = None, rules: RuleSet | None = None, *, reads_outside: bool = False) -> None:
        self.policy = policy or Policy()
        self.rules = rules or RuleSet()
        self.reads_outside = reads_outside

    def classify(self, tool: str) -> ToolClass:
        """``tool``'s classification: built-in, raised for reads outside the workdir, then the
        policy file's override."""
        base = builtin_class(tool)
        if self.reads_outside and tool in READ_TOOLS:
            base = ToolClass("private", base.direction, base.clearance)
        override = self.policy.override_for(tool)
        return override.apply(base) if override is not None else base

    def check(self, tool: str, arguments: Mapping[str, Any] | None, level: str,
              region_levels: Mapping[str, str] | None = None) -> Verdict:
        """Decide on one call of ``tool`` with ``arguments`` while the context's label is ``level``
        (``region_levels``: each region's label, to say where the sensitive data is)."""
        cls = self.classify(tool)
        if not cls.outbound:
            return Verdict(tool, "not-outbound", level, cls.clearance)
        if cls.clears(level):
            return Verdict(tool, "within-clearance", level, cls.clearance)
        dests = destinations(tool, arguments)
        shown = tuple(d[0] for d in dests)
        index = self.policy.allowing_rule(tool, dests, level)
        if index is not None:
            return Verdict(tool, "allowlist", level, cls.clearance, rule=f"allowlist #{index + 1}", targets=shown)
        name, problems = self.rules.first_allowing(tool, list(shown), level)
        if name is not None:
            return Verdict(tool, "rule", level, cls.clearance, rule=name, targets=shown, problems=tuple(problems))
        regions = tuple(r for r, lv in (region_levels or {}).items() if rank(lv) > rank(cls.clearance))
        return Verdict(tool, "blocked", level, cls.clearance, regions=regions, targets=shown, problems=tuple(problems))
