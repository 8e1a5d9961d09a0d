"""`tracegen export`: a dataset's rows written as another project's examples, one module per dialect.

- `cwm` (export/cwm.py): each trace as the Code World Model's trace-prediction prompt and its expected
  completion, so a CWM checkpoint can be prompted on held-out traces and scored like our own model.
- `weave` (export/weave.py): the Go seed's point, distribution and trajectory examples, from the Go tables.

Each dialect module has `OPTIONS` (the keyword options it accepts) and `records(data, **options)`, an
iterator of JSON-able dicts; `export` writes them as JSON lines, atomically (a partial file never remains).
"""

import json
import os
from importlib import import_module

DIALECTS = {"cwm": "pipeline.export.cwm", "weave": "pipeline.export.weave"}


def export(dialect: str, data: str, out: str, **options) -> int:
    """Write dataset `data`'s examples in `dialect` to the JSONL file `out`; returns how many were written."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown export dialect {dialect!r}: expected one of {', '.join(DIALECTS)}")
    module = import_module(DIALECTS[dialect])
    unknown = sorted(name for name, value in options.items() if value and name not in module.OPTIONS)
    if unknown:
        flags = ", ".join("--" + name.replace("_", "-") for name in unknown)
        raise ValueError(f"{flags}: not an option of the {dialect} dialect")
    chosen = {name: value for name, value in options.items() if name in module.OPTIONS}
    partial = f"{out}.partial"
    written = 0
    try:
        with open(partial, "w", encoding="utf-8") as sink:
            for record in module.records(data, **chosen):
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += 1
        os.replace(partial, out)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return written
