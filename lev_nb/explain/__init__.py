"""Looking at a run afterwards (or while another process runs it): its story, its events, what
its model saw, its token ledger, the run store as a table, and stopping it from outside.

- :mod:`~lev_nb.explain.story`: one event as a sentence, and the formats every view shares;
- :mod:`~lev_nb.explain.fold`: the story folded from the events (what the notebook's run view draws);
- :mod:`~lev_nb.explain.record`: one recorded run read from its folder, and following its events;
- :mod:`~lev_nb.explain.show`: ``lev show`` and ``%lev show``; :mod:`~lev_nb.explain.log`: ``lev log``;
- :mod:`~lev_nb.explain.context`: ``lev context``; :mod:`~lev_nb.explain.ledger`: ``lev stages``;
- :mod:`~lev_nb.explain.table`: ``lev_nb.runs()``; :mod:`~lev_nb.explain.control`: ``lev cancel``
  and ``lev kill``.

The command line and the notebook both tell runs through this package, so a run reads the same
wherever it is looked at. Nothing is imported here, so ``lev ps`` pays only for what it uses.
"""
