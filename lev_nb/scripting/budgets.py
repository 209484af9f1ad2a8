"""The operation budget of each script kind (docs/rhai.md#the-sandbox).

Every other limit is the hardened engine's default (:data:`lev_nb.rhai.DEFAULT_LIMITS`); only the
operation budget differs by kind, and each kind's number is stated here once. The 100k kinds keep
their own number rather than reading the engine default: the spec fixes them per kind.
"""

from __future__ import annotations

# Script tools (`SCRIPT_TOOL_MAX_OPERATIONS` upstream).
TOOL_MAX_OPERATIONS = 500_000
# Output validators.
VALIDATOR_MAX_OPERATIONS = 100_000
# Stage hooks.
HOOK_MAX_OPERATIONS = 100_000
# Custom context regions.
REGION_MAX_OPERATIONS = 100_000
# `rhai` region seeds (upstream `ScriptEngine`).
SEED_MAX_OPERATIONS = 100_000
# Evaluation scorers (``fn score(answer, case)``) and ``lev test`` scripts: lev_nb's own kinds,
# given the validators' budget since they judge an answer as a validator does.
SCORER_MAX_OPERATIONS = 100_000
