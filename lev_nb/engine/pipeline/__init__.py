"""The steps of the run loop (docs/runs.md#the-run-loop), one module each.

The collaborators the run loop holds (``inference``, ``tools``, ``holds``, ``transitions``,
``hooks``, ``fanout``) act on the shared :class:`~lev_nb.engine.state.RunState`; the deciders
(``routing``, ``gates``, ``watchdogs``, ``repetition``, ``submission``, ``outputs``) take plain
values and return an answer, so they are tested without running a run.
"""
