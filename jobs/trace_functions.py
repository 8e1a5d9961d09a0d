"""Ray job entry point: trace JSONL function records.

    ray job submit --working-dir . -- python jobs/trace_functions.py --input FILE --out DIR|URI
    python jobs/trace_functions.py --input FILE --out DIR          # embedded local Ray

Takes the options of `tracegen trace-functions` (pipeline/kinds/functions.py).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["trace-functions", *sys.argv[1:]]))
