"""Running one blueprint: the run loop, routing, gates, watchdogs, context, outputs and events."""
