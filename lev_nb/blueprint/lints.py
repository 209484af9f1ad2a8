"""The lint catalogue of ``lev validate`` (docs/blueprint.md#validation-and-lints): the 33 upstream
codes and lev_nb's own, run on a valid blueprint (and, after them, the checks of :mod:`.lints_own`).

Agent-level checks (A1-A19) run first in catalogue order, then lev_nb's own (X1 ``unknown-key``: a
key a lenient table keeps but nothing reads, with a "did you mean"; X2 ``output-format-typo``: a
format label one keystroke from a format lev_nb checks; X3 ``taint-tracking-invalid``: a
``[security] taint_tracking`` that is not true or false), then each stage's checks (S1-S14, and lev_nb's
MCP check: ``server__tool`` grants and connectors against the configured servers, code
``unknown-tool`` as a warning) in stage order; :func:`lint` returns them sorted errors, warnings, notes.

The environment (:class:`LintEnv`) is explicit. lev_nb's default (``LintEnv.for_blueprint``):
known tools = the built-in tools and aliases, the sub-agent tools and the agent's own
``tools/*.rhai`` names; known models and windows = the built-in model table (closed catalogues:
anthropic, openai, google); the user's config is *unknown*, so the provider-reachability check
(no-reachable-provider) is skipped and the read-paths / safe-commands notes take their
"not checked" forms. ``lev validate`` and ``lev_nb.validate`` fill the config-dependent fields
from the user's ``config.toml`` (:func:`lev_nb.settings.lint_env`). lev_nb does not read
``~/.leviath``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import field


from lev_nb.records import record

from . import constants as C
from .errors import did_you_mean
from .formats import format_typo
from .lints_own import OWN_CHECKS, OWN_CODES, format_key_typos
from .mcp_names import split_qualified
from .model import Blueprint, OutputSpec, Region, Stage
from .table import Table
from .read_paths import grant_stanza, toml_key
from .report import Finding, Severity, sort_findings
from .shellkeys import is_valid_prefix, seed_refusal
from .script_tools import script_tool_names


@record
class LintEnv:
    """What the lints may assume about the machine.

    ``available_providers`` None means the config is unknown (skips no-reachable-provider).
    ``read_path_granted`` (entry -> True/False/None) is the config's read_paths grant report, or
    None when unknown; ``read_paths_allow_blueprint`` says every entry is granted wholesale by
    ``[security] allow_blueprint_read_paths``; ``read_paths_grant_error`` replaces the report when
    the config's grants do not compile. ``safe_commands_honoured`` None = unknown, False = the
    config refuses blueprint safe commands. :func:`lev_nb.settings.lint_env` builds these from the
    user's configuration.
    """

    known_tools: frozenset[str] = frozenset()
    known_models: frozenset[tuple[str, str]] = frozenset()
    model_windows: dict[tuple[str, str], int] = field(default_factory=dict)
    available_providers: frozenset[str] | None = None
    # The configured default model (``provider/model``), and per stage the model it would start on
    # here (the default or a [providers] fallback_order entry) or None when that one's provider is
    # not configured either; both None when the configuration is unknown (no-reachable-provider).
    default_model: str | None = None
    start_model: Callable[[str], str | None] | None = None
    read_path_granted: Callable[[str], bool | None] | None = None
    read_paths_grant_error: str | None = None
    read_paths_allow_blueprint: bool = False
    safe_commands_honoured: bool | None = None
    # The policy the configuration holds a tool to ("allow" | "ask" | "deny"; None: the blueprint
    # may set it freely); None as a whole when the configuration is unknown (permission-capped).
    permission_ceiling: Callable[[str], str | None] | None = None
    # The configured MCP servers: configured name and advertised prefix -> the advertised names of
    # their tools (None: not asked, ``lev validate`` without --remote); None: configuration unknown.
    mcp_servers: dict[str, frozenset[str] | None] | None = None
    # The shell entries [safe_commands] gives this agent (None: unknown, the built-in list is
    # assumed), and whether [security] allow_seed_commands lets command seeds run at all.
    safe_shell: frozenset[str] | None = None
    seed_commands_allowed: bool = True
    # Script tools (the agent's and the global ones) this machine cannot offer: name -> why
    # (a @requires capability it lacks, lev_nb.settings.capabilities); empty when unknown.
    unavailable_tools: dict[str, str] = field(default_factory=dict)

    @classmethod
    def default(cls, extra_tools: Iterable[str] = ()) -> LintEnv:
        """Built-in tools (+ aliases, sub-agent tools, ``extra_tools``) and the built-in model table."""
        tools = set(C.BUILTIN_TOOLS) | set(C.TOOL_ALIASES) | set(C.SUBAGENT_TOOLS) | set(extra_tools)
        closed = frozenset(k for k in C.MODEL_WINDOWS if k[0] in C.CLOSED_CATALOG_PROVIDERS)
        return cls(known_tools=frozenset(tools), known_models=closed, model_windows=dict(C.MODEL_WINDOWS))

    @classmethod
    def for_blueprint(cls, bp: Blueprint) -> LintEnv:
        """The default environment plus the blueprint's own ``tools/*.rhai``."""
        return cls.default(script_tool_names(bp.base_dir))


def lint(bp: Blueprint, env: LintEnv | None = None) -> list[Finding]:
    """Every lint finding for ``bp`` (which must already have passed the hard checks), sorted."""
    env = env if env is not None else LintEnv.for_blueprint(bp)
    out: list[Finding] = []
    for agent_check in AGENT_CHECKS:
        out.extend(agent_check(bp, env))
    for stage in bp.stages.values():
        for stage_check in STAGE_CHECKS:
            out.extend(stage_check(bp, stage, env))
    return sort_findings(out)


def _f(
    code: str, severity: Severity, message: str, fix: str | None, stage: str | None = None
) -> Finding:
    return Finding(code=code, severity=severity, message=message, stage=stage, fix=fix)


def _raw_global_regions(bp: Blueprint) -> dict:
    ctx = bp.raw.get("context")
    regions = ctx.get("regions") if isinstance(ctx, dict) else None
    return regions if isinstance(regions, dict) else {}


# ------------------------------------------------------------------------------------------------
# Agent-level checks (A1-A19)
# ------------------------------------------------------------------------------------------------
def a1_model_block_ignored(bp: Blueprint, env: LintEnv) -> list[Finding]:
    if isinstance(bp.raw.get("model"), dict):
        return [_f("agent-model-block-ignored", "warning",
                   "the top-level [model] table is never read: each stage picks its own model",
                   "move the model choice into each stage as [stages.<name>.model]")]
    return []


def a2_seed_not_understood(bp: Blueprint, env: LintEnv) -> list[Finding]:
    out = []
    for name, raw in _raw_global_regions(bp).items():
        region = bp.context.regions.get(name)
        if isinstance(raw, dict) and "seed" in raw and region is not None and region.seed is None:
            out.append(_f("region-seed-not-understood", "warning",
                          f"region '{name}' has a seed lev_nb cannot read, so the seed is dropped and the "
                          "region starts empty",
                          "use a caller key string, or a table with one of glob, files, literal, rhai, command, "
                          "tool, tools or caller"))
    return out


def a3_command_seed(bp: Blueprint, env: LintEnv) -> list[Finding]:
    items = []
    safe = env.safe_shell if env.safe_shell is not None else C.DEFAULT_SAFE_SHELL
    for name, r in bp.context.regions.items():
        if r.seed is not None and r.seed.kind == "command":
            cmd = r.seed.value or ""
            refusal = seed_refusal(cmd, safe)
            if not env.seed_commands_allowed:
                status = "refused: your config.toml sets [security] allow_seed_commands = false"
            elif refusal is None:
                status = "pre-approved"
            else:
                status = f"NOT pre-approved ({refusal}), so it will be refused"
            items.append(f"{name}: {cmd} ({status})")
    if not items:
        return []
    return [_f("command-seed", "note",
               f"{len(items)} region(s) run a shell command when the run starts, before the first inference "
               f"and before any approval prompt: {'; '.join(items)}",
               "a command seed runs only when [safe_commands] covers every command it runs (nobody can be "
               "asked at spawn); add the programs to [safe_commands] shell in your config.toml, or refuse "
               "them for one run with lev run --no-seed-commands")]


def a4_tool_seed(bp: Blueprint, env: LintEnv) -> list[Finding]:
    items = []
    for name, r in bp.context.regions.items():
        if r.seed is not None and r.seed.kind == "tools":
            tools = ", ".join(t.name for t in r.seed.tools)
            suffix = " (on every stage entry)" if r.seed.refresh == "each_stage" else ""
            items.append(f"{name}: {tools}{suffix}")
    if not items:
        return []
    return [_f("tool-seed", "note",
               f"{len(items)} region(s) call tools when the run starts, before the first inference and without "
               f"an approval prompt: {'; '.join(items)}",
               "check that these tools are safe to call on every launch")]


def a5_a6_a7_read_paths(bp: Blueprint, env: LintEnv) -> list[Finding]:
    entries = bp.read_paths.allow if bp.read_paths is not None else []
    if not entries:
        return []
    if env.read_paths_grant_error is not None:
        return [_f("read-paths-grant-invalid", "warning",
                   f"the read_paths grant in your config.toml does not compile: {env.read_paths_grant_error}",
                   f"fix or remove the entry in your config.toml ([security] read_paths or "
                   f"[agent_read_paths.{toml_key(bp.agent.name)}])")]
    if env.read_path_granted is None:
        return [_f("read-paths-declared", "note",
                   f"declares [read_paths] (reads outside the run's workdir): {', '.join(entries)}",
                   "these reads do nothing until your config.toml grants them under "
                   f"[agent_read_paths.{bp.agent.name}]")]
    status = [(e, env.read_path_granted(e)) for e in entries]
    granted = sum(1 for _, v in status if v is True)
    words = {True: "granted", False: "NOT granted", None: "cannot be checked from the pattern alone"}
    fix = ("every entry is granted by [security] allow_blueprint_read_paths = true" if env.read_paths_allow_blueprint
           else "; ".join(f"{e}: {words[v]}" for e, v in status))
    out = [_f("read-paths-declared", "note",
              f"declares [read_paths] (reads outside the run's workdir): {len(entries)} declared, {granted} granted",
              fix)]
    refused = [e for e, v in status if v is False]
    if refused:
        out.append(_f("read-paths-not-granted", "warning",
                      f"your config does not grant {', '.join(refused)}: reads matching them will be refused",
                      "add to your config.toml: " + grant_stanza(bp.agent.name, refused).replace("\n", " ")))
    return out


def _is_broad(entry: str) -> bool:
    pattern = entry
    for prefix in ("glob:", "regex:"):
        if pattern.startswith(prefix):
            pattern = pattern[len(prefix):]
            break
    pattern = pattern.replace("\\", "/")
    trimmed = pattern.rstrip("/")
    return trimmed in ("~", "", "/**", "/.+") or pattern.startswith("**") or pattern.startswith("/.*")


def a8_broad_read_path(bp: Blueprint, env: LintEnv) -> list[Finding]:
    entries = bp.read_paths.allow if bp.read_paths is not None else []
    return [_f("broad-read-path", "warning",
               f"read_paths entry '{e}' is very broad: it would let the agent read almost anything on the machine",
               "narrow it to the folders the agent actually needs")
            for e in entries if _is_broad(e)]


def a9_unparseable_safe_command(bp: Blueprint, env: LintEnv) -> list[Finding]:
    entries = bp.safe_commands.shell if bp.safe_commands is not None else []
    return [_f("unparseable-safe-command", "error",
               f"[safe_commands] shell entry '{e}' is not a bare command prefix, so no call can ever match it",
               "write a program and at most one subcommand, e.g. \"cargo test\", with no flags, pipes or redirects")
            for e in entries if not is_valid_prefix(e)]


def a10_safe_commands_declared(bp: Blueprint, env: LintEnv) -> list[Finding]:
    sc = bp.safe_commands
    if sc is None or not (sc.tools or sc.shell) or env.safe_commands_honoured:
        return []
    if env.safe_commands_honoured is False:
        msg = "declares [safe_commands], but your config does not honour blueprint safe commands, so none of it applies"
    else:
        msg = ("declares [safe_commands]. Declaring is not granting: these only skip the approval prompt once "
               "your config opts in")
    return [_f("safe-commands-declared", "note", msg,
               f"if you trust this blueprint, set [agent_safe_commands.{toml_key(bp.agent.name)}] "
               "allow_blueprint = true in your config.toml, or [security] allow_blueprint_safe_commands = true "
               "for every agent")]


def a11_holds_under_yolo(bp: Blueprint, env: LintEnv) -> list[Finding]:
    out = []
    for name, st in bp.stages.items():
        if st.mode == "interactive_points":
            for point in st.interaction_points:
                if point.unattended == "ask":
                    out.append(_f("holds-under-yolo", "note",
                                  f"'{point.name}' still stops an unattended run for a person: an interaction "
                                  "point that declares unattended = \"ask\"",
                                  "that is fine if someone will be watching; use unattended = \"auto_approve\" "
                                  "otherwise", stage=name))
    for name, st in bp.stages.items():
        for tool in st.required_tools:
            if C.canon_tool(tool) in C.BLOCKING_TOOLS:
                out.append(_f("holds-under-yolo", "note",
                              f"'{tool}' still stops an unattended run for a person: a blocking tool the stage "
                              "keeps in required_tools",
                              "drop it from required_tools if unattended runs should not wait", stage=name))
    return out


def reachable_stages(bp: Blueprint) -> set[str]:
    """Stages reached from the entry over transition keys and fan-out worker/merge stages."""
    seen: set[str] = set()
    queue = [bp.entry_stage]
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        st = bp.stages.get(name)
        if st is None:
            continue
        nexts = list(st.transitions or {})
        if st.mode == "fan_out":
            nexts += [s for s in (st.worker_stage, st.merge_stage) if s is not None]
        queue.extend(n for n in nexts if n in bp.stages and n not in seen)
    return seen


def a12_unreachable_stage(bp: Blueprint, env: LintEnv) -> list[Finding]:
    if not bp.is_graph_mode:
        return []
    reached = reachable_stages(bp)
    return [_f("unreachable-stage", "warning", f"cannot be reached from entry stage '{bp.entry_stage}'",
               "add a transition into it, or remove the stage", stage=name)
            for name in bp.stages if name not in reached]


def a13_cycle_without_max_revisits(bp: Blueprint, env: LintEnv) -> list[Finding]:
    if not bp.is_graph_mode:
        return []
    out = []
    for name, st in bp.stages.items():
        for target in st.transitions or {}:
            other = bp.stages.get(target)
            if (target != name and other is not None and other.transitions is not None
                    and name in other.transitions and other.max_revisits is None):
                out.append(_f("cycle-without-max-revisits", "warning",
                              f"is in a cycle with '{name}' and has no max_revisits",
                              "set max_revisits so the loop cannot run forever", stage=target))
    return out


def a14_a15_output(bp: Blueprint, env: LintEnv) -> list[Finding]:
    outputs = bp.output_stages
    if not outputs:
        return []
    out = []
    first = bp.stage_names[0] if bp.stages else None
    for o in outputs:
        reached = any(n != o and o in (st.transitions or {}) for n, st in bp.stages.items())
        if not reached and o != bp.agent.entry_stage and o != first:
            out.append(_f("output-unreachable", "error",
                          "is an output stage no edge routes to, so the run can never produce one",
                          f"add a transition to '{o}' from the stage that finishes the work", stage=o))
    for name, st in bp.stages.items():
        if st.allow_complete and st.mode != "output":
            out.append(_f("allow-complete-skips-output", "warning",
                          "may end the run itself, so the model can finish here and never reach the output stage",
                          "remove allow_complete and route to the output stage instead", stage=name))
    return out


def a16_dead_end_possible(bp: Blueprint, env: LintEnv) -> list[Finding]:
    out = []
    for name, st in bp.stages.items():
        if not st.transitions:
            continue
        normal = st.normal_edges
        if not normal:
            continue

        def capped(target: str) -> bool:
            other = bp.stages.get(target)
            return other is None or other.max_revisits is not None

        if not all(capped(e.target) for e in normal):
            continue
        escape = any(e.condition in ("dead_end", "error") and e.target in bp.stages
                     and bp.stages[e.target].max_revisits is None for e in st.edges)
        if not escape:
            out.append(_f("dead-end-possible", "warning",
                          "can strand the run: every normal transition's target has a max_revisits budget, and "
                          "no dead_end or error transition leads to an uncapped stage",
                          "add a condition = \"dead_end\" transition to a stage that can finish the run",
                          stage=name))
    return out


def a17_compact_summarizes_deliverable(bp: Blueprint, env: LintEnv) -> list[Finding]:
    out, seen = [], set()
    for st in bp.stages.values():
        if not any(e.transform in ("compact", "summarize") for e in st.edges):
            continue
        for rname, r in bp.layout_for(st).items():
            if r.required and r.summarizable and r.is_stage_specific and rname not in seen:
                seen.add(rname)
                out.append(_f("compact-summarizes-deliverable", "warning",
                              f"region '{rname}' is declared required, a deliverable, but a transform = "
                              "\"compact\" edge would hand it to the summarizer and carry only a summary",
                              f"set summarizable = false on '{rname}', or use a custom transform that carries it"))
    return out


def a18_required_region_unenforceable(bp: Blueprint, env: LintEnv) -> list[Finding]:
    out, seen = [], set()
    for st in bp.stages.values():
        for rname, r in bp.layout_for(st).items():
            if not r.required or r.caller_key is not None or rname in seen:
                continue
            seen.add(rname)
            writers = [s for s in bp.stages.values() if rname in bp.layout_for(s)
                       and ({"context_write", "context_append"} & set(s.available_tools))]
            if not writers:
                out.append(_f("required-region-unenforceable", "warning",
                              f"region '{rname}' is declared required, but no stage that uses it grants "
                              "context_write or context_append, so nothing can fill it. The flag has no effect",
                              "grant context_write or context_append to the stage that should fill it"))
    return out


def _largest_window(bp: Blueprint, env: LintEnv) -> tuple[str, int] | None:
    best: tuple[str, int] | None = None
    for st in bp.stages.values():
        for ref in st.models:
            window = env.model_windows.get((ref.provider, ref.model))
            if window is not None and (best is None or window >= best[1]):
                best = (ref.spec, window)
    return best


def a19_unbounded_percentage_budget(bp: Blueprint, env: LintEnv) -> list[Finding]:
    best = _largest_window(bp, env)
    if best is None:
        return []
    model, window = best
    layouts: list[dict[str, Region]] = [bp.global_layout]
    layouts += [st.own_layout for st in bp.stages.values() if st.own_layout]
    out, seen = [], set()
    for layout in layouts:
        for rname, r in layout.items():
            if (r.is_percentage and r.max_tokens is None and r.kind in C.EVICTING_KINDS
                    and rname not in seen):
                seen.add(rname)
                tokens = r.resolve_budget(window)
                out.append(_f("unbounded-percentage-budget", "warning",
                              f"region '{rname}' evicts at its bound, and its budget \"{r.budget}\" resolves to "
                              f"{tokens:,} tokens on {model} ({window:,} window) - on a large window it hoards "
                              "instead of evicting",
                              f"add max_tokens to '{rname}' to cap it"))
    return out


# ------------------------------------------------------------------------------------------------
# lev_nb's own checks: a lenient table's unknown keys, and a misspelt output format
# ------------------------------------------------------------------------------------------------
def _is_lenient(obj: object) -> bool:
    return isinstance(obj, Table) and obj.model_config.get("extra") == "allow"


def _table_keys(model: Table) -> list[str]:
    """The keys a table of this model's type may hold, as the TOML spells them."""
    return [f.alias or name for name, f in type(model).model_fields.items() if not f.exclude]


def _unknown_keys(obj: object, path: tuple[str, ...], seen: set[int]) -> Iterable[tuple[tuple[str, ...], str, list[str]]]:
    """(table path, unknown key, the table's keys) for every key a lenient table kept unread."""
    if not isinstance(obj, Table) or id(obj) in seen:
        return
    seen.add(id(obj))
    if _is_lenient(obj):
        for key in obj.model_extra or {}:
            yield path, key, _table_keys(obj)
    for name, f in type(obj).model_fields.items():
        if f.exclude:
            continue
        value = getattr(obj, name)
        here = path + (f.alias or name,)
        if isinstance(value, Table):
            yield from _unknown_keys(value, here, seen)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield from _unknown_keys(item, here[:-1] + (f"{here[-1]}[{index}]",), seen)
        elif isinstance(value, dict):
            for key, item in value.items():
                yield from _unknown_keys(item, here + (str(key),), seen)


def x1_unknown_key(bp: Blueprint, env: LintEnv) -> list[Finding]:
    """Lenient tables load whatever they are given, as upstream does; a key nothing reads is most
    often a misspelling (``[agent] nmae``, a region's ``max_token``), so it is named, with a guess."""
    out = []
    typos = {(tuple(where.split(".")), key) for _, where, key in format_key_typos(bp)}
    for path, key, known in _unknown_keys(bp, (), set()):
        if not path and key == "model":
            continue  # the top-level [model] table has its own finding (agent-model-block-ignored)
        if (path, key) in typos:
            continue  # an error of its own (output-format-key-typo)
        where = f"[{'.'.join(path)}]" if path else "the top level"
        hint = did_you_mean(key, [k for k in known if k != "name" or path == ("agent",)])
        stage = path[1] if len(path) > 1 and path[0] == "stages" else None
        fix = hint or f"remove it; the keys read here are {', '.join(known)}"
        out.append(_f("unknown-key", "warning",
                      f"{where} has the key '{key}', which nothing reads, so it is ignored", fix, stage=stage))
    return out


def x2_output_format_typo(bp: Blueprint, env: LintEnv) -> list[Finding]:
    """A format label one keystroke from a format lev_nb checks (``cvs``) is a mistake: answers in it
    would go unchecked. Any other label is the author's own and allowed (``formats.format_typo``)."""
    specs: list[tuple[str | None, str, OutputSpec | None]] = [(None, "agent.output", bp.agent.output)]
    specs += [(name, f"stages.{name}.output", st.output) for name, st in bp.stages.items()]
    out = []
    for stage, where, spec in specs:
        label = spec.format if spec is not None else None
        meant = format_typo(label)
        if meant is not None:
            out.append(_f("output-format-typo", "error",
                          f"{where}.format = \"{label}\" looks like a misspelling of \"{meant}\", so answers "
                          "would not be checked as " + meant,
                          f"write format = \"{meant}\" (a label of your own is fine, but not one a keystroke "
                          "away from a format lev_nb checks)", stage=stage))
    return out


def x3_taint_tracking_invalid(bp: Blueprint, env: LintEnv) -> list[Finding]:
    """``taint_tracking`` must be true or false. Like the upstream, a value that is neither leaves
    the block's default (on), which is safe but surely not what was meant, so it is an error."""
    tables: list[tuple[str | None, object]] = [(None, bp.raw.get("security"))]
    stages = bp.raw.get("stages")
    if isinstance(stages, dict):
        tables += [(name, st.get("security")) for name, st in stages.items() if isinstance(st, dict)]
    out = []
    for stage, table in tables:
        if not isinstance(table, dict) or "taint_tracking" not in table or isinstance(table["taint_tracking"], bool):
            continue
        where = f"[stages.{stage}.security]" if stage else "[security]"
        out.append(_f("taint-tracking-invalid", "error",
                      f"{where} taint_tracking = {table['taint_tracking']!r} is not true or false, so the block "
                      "keeps its default and taint tracking is on", "write taint_tracking = true or false",
                      stage=stage))
    return out


def a20_conversation_region(bp: Blueprint, env: LintEnv) -> list[Finding]:
    """The model's turns and tool results live in the ``conversation`` region, and only a
    sliding_window region is sent as messages (as upstream); any other kind flattens them into a
    system block, with no tool_use / tool_result pairing. A blueprint that declares none gets one
    added (sliding_window, 50 items, 10,000 tokens), as upstream: said as a note."""
    declared = {name: region for st in bp.stages.values() for name, region in bp.layout_for(st).items()}
    conversation = declared.get("conversation")
    if conversation is None:
        if not _raw_global_regions(bp):
            return []  # no regions declared at all: the built-in layout has its conversation
        return [_f("conversation-region-added", "note",
                   "no region is called 'conversation', so lev_nb adds one (sliding_window, 50 items, "
                   "10000 tokens) to carry the model's turns and tool results, as the upstream runtime does",
                   'declare conversation = { kind = "sliding_window", ... } to size it')]
    if conversation.kind != "sliding_window":
        return [_f("conversation-not-a-window", "warning",
                   f"region 'conversation' is a {conversation.kind} region: only a sliding_window is sent to "
                   "the model as messages, so its turns and tool results reach it flattened into a system "
                   "block, without tool_use / tool_result pairing",
                   'make it kind = "sliding_window"')]
    return []


AGENT_CHECKS: list[Callable[[Blueprint, LintEnv], list[Finding]]] = [
    a1_model_block_ignored, a2_seed_not_understood, a3_command_seed, a4_tool_seed,
    a5_a6_a7_read_paths, a8_broad_read_path, a9_unparseable_safe_command, a10_safe_commands_declared,
    a11_holds_under_yolo, a12_unreachable_stage, a13_cycle_without_max_revisits, a14_a15_output,
    a16_dead_end_possible, a17_compact_summarizes_deliverable, a18_required_region_unenforceable,
    a19_unbounded_percentage_budget, a20_conversation_region, x1_unknown_key, x2_output_format_typo, x3_taint_tracking_invalid,
    *OWN_CHECKS,
]


# ------------------------------------------------------------------------------------------------
# Per-stage checks (S1-S14)
# ------------------------------------------------------------------------------------------------
def _raw_stage(bp: Blueprint, name: str) -> dict | None:
    """The stage's table as written; {} for a stage written as a non-table (it declares nothing), and
    None for a stage the text does not write (the implicit one), which counts as declaring everything."""
    stages = bp.raw.get("stages")
    if not isinstance(stages, dict) or name not in stages:
        return None
    raw = stages[name]
    return raw if isinstance(raw, dict) else {}


def s1_s2_declared(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    raw = _raw_stage(bp, st.name)
    if raw is None:
        return []
    out = []
    if "mode" not in raw:
        out.append(_f("stage-missing-mode", "warning", "no mode is set, so the stage runs as autonomous",
                      "set mode = \"autonomous\" (or another mode) to say what you mean", stage=st.name))
    if "model" not in raw:
        out.append(_f("stage-missing-model", "warning",
                      f"no [stages.{st.name}.model] block, so the stage runs on whatever default_provider your "
                      "config names",
                      "give the stage a model = { models = [{ provider = \"...\", model = \"...\" }] }",
                      stage=st.name))
    return out


def s3_missing_max_iterations(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    if st.mode != "fan_out" and st.max_iterations is None:
        return [_f("stage-missing-max-iterations", "warning",
                   "no max_iterations, so the stage is unbounded unless your config sets [limits] "
                   "default_max_iterations", "set max_iterations on the stage", stage=st.name)]
    return []


def s4_unknown_tool(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    if not env.known_tools:
        return []
    return [_f("unknown-tool", "error",
               f"grants '{t}', which is not a built-in, a sub-agent tool, or one of this agent's own tools/*.rhai",
               "check the spelling, or add a tools/<name>.rhai script that defines it", stage=st.name)
            for t in st.available_tools if "__" not in t and t not in env.known_tools]


def s15_mcp_names(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    """``server__tool`` grants and ``available_connectors`` against the configured MCP servers (and
    their tool lists, when ``--remote`` asked them). A warning, code ``unknown-tool``: whether a
    server is installed is a fact about the machine, not the blueprint."""
    servers = env.mcp_servers
    if servers is None:
        return []
    out = []
    for t in st.available_tools:
        parts = split_qualified(t)
        if parts is None:
            continue
        if parts[0] not in servers:
            out.append(_f("unknown-tool", "warning",
                          f"grants '{t}', but no MCP server '{parts[0]}' is configured here, so it is not offered",
                          f"add the server ([[mcp_servers]] in config.toml: lev mcp add {parts[0]} --command ... "
                          "or --url ...), or check the spelling", stage=st.name))
            continue
        tools = servers[parts[0]]
        if tools is not None and t not in tools:
            hint = did_you_mean(t, sorted(tools))
            out.append(_f("unknown-tool", "warning",
                          f"grants '{t}', but MCP server '{parts[0]}' offers no such tool",
                          hint or f"it offers: {', '.join(sorted(tools)) or 'nothing'}", stage=st.name))
    for c in st.available_connectors:
        if c not in servers:
            out.append(_f("unknown-tool", "warning",
                          f"names the connector '{c}', but no MCP server '{c}' is configured here, so it grants "
                          "nothing", f"add the server (lev mcp add {c} ...), or check the spelling", stage=st.name))
    return out


def s5_orphan_permission(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    if st.available_connectors:
        return []
    # A shell redirect is a file write held to write_file's policy, so a stage with the shell may
    # set write_file's permission without offering the tool itself.
    shell = any(C.canon_tool(t) == "shell" for t in st.available_tools)
    return [_f("orphan-stage-permission", "error",
               f"sets a permission for '{t}', which it does not grant in available_tools - it reads as a grant "
               "and is not one", f"add '{t}' to available_tools, or remove the permission", stage=st.name)
            for t in st.tool_permissions
            if t not in st.available_tools and not (shell and C.canon_tool(t) == "write_file")]


def s6_routing_without_region_read(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    if st.available_connectors or st.tool_routing is None:
        return []
    routes_away = any(region != "conversation" for _, region in st.tool_routing.target_regions())
    tools = set(st.available_tools)
    if routes_away and tools & {"read_file", "read_files"} and "context_read" not in tools:
        return [_f("routing-without-region-read", "warning",
                   "routes tool output into a context region and grants a file-reading tool but not "
                   "'context_read', so the model may re-read files instead of the region",
                   "grant context_read to the stage", stage=st.name)]
    return []


def s7_blocking_in_autonomous(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    if st.mode != "autonomous" or st.allow_blocking_tools:
        return []
    required = {C.canon_tool(t) for t in st.required_tools}
    return [_f("blocking-tool-in-autonomous-stage", "warning",
               f"is autonomous but grants '{t}', which suspends the run until a person answers",
               "set allow_blocking_tools = true if a person will be there, or drop the tool", stage=st.name)
            for t in st.available_tools
            if C.canon_tool(t) in C.BLOCKING_TOOLS and C.canon_tool(t) not in required]


def s8_implicit_shell_policy(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    policies = set(st.tool_permissions) | set(bp.tool_permissions)
    return [_f("implicit-shell-policy", "warning",
               f"grants '{t}' with no permission set for it, so it defaults to ask - and a run with nobody "
               "to ask (no terminal, --unattended) has every call denied",
               f"set tool_permissions.{t} = \"allow\" or \"deny\" explicitly (or start the run with --allow {C.canon_tool(t)})",
               stage=st.name)
            for t in st.available_tools
            if C.canon_tool(t) == "shell" and not (C.tool_spellings(t) & policies)]


def s9_unknown_model(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    providers = {p for p, _ in env.known_models}
    return [_f("unknown-model", "warning", f"names {ref.spec}, which is not a model this build knows about",
               "check the model id against the provider's catalogue", stage=st.name)
            for ref in st.models
            if ref.provider in providers and (ref.provider, ref.model) not in env.known_models]


def s10_no_reachable_provider(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    if env.available_providers is None or not st.models:
        return []
    raw = _raw_stage(bp, st.name)
    if raw is not None and "model" not in raw:
        return []  # no list of its own: it runs on the default model, as stage-missing-model says
    if any(ref.provider in env.available_providers for ref in st.models):
        return []
    tried = ", ".join(dict.fromkeys(ref.provider for ref in st.models))
    unreachable = f"names no provider this install can reach (tried {tried})"
    fix = "configure one of these providers, or add a model from one you have"
    default = env.default_model
    start = env.start_model(st.name) if env.start_model is not None and st.model.allow_user_default else None
    if not st.model.allow_user_default:
        message = f"{unreachable}, and allow_user_default = false forbids a fallback, so it cannot start"
    elif env.start_model is None or default is None:
        message = f"{unreachable}, so it falls back to your default model"
    elif start == default:
        message = f"{unreachable}, so it falls back to your default model ({default})"
    elif start is not None:
        message = (f"{unreachable}, nor your default model ({default}), so it falls back to {start} from "
                   "[providers] fallback_order")
    else:
        message = (f"{unreachable}, nor your default model ({default}) or a [providers] fallback_order entry, "
                   "so it cannot start until one of them is configured")
        fix = "configure one of these providers or your default model's, or add a model from one you have"
    known = {*C.KNOWN_PROVIDERS, "mock", "scripted", *env.available_providers}
    misspelt = [f"'{ref.provider}' is no provider lev_nb knows ({hint})" for ref in dict.fromkeys(st.models)
                if ref.provider not in known and (hint := did_you_mean(ref.provider, sorted(known)))]
    if misspelt:
        fix = f"{'; '.join(dict.fromkeys(misspelt))}; else {fix}"
    return [_f("no-reachable-provider", "warning", message, fix, stage=st.name)]


def s11_output_missing_submit(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    if st.require_output and not any(C.canon_tool(t) == "submit_output" for t in st.available_tools):
        return [_f("output-missing-submit-tool", "error",
                   "must produce a final output but does not grant 'submit_output'",
                   "add submit_output to available_tools", stage=st.name)]
    return []


def s12_output_shape_not_required(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    if st.output is not None and not st.require_output:
        return [_f("output-shape-not-required", "warning",
                   "declares an output shape but is not required to produce one, so the shape may never be used",
                   "set require_output = true (and grant submit_output), or use mode = \"output\"", stage=st.name)]
    return []


def s13_output_stage_can_modify(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    if st.mode != "output":
        return []
    return [_f("output-stage-can-modify", "warning",
               f"is an output stage but grants '{t}', which changes the workspace",
               "do the changes in an earlier stage and keep the output stage read-only", stage=st.name)
            for t in st.available_tools if C.canon_tool(t) in C.MODIFYING_TOOLS]


def s14_fanout_no_escape(bp: Blueprint, st: Stage, env: LintEnv) -> list[Finding]:
    if st.mode == "fan_out" and st.on_worker_failure == "fail_all":
        if not any(e.condition in ("error", "dead_end") for e in st.edges):
            return [_f("fanout-no-escape", "warning",
                       "sets on_worker_failure = \"fail_all\" but declares no 'error' or 'dead_end' transition, "
                       "so one failed worker ends the whole run",
                       "add a condition = \"error\" transition to a recovery stage", stage=st.name)]
    return []


STAGE_CHECKS: list[Callable[[Blueprint, Stage, LintEnv], list[Finding]]] = [
    s1_s2_declared, s3_missing_max_iterations, s4_unknown_tool, s15_mcp_names, s5_orphan_permission,
    s6_routing_without_region_read, s7_blocking_in_autonomous, s8_implicit_shell_policy, s9_unknown_model,
    s10_no_reachable_provider, s11_output_missing_submit, s12_output_shape_not_required,
    s13_output_stage_can_modify, s14_fanout_no_escape,
]

ALL_CODES: tuple[str, ...] = (
    "agent-model-block-ignored", "region-seed-not-understood", "command-seed", "tool-seed",
    "read-paths-declared", "read-paths-not-granted", "read-paths-grant-invalid", "broad-read-path",
    "unparseable-safe-command", "safe-commands-declared", "holds-under-yolo", "unreachable-stage",
    "cycle-without-max-revisits", "output-unreachable", "allow-complete-skips-output", "dead-end-possible",
    "compact-summarizes-deliverable", "required-region-unenforceable", "unbounded-percentage-budget",
    "stage-missing-mode", "stage-missing-model", "stage-missing-max-iterations", "unknown-tool",
    "orphan-stage-permission", "routing-without-region-read", "blocking-tool-in-autonomous-stage",
    "implicit-shell-policy", "unknown-model", "no-reachable-provider", "output-missing-submit-tool",
    "output-shape-not-required", "output-stage-can-modify", "fanout-no-escape",
    # lev_nb's own (not upstream codes): see x1_unknown_key, x2_output_format_typo and x3
    "unknown-key", "output-format-typo", "taint-tracking-invalid", "conversation-region-added",
    "conversation-not-a-window",
    *OWN_CODES,  # lints_own: what cannot work as written, and permission-capped
)
