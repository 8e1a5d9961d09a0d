"""Ray job entry point: run Go programs N times under runtime/trace.

    ray job submit --working-dir . -- python jobs/trace_go.py --programs DIR --runs N --out DIR|URI
    python jobs/trace_go.py --programs DIR --out DIR          # embedded local Ray

Takes the options of `tracegen trace-go` (pipeline/kinds/go.py).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["trace-go", *sys.argv[1:]]))
