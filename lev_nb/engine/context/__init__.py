"""A run's context: regions, the window that holds them, and how they become a request
(docs/concepts.md#context-regions).

``regions`` (one region and its eviction rules), ``window`` (every region of a run and the writes
into them), ``assembly`` (regions to system blocks and messages), ``access`` (the context_* and
todo_* tools), ``custom`` (script-driven custom regions), ``run_context`` (the window built for one
run's plan) and ``seeds`` (filling regions when a run starts).
"""
