"""What the host hands the in-sandbox runner (`tracers.runners.repos`): request files, environment, output.

A request is a JSON file in a read-only control directory; results come back as files the host reads
without following links (pipeline/sandbox/files.py) and treats as untrusted.
"""

import json
import os

from pipeline.sandbox.files import read_sandbox_file
from pipeline.sandbox.tracers_mount import TRACERS_PARENT

PASS_ENV = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_CERT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


def write_request(run_dir: str, name: str, request: dict) -> str:
    control = os.path.join(run_dir, "control")
    os.makedirs(control, mode=0o755, exist_ok=True)
    os.chmod(control, 0o755)
    path = os.path.join(control, name)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(request, handle)
    os.chmod(path, 0o644)
    return path


def base_env() -> dict[str, str]:
    env = {"PYTHONPATH": TRACERS_PARENT, "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    env.update({key: os.environ[key] for key in PASS_ENV if key in os.environ})
    return env


def read_json(path: str, limit: int):
    data = read_sandbox_file(path, limit + 1)
    if data is None or len(data) > limit:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def last_lines(text: str, n: int) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:])[-800:] or "(no output)"
