"""`tracegen pretrain` and `evaluate` need the `train` extra; without it they say so in one line (exit 2) before
any work, as every other command's preflight does."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WITHOUT = """
import sys
sys.modules[{module!r}] = None  # as in an environment without the train extra: importing it fails
from pipeline.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("module", ["torch", "ray.train.torch"])
@pytest.mark.parametrize(
    "argv",
    [["pretrain", "--data", "packed", "--out", "run"], ["evaluate", "--run", "run", "--data", "d", "--out", "r.json"]],
    ids=["pretrain", "evaluate"],
)
def test_a_missing_train_extra_is_one_line_naming_it(tmp_path, module, argv):
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT.format(module=module), *argv],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"tracegen: setup: tracegen {argv[0]} needs the train extra") and module in line
    assert "pip install -e '.[train]'" in line
    assert not (tmp_path / "run").exists()  # nothing was started
