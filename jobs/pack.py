"""Ray job entry point: tokenize and pack a dataset's trajectories and Go examples into fixed-length samples.

    ray job submit --working-dir . -- python jobs/pack.py --data DIR|URI --out PACKED --seq-len 2048
    python jobs/pack.py --data DIR --out PACKED          # embedded local Ray

Takes the options of `tracegen pack` (pipeline/kinds/pack.py).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["pack", *sys.argv[1:]]))
