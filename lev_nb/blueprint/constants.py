"""Fixed tables of the blueprint format: key lists, enums, built-in tools, the model table.

These are facts of the upstream format (docs/reference/blueprint.md); lev_nb
keeps them in one place so the loader, the checks and the lints agree.
"""

from __future__ import annotations

DEFAULT_PROVIDER = "anthropic"
DEFAULT_MODEL = "claude-sonnet-4-6"
IMPLICIT_STAGE_NAME = "main"
MANIFEST_NAME = "agent.leviath"  # the blueprint file inside an agent folder

# --- stage / edge / gate / hook keys (strict tables) -------------------------------------------
STAGE_KEYS: tuple[str, ...] = (
    "accepts_messages", "allow_as_worker", "allow_blocking_tools", "allow_complete",
    "available_connectors", "available_tools", "batch_tool_hint", "context", "description",
    "hooks", "interaction_points", "max_attempts", "max_items", "max_iterations",
    "max_revisits", "max_workers", "merge_stage", "mode", "model", "nudge",
    "on_worker_failure", "output", "require_output", "required_tools", "requires_children",
    "results_region", "sandbox", "security", "shell_hint", "split_prompt", "system_prompt",
    "tool_permissions", "tool_routing", "transition_prompt", "transitions", "worker_agent",
    "worker_query", "worker_stage",
)
STAGE_CONTEXT_KEYS: tuple[str, ...] = ("regions",)
EDGE_KEYS: tuple[str, ...] = (
    "condition", "gate", "hint", "stuck_after_iterations", "stuck_after_minutes",
    "stuck_after_same_file_edits", "stuck_after_tool_calls", "transform", "transform_config",
)
STUCK_KEYS: tuple[str, ...] = (
    "stuck_after_iterations", "stuck_after_minutes", "stuck_after_same_file_edits",
    "stuck_after_tool_calls",
)
GATE_KEYS: tuple[str, ...] = (
    "require_modifications", "require_regions", "require_region_updated",
    "require_no_open_items", "message", "region", "tools", "max_attempts",
)
HOOK_KEYS: tuple[str, ...] = (
    "on_stage_enter", "on_stage_exit", "before_inference", "after_inference", "on_tool_call",
    "on_completion", "on_error",
)
TOOL_ROUTING_KEYS: tuple[str, ...] = (
    "default_region", "persist", "max_result_tokens", "overrides", "max_result_tokens_per_tool",
)
ROUTING_OVERRIDE_KEYS: tuple[str, ...] = ("region", "max_result_tokens")

# --- enums ---------------------------------------------------------------------------------------
MODES: tuple[str, ...] = ("autonomous", "interactive", "interactive_points", "fan_out", "output")
# The upstream error message lists the modes without `interactive`; keep that list for wording.
MODES_IN_MESSAGE: tuple[str, ...] = ("autonomous", "interactive", "interactive_points", "fan_out", "output")
CONDITIONS: tuple[str, ...] = ("always", "llm_choice", "error", "max_iterations", "stuck", "dead_end")
NORMAL_CONDITIONS: frozenset[str] = frozenset({"always", "llm_choice"})
TRANSFORMS: tuple[str, ...] = ("direct", "clear", "compact", "summarize", "custom")
POLICIES: tuple[str, ...] = ("allow", "ask", "deny")
WORKER_FAILURE_POLICIES: tuple[str, ...] = ("continue", "fail_all")
UNATTENDED_CHOICES: tuple[str, ...] = ("auto_approve", "ask")
INTERACTION_STYLES: tuple[str, ...] = ("free_text", "multiple_choice", "confirm")
REGION_KINDS: tuple[str, ...] = (
    "temporary", "pinned", "sliding_window", "compacting", "compact_history", "clearable",
    "hashmap", "checklist", "custom",
)
REGION_KIND_ALIASES: dict[str, str] = {"hash_map": "hashmap"}
WINDOW_STRATEGIES: tuple[str, ...] = ("per_item", "bulk", "compact")
VOLATILITIES: tuple[str, ...] = ("stable", "grows", "rewritten")
ADMISSIONS: tuple[str, ...] = ("evict", "reject")
SANDBOX_KINDS: tuple[str, ...] = ("none", "namespace", "container")
SANDBOX_ON_UNAVAILABLE: tuple[str, ...] = ("error", "warn")
MAPPING_TRANSFORMS: tuple[str, ...] = ("direct", "summarize", "extract")
SEED_REFRESH_EACH_STAGE: frozenset[str] = frozenset({"each_stage", "stage"})
SEED_TABLE_KEYS: tuple[str, ...] = ("glob", "files", "literal", "rhai", "command", "tool", "tools", "caller")

# --- context regions -----------------------------------------------------------------------------
DEFAULT_REGION_MAX_TOKENS = 5000
DEFAULT_WINDOW_ITEMS = 10
ALWAYS_VISIBLE_REGIONS: frozenset[str] = frozenset(
    {"conversation", "tool_results", "final_output", "stage_instructions"}
)
# Kinds that stay put across an edge transform and count as "fixed" in the layout check.
FIXED_KINDS: frozenset[str] = frozenset({"pinned", "hashmap", "compact_history"})
EVICTING_KINDS: frozenset[str] = frozenset({"temporary", "clearable", "sliding_window", "compacting"})
LAYOUT_MIN_WORKING_TOKENS = 8000
LAYOUT_CHECK_FLOOR = 20000

# --- tools ---------------------------------------------------------------------------------------
BUILTIN_TOOLS: tuple[str, ...] = (
    "read_file", "read_files", "write_file", "edit_file", "list_dir", "shell",
    "present_for_review", "ask_user_text", "ask_user_choice", "ask_user_confirm", "edit_document",
    "context_write", "context_append", "context_read", "context_delete", "context_list",
    "todo_add", "todo_done", "todo_note", "current_time", "system_info", "locale_info",
    "environment_info", "which_command", "runtime_info", "submit_output", "fan_out",
)
TOOL_ALIASES: dict[str, str] = {"bash": "shell"}
SUBAGENT_TOOLS: tuple[str, ...] = (
    "spawn_agent", "check_agent", "wait_for_agent", "send_to_agent", "kill_agent",
)
MODIFYING_TOOLS: frozenset[str] = frozenset({"write_file", "edit_file"})
# The built-in tools that ask a person unless a table says otherwise (every other built-in is
# allowed); the tool registry's defaults agree (tests/blueprint/test_lints_own.py checks it).
ASK_BY_DEFAULT: frozenset[str] = frozenset({"write_file", "edit_file", "shell"})
BLOCKING_TOOLS: frozenset[str] = frozenset(
    {"present_for_review", "ask_user_text", "ask_user_choice", "ask_user_confirm", "edit_document"}
)


def canon_tool(name: str) -> str:
    """Return the canonical spelling of a tool name (``bash`` -> ``shell``)."""
    return TOOL_ALIASES.get(name, name)


def tool_spellings(name: str) -> set[str]:
    """Every spelling that names the same tool as ``name`` (itself, its canon, its aliases)."""
    canon = canon_tool(name)
    return {name, canon} | {alias for alias, target in TOOL_ALIASES.items() if target == canon}


DEFAULT_SAFE_SHELL: frozenset[str] = frozenset(
    "ls cat head tail wc cut tr grep egrep fgrep diff cmp file stat du df jq column od strings "
    "basename dirname realpath readlink pwd cd echo printf date seq sleep true false test which "
    "type uname hostname whoami id ps pgrep".split()
) | frozenset(
    f"git {sub}" for sub in
    "status diff log show branch remote rev-parse blame describe ls-files".split()
)

# --- runtime defaults the engine reads ---------------------------------------------------------
DEFAULT_GATE_ATTEMPTS = 3
DEFAULT_FAN_OUT_ATTEMPTS = 3
DEFAULT_MAX_WORKERS = 30
DEFAULT_MAX_CHILD_DEPTH = 3
MAX_FINAL_OUTPUT_BYTES = 256 * 1024

# --- upper bounds validation puts on counts a blueprint sets (issue 12 item 3): a number past
# these is a typo or an attempt to spin a stage, never a plan ----------------------------------
MAX_GATE_ATTEMPTS = 100
MAX_FAN_OUT_ATTEMPTS = 100
MAX_STAGE_ITERATIONS = 10_000
MAX_STAGE_REVISITS = 1_000

# --- The built-in model table (the upstream's; lev models list shows it) ---------------------------
_M = 1_000_000
_GEM = 1_048_576
#: The context window assumed for a model missing from MODEL_WINDOWS, in tokens.
DEFAULT_WINDOW_TOKENS = 200_000
MODEL_WINDOWS: dict[tuple[str, str], int] = {
    **{("anthropic", m): _M for m in (
        "claude-opus-5", "claude-sonnet-5", "claude-fable-5", "claude-opus-4-8",
        "claude-opus-4-7", "claude-opus-4-6", "claude-sonnet-4-6")},
    ("anthropic", "claude-haiku-4-5-20251001"): 200_000,
    ("openai", "gpt-5.5"): 1_050_000,
    ("openai", "gpt-5.4"): 1_050_000,
    ("openai", "gpt-5.4-mini"): 400_000,
    ("openai", "gpt-5.4-nano"): 400_000,
    **{("google", m): _GEM for m in (
        "gemini-3.5-flash", "gemini-3.1-pro-preview", "gemini-3-flash", "gemini-3.1-flash-lite")},
    ("openrouter", "anthropic/claude-opus-5"): _M,
    ("openrouter", "anthropic/claude-sonnet-5"): _M,
    **{("openrouter", m): _GEM for m in (
        "google/gemini-3.5-flash", "google/gemini-2.5-pro", "google/gemini-2.5-flash",
        "google/gemini-2.5-flash-lite", "meta-llama/llama-4-maverick", "deepseek/deepseek-v4-pro",
        "deepseek/deepseek-v4-flash", "qwen/qwen3.6-plus", "qwen/qwen3-coder")},
    ("openrouter", "meta-llama/llama-4-scout"): 10_000_000,
    ("openrouter", "deepseek/deepseek-v3.2"): 131_072,
    ("openrouter", "qwen/qwen3-max"): 131_072,
    ("openrouter", "deepseek/deepseek-r1"): 163_840,
    ("openrouter", "deepseek/deepseek-r1-0528"): 163_840,
    ("openrouter", "mistralai/mistral-large-2512"): 262_144,
    ("openrouter", "mistralai/mistral-medium-3-5"): 256_000,
    ("openrouter", "mistralai/mistral-small-2603"): 128_000,
}
# Providers whose catalogue is closed: `unknown-model` only checks these.
CLOSED_CATALOG_PROVIDERS: frozenset[str] = frozenset({"anthropic", "openai", "google"})
KNOWN_PROVIDERS: tuple[str, ...] = (
    "anthropic", "openai", "google", "openrouter", "ollama", "claude-code",
)
