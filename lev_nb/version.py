"""The package version, in a module of its own so the CLI can show it without loading the package facade."""

__version__ = "0.1.0"
