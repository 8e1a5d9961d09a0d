"""Ray job entry point: re-sample trajectories from a stored dataset's traces.

    ray job submit --working-dir . -- python jobs/trajectories.py --traces DIR|URI --out DIR|URI
    python jobs/trajectories.py --traces DIR --out DIR2          # embedded local Ray

Takes the options of `tracegen trajectories` (pipeline/kinds/resample.py).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["trajectories", *sys.argv[1:]]))
