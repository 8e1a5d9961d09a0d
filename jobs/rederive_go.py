"""Ray job entry point: re-derive Go events and distributions from a Go dataset's stored raw traces.

    ray job submit --working-dir . -- python jobs/rederive_go.py --data DIR|URI --out DIR|URI
    python jobs/rederive_go.py --data DIR --out DIR2          # embedded local Ray

Takes the options of `tracegen rederive-go` (pipeline/kinds/rederive_go.py).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["rederive-go", *sys.argv[1:]]))
