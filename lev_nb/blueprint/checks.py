"""Hard validation of a parsed blueprint (docs/blueprint.md#validation-and-lints): the first failure
refuses it.

Checks run in upstream order and walk stages and edges in declaration order, so the failure
reported for a blueprint with several problems is deterministic.
"""

from __future__ import annotations

from pathlib import Path

from . import constants as C
from .errors import BlueprintError, locate_key
from .model import Blueprint, Region
from lev_nb.workspace import PathEscape, confine

_U64 = (1 << 64) - 1


def _fail(bp: Blueprint, message: str, key_path: list[str], hint: str | None = None) -> BlueprintError:
    loc = locate_key(bp.source_text, key_path) if bp.source_text else None
    return BlueprintError(
        message, path=bp.source_path, key_path=".".join(key_path) or None,
        line=loc[0] if loc else None, column=loc[1] if loc else None, hint=hint, kind="validation",
    )


def layout_problem(regions: dict[str, Region]) -> str | None:
    """Why a layout leaves too little working room, or None when it is fine."""
    if any(r.is_percentage for r in regions.values()):
        return None
    total = sum(r.effective_max_tokens for r in regions.values()) & _U64
    fixed = sum(r.effective_max_tokens for r in regions.values() if r.is_fixed) & _U64
    working = (total - fixed) & _U64
    if total >= C.LAYOUT_CHECK_FLOOR and working < C.LAYOUT_MIN_WORKING_TOKENS:
        return (f"Invalid layout: the context layout leaves only {working} working tokens once the fixed "
                f"regions ({fixed} tokens) are set aside; at least {C.LAYOUT_MIN_WORKING_TOKENS} are needed")
    return None


def has_terminal_path(bp: Blueprint) -> bool:
    """Depth-first search from the entry for a stage where the run can end (docs/concepts.md#transitions)."""
    names = bp.stage_names
    stack = [bp.entry_stage]
    seen: set[str] = set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        stage = bp.stages.get(name)
        if stage is None:
            continue
        if stage.mode == "fan_out" and stage.merge_stage:
            stack.append(stage.merge_stage)
        elif stage.transitions is None:
            i = names.index(name)
            if i + 1 >= len(names):
                return True
            stack.append(names[i + 1])
        elif not stage.transitions:
            return True
        else:
            stack.extend(reversed(list(stage.transitions)))
    return False


def check(bp: Blueprint) -> None:
    """Raise :class:`BlueprintError` (kind "validation") for the first rule ``bp`` breaks
    (docs/blueprint.md#validation-and-lints)."""
    problem = layout_problem(bp.global_layout)
    if problem:
        raise _fail(bp, problem, ["context", "regions"])

    for name, st in bp.stages.items():
        kp = ["stages", name]
        if not name.strip():
            raise _fail(bp, "Invalid stage: a stage name must not be empty", kp)
        for tool in st.required_tools:
            if tool not in st.available_tools:
                raise _fail(bp, f"Invalid stage '{name}': required_tools entry '{tool}' is not in available_tools",
                            kp + ["required_tools"], hint=f"add '{tool}' to available_tools or drop it")
        if st.require_output and "submit_output" not in st.available_tools:
            raise _fail(bp, f"Invalid stage '{name}': require_output is set but 'submit_output' is not in "
                            "available_tools", kp + ["require_output"],
                        hint="grant submit_output, or use mode = \"output\" which grants it")
        if st.own_layout is not None:
            problem = layout_problem(st.own_layout)
            if problem:
                raise _fail(bp, f"stage '{name}': {problem}", kp + ["context", "regions"])

    global_names = set(bp.global_layout)
    for i, spec in enumerate(bp.transforms):
        for mapping in spec.mappings:
            if mapping.to_region not in global_names:
                raise _fail(bp, f"Invalid region '{mapping.to_region}': transform target region not found in "
                                "the global layout", ["transforms"])

    _check_counts(bp)
    _check_graph(bp)
    _check_region_refs(bp)


def _check_counts(bp: Blueprint) -> None:
    """Refuse counts no plan needs (a gate re-asked a million times spins its stage): each has an
    upper bound (constants.MAX_*), and a region's max_tokens must leave room for something."""
    def over(value: int | None, bound: int, what: str, kp: list[str]) -> None:
        if value is not None and value > bound:
            raise _fail(bp, f"Invalid {what}: {value} is more than the {bound} lev_nb allows", kp,
                        hint=f"use a number from 0 to {bound}")

    def no_room(regions: dict[str, Region], kp: list[str]) -> None:
        for region_name, region in regions.items():
            if region.max_tokens is not None and region.max_tokens <= 0:
                raise _fail(bp, f"Invalid region '{region_name}': max_tokens = {region.max_tokens} leaves it no room",
                            kp + [region_name, "max_tokens"], hint="give it at least 1 token, or remove the region")

    no_room(bp.global_layout, ["context", "regions"])
    for name, st in bp.stages.items():
        kp = ["stages", name]
        if st.own_layout is not None:
            no_room(st.own_layout, kp + ["context", "regions"])
        over(st.max_iterations, C.MAX_STAGE_ITERATIONS, f"stage '{name}': max_iterations", kp + ["max_iterations"])
        over(st.max_revisits, C.MAX_STAGE_REVISITS, f"stage '{name}': max_revisits", kp + ["max_revisits"])
        if st.mode == "fan_out":
            over(st.max_attempts, C.MAX_FAN_OUT_ATTEMPTS, f"stage '{name}': max_attempts", kp + ["max_attempts"])
        for target, edge in (st.transitions or {}).items():
            if edge.gate is not None:
                over(edge.gate.max_attempts, C.MAX_GATE_ATTEMPTS,
                     f"gate on the transition from '{name}' to '{target}': max_attempts",
                     kp + ["transitions", target, "gate", "max_attempts"])


def _check_graph(bp: Blueprint) -> None:
    if bp.agent.entry_stage is not None and bp.agent.entry_stage not in bp.stages:
        raise _fail(bp, f"Invalid graph: entry_stage '{bp.agent.entry_stage}' does not match any defined stage",
                    ["agent", "entry_stage"], hint=_close(bp.agent.entry_stage, bp.stage_names))
    for name, st in bp.stages.items():
        if st.mode != "fan_out":
            continue
        kp = ["stages", name]
        targets = [k for k in ("worker_agent", "worker_stage", "worker_query") if getattr(st, k) is not None]
        if len(targets) != 1:
            raise _fail(bp, f"Invalid stage '{name}': a fan_out stage must set exactly one of worker_agent, "
                            "worker_stage or worker_query", kp + ["mode"])
        if st.worker_stage is not None:
            worker = bp.stages.get(st.worker_stage)
            if worker is None:
                raise _fail(bp, f"Invalid stage '{name}': worker_stage '{st.worker_stage}' does not exist",
                            kp + ["worker_stage"], hint=_close(st.worker_stage, bp.stage_names))
            if not worker.allow_as_worker:
                raise _fail(bp, f"Invalid stage '{name}': worker_stage '{st.worker_stage}' must set "
                                "allow_as_worker = true", kp + ["worker_stage"])
        if st.merge_stage is not None and st.merge_stage not in bp.stages:
            raise _fail(bp, f"Invalid stage '{name}': merge_stage '{st.merge_stage}' does not exist",
                        kp + ["merge_stage"], hint=_close(st.merge_stage, bp.stage_names))
    if not bp.is_graph_mode:
        return
    for name, st in bp.stages.items():
        for target, edge in (st.transitions or {}).items():
            kp = ["stages", name, "transitions", target]
            if target not in bp.stages:
                raise _fail(bp, f"Invalid transition from '{name}' to '{target}': target stage does not exist",
                            kp, hint=_close(target, bp.stage_names))
            if edge.condition == "stuck" and not edge.stuck_thresholds:
                raise _fail(bp, f"Invalid transition from '{name}' to '{target}': a stuck edge needs a threshold",
                            kp)
            gate = edge.gate
            if gate is not None and gate.require_modifications:
                modifying = set(C.MODIFYING_TOOLS) | set(gate.tools)
                if not any(t in modifying for t in st.available_tools):
                    raise _fail(bp, f"Invalid transition from '{name}' to '{target}': the gate requires "
                                    "modifications, but the stage has no file-modifying tool in available_tools",
                                kp + ["gate"], hint="grant write_file or edit_file, or list the tool in gate.tools")
            if target == name and st.max_revisits is None:
                raise _fail(bp, f"Invalid stage '{name}': a self-loop transition requires max_revisits",
                            kp, hint="set max_revisits on the stage")
    if not has_terminal_path(bp):
        raise _fail(bp, "Invalid graph: no terminal path exists from the entry stage, so the agent would "
                        "never complete", ["stages"],
                    hint="give some reachable stage an empty [stages.X.transitions] table")


def _check_region_refs(bp: Blueprint) -> None:
    known = bp.known_regions
    checklists = {n for n, r in bp.global_layout.items() if r.kind == "checklist"}
    for st in bp.stages.values():
        for n, r in (st.own_layout or {}).items():
            if r.kind == "checklist":
                checklists.add(n)
    for name, st in bp.stages.items():
        if st.tool_routing is not None:
            visible = bp.visible_regions(st)
            for key, region in st.tool_routing.target_regions():
                if region not in visible:
                    raise _fail(bp, f"Invalid stage '{name}': tool_routing.{key} sends results to region "
                                    f"'{region}', which this stage's context does not include",
                                ["stages", name, "tool_routing"] + key.split(".", 1),
                                hint=_close(region, sorted(visible)))
        for target, edge in (st.transitions or {}).items():
            gate = edge.gate
            if gate is None:
                continue
            kp = ["stages", name, "transitions", target, "gate"]
            for key in ("region", "require_region_updated", "require_no_open_items"):
                region = getattr(gate, key)
                if region is not None and region not in known:
                    raise _fail(bp, f"Invalid stage '{name}': transition to '{target}': gate.{key} names region "
                                    f"'{region}', which no stage declares", kp + [key],
                                hint=_close(region, sorted(known)))
            if gate.require_no_open_items is not None and gate.require_no_open_items not in checklists:
                raise _fail(bp, f"Invalid stage '{name}': transition to '{target}': gate.require_no_open_items "
                                f"names '{gate.require_no_open_items}', which is not a checklist region",
                            kp + ["require_no_open_items"], hint="set kind = \"checklist\" on that region")


def _close(word: str, choices: list[str]) -> str | None:
    from .errors import did_you_mean

    return did_you_mean(word, choices)


def check_region_scripts(bp: Blueprint) -> None:
    """What ``lev validate`` checks of custom-region scripts, without compiling: every one must
    resolve inside the agent folder and be readable. (Compiling them is :mod:`lev_nb.scripting.checks`' job.)"""
    base = bp.base_dir
    if base is None:
        return
    layouts = [("context.regions", bp.global_layout)] + [
        (f"stages.{n}.context.regions", st.own_layout) for n, st in bp.stages.items() if st.own_layout
    ]
    seen: set[str] = set()
    for prefix, layout in layouts:
        for rname, region in layout.items():
            if region.kind != "custom" or not region.script or region.script in seen:
                continue
            seen.add(region.script)
            kp = prefix.split(".") + [rname, "script"]
            try:
                resolved = confine(base, region.script)
            except PathEscape:
                raise _fail(bp, f"region '{rname}': custom region script '{region.script}' resolves outside "
                                "the blueprint's directory", kp) from None
            try:
                Path(resolved).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise _fail(bp, f"region '{rname}': cannot read custom region script '{region.script}': {exc}",
                            kp) from None
