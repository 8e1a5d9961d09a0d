"""Issue 10 item 6 in the real bwrap sandbox: code that runs traced functions in other threads ends its trace
with its own reason, `threads`, over consistent indices; never a failure row blaming the code."""

import shutil

import pytest
from hostile_helpers import assert_ordinary_untouched, assert_traced_as_in_process, beside_ordinary, trace_chunk

from pipeline.sources.function_records import FunctionRecord

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

WORK = "def work(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n\n"
THREADED = {
    "pool_map": "from concurrent.futures import ThreadPoolExecutor\n\n" + WORK + "def f(n):\n"
    "    with ThreadPoolExecutor(4) as pool:\n        results = list(pool.map(work, [n] * 8))\n"
    "    return sum(results)\n",
    "joined_thread": "import threading\n\n" + WORK + "def f(n):\n"
    "    worker = threading.Thread(target=work, args=(n,))\n    worker.start()\n    worker.join()\n    return n\n",
    "daemon_threads_racing": "import threading\n\n" + WORK + "def f(n):\n    for _ in range(4):\n"
    "        threading.Thread(target=work, args=(n,), daemon=True).start()\n    return work(n)\n",
}
# Threads that run no traced code leave the trace as it is without them.
UNTRACED_THREAD = (
    "import threading\n\ndef f(n):\n    threading.Thread(target=sorted, args=([3, 1, 2],)).start()\n    return n\n"
)


def test_traced_code_in_other_threads_ends_the_trace_with_reason_threads():
    hostiles = [
        FunctionRecord(f"{name}_{attempt}", code, "300", "f", f"threads:{name}")
        for attempt in range(5)
        for name, code in THREADED.items()
    ]
    records = beside_ordinary(hostiles) + [FunctionRecord("untraced_thread", UNTRACED_THREAD, "3", "f", "threads")]
    rows, failures = trace_chunk(records)
    assert failures == {}
    assert_ordinary_untouched(records, rows)
    assert_traced_as_in_process(rows["untraced_thread"], records[-1])
    for record in hostiles:
        row = rows[record.id]
        assert [event["index"] for event in row["events"]] == list(range(row["n_events"])), record.id
        assert {event["function"] for event in row["events"]} <= {"f", "work"}
        if record.id.startswith("daemon_threads_racing"):  # a daemon may start after the entry returned
            assert row["truncation_reason"] in ("threads", None), record.id
        else:
            assert (row["exit"], row["truncated"], row["truncation_reason"]) == ("never", True, "threads"), record.id
            assert {event["function"] for event in row["events"]} == {"f"}  # the entry thread's events only
