"""Notebook views: rich displays, the live run widget and the %lev magics."""
