"""Taint tracking (upstream security.md "Taint tracking", configuration.md ``policy.toml``,
rhai-tools.md "Policy rules"): what the runtime knows about how sensitive the data in a run's
context is, and the gate that stops it leaving through a tool not cleared for it.

- :mod:`.levels`: the labels (public < internal < private) and each tool's classification.
- :mod:`.policy`: ``$LEV_HOME/policy.toml`` (allowlist, per-tool overrides), read and appended to.
- :mod:`.rules`: ``$LEV_HOME/rules/*.rhai``, the scripted rules.
- :mod:`.gate`: the decision on one call.

The engine labels each tool result with its tool's sensitivity (a region's label is the highest of
its entries', so it recovers as entries leave), asks the gate before an outbound call, and routes a
blocked call to the person like any approval (:meth:`lev_nb.engine.interaction.InteractionHub.taint_approve`).
"""

from __future__ import annotations

from .gate import TaintGate, Verdict, destinations
from .levels import DIRECTIONS, LEVELS, ToolClass, builtin_class, highest, is_level, rank
from .policy import (
    AllowRule, Override, Policy, PolicyError, add_rule, load_policy, pattern_matches, policy_path, rules_dir,
)
from .rules import RuleSet, load_rules

__all__ = [
    "AllowRule", "DIRECTIONS", "LEVELS", "Override", "Policy", "PolicyError", "RuleSet", "TaintGate",
    "ToolClass", "Verdict", "add_rule", "builtin_class", "destinations", "highest", "is_level",
    "load_policy", "load_rules", "pattern_matches", "policy_path", "rank", "rules_dir",
]
