"""Ray job entry point: trace repositories' test suites, cut into function-level traces.

    ray job submit --working-dir . -- python jobs/trace_repos.py --manifest repos.toml --out DIR|URI
    python jobs/trace_repos.py --manifest repos.toml --out DIR          # embedded local Ray

Takes the options of `tracegen trace-repos` (pipeline/kinds/repos.py).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["trace-repos", *sys.argv[1:]]))
