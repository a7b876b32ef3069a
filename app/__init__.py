"""memlens entry points: command line and the Qt application."""
