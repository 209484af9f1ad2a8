"""The run plan: the frozen, engine-side view of a blueprint (docs/concepts.md#stages).

``types`` holds the plain dataclasses the run loop reads (RunPlan, StagePlan, EdgePlan, ...);
``build`` turns a loaded Blueprint into a RunPlan and is the engine's only reader of the
blueprint model.
"""
