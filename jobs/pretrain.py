"""Ray job entry point: train the neural debugger on a packed dataset with Ray Train (pipeline/pretrain/launch.py).

    ray job submit --working-dir . -- python jobs/pretrain.py --data PACKED --out RUN --workers 8 --gpu
    python jobs/pretrain.py --data PACKED --out RUN --workers 2          # embedded local Ray, CPU (gloo)

Takes the options of `tracegen pretrain`; running it again on the same RUN resumes from its newest checkpoint.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["pretrain", *sys.argv[1:]]))
