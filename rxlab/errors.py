"""Errors the CLI turns into one line and exit status 2 (bad input), or a loud failure."""


class UsageError(Exception):
    """Bad user input: the CLI prints it as one line and exits with status 2."""


class ConservationError(RuntimeError):
    """A simulated packet ended neither delivered, dropped with a reason, nor in flight."""


class OutputError(Exception):
    """The machine refused a write (no space, read-only file system, I/O error): the CLI
    prints it as one line and exits with status 1; nothing half-written is left."""
