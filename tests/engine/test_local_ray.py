"""The embedded local Ray: authenticated, and leaves no token file behind for a later `ray start`."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import ray
from pipeline.engine.orchestrate import start_ray
start_ray(None, 1)
assert ray.get(ray.remote(lambda: 6 * 7).remote()) == 42
import os
print(os.environ["RAY_AUTH_MODE"])
ray.shutdown()
"""


def test_the_embedded_ray_runs_with_token_auth_and_writes_no_token_file(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "token"
    assert not (tmp_path / ".ray" / "auth_token").exists()
