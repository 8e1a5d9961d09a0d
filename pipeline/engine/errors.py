"""Errors that stop a job before any unit runs, each naming what is wrong and how to fix it."""


class SetupError(RuntimeError):
    """The machine lacks something the job needs (a sandbox, a toolchain, an engine, an image)."""
