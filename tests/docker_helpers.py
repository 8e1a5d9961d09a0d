"""Docker tests outside tests/sandbox: skip without an engine, except under CI=true, where an engine is part of
the contract (.ci/run starts one) and its absence fails them."""

import os

import pytest


def require_docker_engine() -> None:
    from pipeline.sandbox.image import connect

    try:
        connect(timeout=10)
    except RuntimeError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and no Docker engine: {error}")
        pytest.skip(str(error))
