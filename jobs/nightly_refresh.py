"""Ray job entry point: the nightly refresh (only what is new → a new committed version; docs/scheduling.md).

    ray job submit --submission-id nightly-$(date +%F) --no-wait --working-dir . -- \
        python jobs/nightly_refresh.py --sources sources.toml --root DIR
    python jobs/nightly_refresh.py --sources sources.toml --root DIR      # embedded local Ray

Takes the options of `tracegen refresh`. Exit 0 published or nothing new, 1 failed units, 2 bad configuration.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["refresh", *sys.argv[1:]]))
