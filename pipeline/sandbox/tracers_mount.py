"""Where the in-sandbox tracers (`tracers/`, standard library only) live on the host, and how a sandbox sees them.

Every backend binds the host's `tracers/` read-only at its own path and puts its parent on PYTHONPATH, so the
code that runs inside is exactly the code of this checkout.
"""

import os

import tracers
from pipeline.sandbox.base import Bind

TRACERS_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tracers.__file__)))


def tracers_bind() -> Bind:
    """The read-only bind of `tracers/` at its host path."""
    return Bind(os.path.join(TRACERS_PARENT, "tracers"))
