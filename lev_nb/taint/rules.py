"""The scripted rules of ``$LEV_HOME/rules/*.rhai``, consulted after the static allowlist: the
first rule that allows a call wins (upstream rhai-tools.md). Compiled through
:mod:`lev_nb.scripting.rules`; a rule that cannot be read or compiled is left out and reported, one
that fails while deciding counts as no match and is reported. Reports name the file."""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from lev_nb.records import record
from lev_nb.scripting import ScriptError
from lev_nb.scripting.rules import RuleScript, compile_rule

__all__ = ["MAX_RULES", "RuleSet", "load_rules"]

MAX_RULES = 200
MAX_RULE_BYTES = 256 * 1024


@record(frozen=False)
class RuleSet:
    """The usable rules in name order, and what was wrong with the others (one line each)."""

    rules: list[RuleScript] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    folder: Path | None = None

    def first_allowing(self, tool: str, targets: list[str], level: str) -> tuple[str | None, list[str]]:
        """The name of the first rule that allows ``tool`` to carry ``level`` data to every one of
        ``targets`` (one evaluation per target; none: one with target ""), and the failures met on
        the way (each naming its file)."""
        failures: list[str] = []
        for rule in self.rules:
            try:
                if all(rule.allows({"tool": tool, "target": t, "taint_level": level}) for t in (targets or [""])):
                    return rule.name, failures
            except ScriptError as exc:
                failures.append(f"policy rule {rule.label} failed, so it did not allow the call: "
                                f"{' '.join(exc.message.split())}")
        return None, failures


def load_rules(folder: Path) -> RuleSet:
    """Compile every ``*.rhai`` in ``folder`` (none, or no folder: an empty set)."""
    out = RuleSet(folder=folder)
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".rhai")
    except FileNotFoundError:
        return out
    except OSError as exc:
        out.problems.append(f"cannot list the policy rules in {folder}: {exc.strerror or exc}")
        return out
    if len(files) > MAX_RULES:
        out.problems.append(f"{folder} holds {len(files)} rules; only the first {MAX_RULES} are read")
        files = files[:MAX_RULES]
    for file in files:
        try:
            if not file.is_file():
                out.problems.append(f"policy rule {file} is not a file; it was skipped")
                continue
            if file.stat().st_size > MAX_RULE_BYTES:
                out.problems.append(f"policy rule {file} is larger than {MAX_RULE_BYTES} bytes; it was skipped")
                continue
            out.rules.append(compile_rule(file))
        except ScriptError as exc:
            out.problems.append(f"policy rule {file} cannot be used: {' '.join(exc.message.split())}")
        except OSError as exc:
            out.problems.append(f"policy rule {file} cannot be read: {exc.strerror or exc}")
    return out
