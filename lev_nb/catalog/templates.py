"""The starting points of ``lev create NAME [--template T]`` (upstream ``cli.md`` ``lev create``):
``default``, one stage that answers the task; ``coder``, the multi-stage shape (plan, implement with
a gate that wants real file changes, review, and a report as the final output). Each validates with
no finding above a note and walks to its end on the ``mock`` model (tests check both)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from lev_nb.errors import UsageError

__all__ = ["TEMPLATES", "create"]

_DEFAULT = '''\
# {name}: a one-stage agent to start from. `lev validate .` checks it, `lev graph .` draws it,
# `lev run . --task "..." --model mock` walks it without a key.

[agent]
name = "{name}"
version = "0.1.0"
description = "Answers the task in one stage"
entry_stage = "answer"

[context.regions]
system = {{ kind = "pinned", max_tokens = 4000 }}
task = {{ kind = "pinned", max_tokens = 4000, seed = "task_input" }}
conversation = {{ kind = "sliding_window", max_items = 40, max_tokens = 24000 }}

[stages.answer]
mode = "output"
model = {{ models = [{{ provider = "anthropic", model = "claude-sonnet-4-6" }}] }}
available_tools = ["read_file", "list_dir"]
max_iterations = 10
system_prompt = """
Read what the task needs, then give your answer with submit_output.
"""
output = {{ format = "markdown", instructions = "A short answer in Markdown." }}
'''

_CODER = '''\
# {name}: plan, implement, review, report. The implement stage cannot move on until files really
# changed; review sends the work back once if it finds a problem. `lev graph .` draws it.

[agent]
name = "{name}"
version = "0.1.0"
description = "Plans a change, makes it, reviews it and reports what changed"
entry_stage = "plan"

[context.regions]
system = {{ kind = "pinned", max_tokens = 4000 }}
task = {{ kind = "pinned", max_tokens = 2000, seed = "task_input" }}
plan = {{ kind = "pinned", max_tokens = 3000, required = true, description = "What will change and why" }}
conversation = {{ kind = "sliding_window", max_items = 40, max_tokens = 24000 }}

[tool_permissions]
write_file = "ask"
edit_file = "ask"

[stages.plan]
mode = "autonomous"
model = {{ models = [{{ provider = "anthropic", model = "claude-sonnet-4-6" }}] }}
available_tools = ["list_dir", "read_file", "context_write"]
max_iterations = 10
system_prompt = """
Read the files the task is about and write a short plan into the `plan` region with context_write.
Do not change any file yet.
"""

[stages.plan.transitions.implement]
hint = "The plan is written"
gate = {{ require_regions = ["plan"], message = "Write the plan into the `plan` region first." }}

[stages.plan.transitions.report]
condition = "dead_end"

[stages.implement]
mode = "autonomous"
model = {{ models = [{{ provider = "anthropic", model = "claude-sonnet-4-6" }}] }}
available_tools = ["read_file", "write_file", "edit_file", "list_dir"]
max_iterations = 20
max_revisits = 2
system_prompt = """
Make the change the plan describes, with write_file or edit_file.
"""

[stages.implement.transitions.review]
hint = "The change is made"
gate = {{ require_modifications = true, message = "Change the files with edit_file or write_file first." }}

[stages.implement.transitions.report]
condition = "error"

[stages.review]
mode = "autonomous"
model = {{ models = [{{ provider = "anthropic", model = "claude-sonnet-4-6" }}] }}
available_tools = ["read_file", "list_dir"]
max_iterations = 10
max_revisits = 1
system_prompt = """
Check the change against the plan. Go back to implement if something is missing or wrong.
"""

[stages.review.transitions.implement]
hint = "Something is missing or wrong"

[stages.review.transitions.report]
hint = "The change matches the plan"

[stages.report]
mode = "output"
model = {{ models = [{{ provider = "anthropic", model = "claude-haiku-4-5-20251001" }}] }}
available_tools = ["read_file"]
max_iterations = 5
system_prompt = """
Report what changed and why, for the person who asked, with submit_output.
"""
output = {{ format = "markdown" }}
'''

TEMPLATES = {"default": _DEFAULT, "coder": _CODER}
_GITIGNORE = ".env\n*.leviath-bundle\n.leviath/\n.lev/\n"
_ENV_EXAMPLE = "# Copy to .env and fill in; .env is never packed into a bundle.\nANTHROPIC_API_KEY=\n"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def create(name: str, template: str = "default", parent: str | os.PathLike[str] = ".") -> Path:
    """Write a new agent folder ``parent/name`` from ``template``; returns it. Refuses a name that
    cannot be a folder, an unknown template, and a folder that exists and is not empty."""
    if not _NAME.match(name):
        raise UsageError(f"'{name}' cannot name an agent", hint="use letters, digits, '.', '_' and '-'")
    if template not in TEMPLATES:
        from lev_nb.blueprint.errors import did_you_mean

        raise UsageError(f"no template '{template}'",
                         hint=did_you_mean(template, TEMPLATES) or f"the templates are {', '.join(TEMPLATES)}")
    folder = Path(parent) / name
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"{folder} already exists and is not empty", hint="pick another name or folder")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.leviath").write_text(TEMPLATES[template].format(name=name), encoding="utf-8")
    (folder / ".gitignore").write_text(_GITIGNORE, encoding="utf-8")
    (folder / ".env.example").write_text(_ENV_EXAMPLE, encoding="utf-8")
    return folder
