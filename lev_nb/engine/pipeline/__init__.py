"""The steps of the run loop (spec/runtime.md §2-§8, §11): each module owns one of them.

Pure deciders (``routing``, ``gates``, ``watchdogs``, ``repetition``, ``submission``, ``outputs``)
take plain values and return an answer; the collaborators the run loop holds (``inference``,
``tools``, ``holds``, ``transitions``, ``hooks``, ``fanout``) act on the shared run state.
"""
