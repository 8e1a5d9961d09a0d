"""Real Go programs through the harness in the bwrap sandbox: the acceptance behaviours of issue #5.

Each program is traced once per module (fixtures); per-run timeouts are short (1 s) for the programs
that deadlock or spin. The first run on a machine also builds the harness and the warm build caches.
"""

import json
import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pytest
import zstandard
from go_helpers import requires_bwrap, requires_go, trace, write_program

from pipeline.stages.go.rederive import rederive_runs
from pipeline.stages.go.runs import GoSettings
from schemas import schema_of

pytestmark = [requires_go, requires_bwrap]

CHATTY = """package main

import "runtime"

func main() {
	done := make(chan bool)
	go func() {
		for i := 0; i < 50000; i++ {
			runtime.Gosched()
		}
		done <- true
	}()
	for i := 0; i < 50000; i++ {
		runtime.Gosched()
	}
	<-done
}
"""

HOSTILE = """package main

import (
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	for _, addr := range []string{HOST, "1.1.1.1:53"} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err != nil {
			fmt.Println("dial", addr, "refused:", err)
		} else {
			c.Close()
			fmt.Println("dial", addr, "CONNECTED")
		}
	}
	for _, path := range []string{INSIDE, OUTSIDE, "/etc/tracegen-planted", "/usr/tracegen-planted"} {
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			fmt.Println("write", path, "refused:", err)
		} else {
			fmt.Println("write", path, "WRITTEN")
		}
	}
}
"""


POISON = """package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

func main() {
	opened, refused := 0, 0
	filepath.WalkDir(os.Getenv("GOCACHE"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				f.WriteString("poison")
				f.Close()
				opened++
			} else {
				refused++
			}
		}
		return nil
	})
	fmt.Println("opened", opened, "refused", refused)
}
"""


def schema_rows(table: str, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema_of(table))


@pytest.fixture(scope="module")
def sequential(examples, go_tools):
    return trace(examples["sequential"], go_tools, runs=5)


@pytest.fixture(scope="module")
def racy(examples, go_tools):
    return trace(examples["handoff_race"], go_tools, runs=20)


@pytest.fixture(scope="module")
def leaked(examples, go_tools):
    return trace(examples["leaked_select"], go_tools, runs=5)


@pytest.fixture(scope="module")
def abba(examples, go_tools):
    return trace(examples["abba_deadlock"], go_tools, runs=2, timeout_s=1.0)


@pytest.fixture(scope="module")
def chatty(tmp_path_factory, go_tools):
    program = write_program(tmp_path_factory.mktemp("progs") / "chatty", {"main.go": CHATTY})
    return trace(program, go_tools, runs=2, max_events=500, max_trace_bytes=32 << 10)


def test_sequential_program_has_entropy_zero_at_every_prefix(sequential):
    result, rows = sequential
    assert [r["status"] for r in result.rows("go_runs")] == ["ok"] * 5 and all(
        r["complete"] for r in result.rows("go_runs")
    )
    assert {r["prefix_kind"] for r in rows} == {"global", "goroutine", "goroutine_exact", "exact"}
    uncertain = [(r["prefix_kind"], r["depth"], r["counts"]) for r in rows if r["entropy"] != 0.0]
    runs = [
        [(e["goroutine"], e["event"], e["reason"], e["function"]) for e in r["events"]] for r in result.rows("go_runs")
    ]
    assert uncertain == [], f"uncertain prefixes {uncertain[:3]} in runs {runs}"
    depths = sorted(r["depth"] for r in rows if r["prefix_kind"] == "global")
    assert depths == list(range(result.rows("go_runs")[0]["n_events"] + 1))  # every k, up to End
    schema_rows("go_runs", result.rows("go_runs"))
    schema_rows("go_traces", result.rows("go_traces"))
    schema_rows("go_next_event", rows)


def test_racy_program_shows_two_next_events_at_some_prefix(racy):
    result, rows = racy
    assert len(result.rows("go_runs")) == 20
    global_rows = [r for r in rows if r["prefix_kind"] == "global"]
    assert any(sum(1 for c in r["counts"].values() if c) >= 2 for r in global_rows)
    assert any(r["entropy"] > 0 for r in rows if r["prefix_kind"] == "exact")


def test_leaked_goroutine_never_unblocks_and_no_runtime_goroutine_appears(leaked):
    result, rows = leaked
    for run in result.rows("go_runs"):
        assert run["status"] == "leak" and run["complete"]
        starts = {g["gpath"]: g["start_function"] for g in run["goroutines"]}
        assert all(f.startswith("main.") for f in starts.values()), starts  # no runtime/tracer goroutine
        [leak] = [g for g in run["goroutines"] if g["start_function"] == "main.waitForever"]
        own = [e for e in run["events"] if e["goroutine"] == leak["goroutine"]]
        assert (own[-1]["event"], own[-1]["reason"]) == ("GoBlock", "select")
        assert run["leaked"] == [
            {"goroutine": leak["goroutine"], "gpath": leak["gpath"], "state": "blocked(select)", "reason": "select"}
        ]
    ids = {g["goroutine"] for run in result.rows("go_runs") for g in run["goroutines"]}
    assert {r["goroutine"] for r in rows if r["goroutine"] is not None} <= ids
    leak_id = leak["goroutine"]
    per_g = sorted(
        (r for r in rows if r["prefix_kind"] == "goroutine" and r["goroutine"] == leak_id), key=lambda r: r["depth"]
    )
    block = next(r["depth"] for r in per_g if ("GoBlock(select)", r["n"]) in r["detail_counts"])
    later = [r for r in per_g if r["depth"] > block]
    assert later and all(r["probs"]["GoUnblock"] == 0.0 for r in later)
    assert later[0]["probs"]["End"] == 1.0 and later[0]["n"] == 5


def test_abba_deadlock_ends_as_deadlock_with_its_events(abba):
    result, rows = abba
    for run in result.rows("go_runs"):
        assert run["status"] == "deadlock" and run["complete"]
        assert run["duration_ms"] < 4000  # 1 s timeout, the watchdog flushes and exits
        assert run["n_events"] > 0 and run["trace_stored"]
        blocked = [g for g in run["goroutines"] if g["final_state"] == "Waiting"]
        assert blocked and all(g["final_reason"] == "sync" for g in blocked)
    assert any(r["counts"]["End"] for r in rows if r["prefix_kind"] == "global")


def test_panic_ends_as_panic_with_its_events(examples, go_tools):
    result, _ = trace(examples["goroutine_panic"], go_tools, runs=2)
    for run in result.rows("go_runs"):
        assert run["status"] == "panic" and run["n_events"] > 0 and run["complete"]
        assert "integer divide by zero" in run["stderr_tail"]


def test_build_error_is_a_row_and_a_failure(examples, go_tools):
    result, rows = trace(examples["compile_error"], go_tools, runs=3)
    [run] = result.rows("go_runs")
    assert (run["status"], run["run_index"], run["events"]) == ("build_error", -1, [])
    assert "cannot use" in run["stderr_tail"]
    [failure] = result.rows("failures")
    assert (failure["stage"], failure["error_type"], failure["source_id"]) == ("build", "BuildError", "compile_error")
    assert "cannot use" in failure["message"] and rows == []


def test_spinning_program_times_out(examples, go_tools):
    result, _ = trace(examples["spin_forever"], go_tools, runs=1, timeout_s=1.0)
    [run] = result.rows("go_runs")
    assert run["status"] == "timeout" and not run["complete"] and run["n_events"] > 0


def test_event_cap_bounds_huge_traces(chatty):
    result, rows = chatty
    for run in result.rows("go_runs"):
        assert run["truncated"] and run["n_events"] == 500 and not run["complete"]
        assert run["trace_bytes"] > 32 << 10 and not run["trace_stored"]  # too big to keep
    assert result.rows("go_traces") == []
    assert not any(r["counts"]["End"] for r in rows)  # truncated runs are censored, never ended


def test_canonical_ids_agree_across_runs(examples, go_tools):
    result, _ = trace(examples["worker_pool"], go_tools, runs=4, gomaxprocs=(1, 2))
    assert [r["gomaxprocs"] for r in result.rows("go_runs")] == [1, 2, 1, 2]
    seen: dict[str, tuple[int, str]] = {}
    for run in result.rows("go_runs"):
        for g in run["goroutines"]:
            assert seen.setdefault(g["gpath"], (g["goroutine"], g["start_function"])) == (
                g["goroutine"],
                g["start_function"],
            )
        assert {e["goroutine"] for e in run["events"]} <= {g["goroutine"] for g in run["goroutines"]}
    assert sorted(i for i, _ in seen.values()) == list(range(len(seen)))
    assert seen["0"] == (0, "main.main")


def test_test_packages_run_with_one_root_per_test(examples, go_tools):
    result, _ = trace(examples["two_tests"], go_tools, runs=2)
    for run in result.rows("go_runs"):
        assert run["status"] == "ok" and run["mode"] == "test"
        roots = {g["gpath"]: g["start_function"] for g in run["goroutines"] if "." not in g["gpath"]}
        assert roots == {"0": "testing.tRunner", "1": "testing.tRunner"}


def test_race_detector_runs_in_the_sandbox(examples, go_tools):
    result, _ = trace(examples["data_race"], go_tools, runs=2, race=True)
    for run in result.rows("go_runs"):
        assert run["status"] == "race" and run["race"] and "WARNING: DATA RACE" in run["stderr_tail"]


def test_network_and_writes_outside_scratch_fail_inside_the_sandbox(tmp_path, go_tools):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o777)
    program_dir = tmp_path / "progs" / "hostile"
    source = (
        HOSTILE.replace("HOST", json.dumps("127.0.0.1:%d" % listener.getsockname()[1]))
        .replace("INSIDE", json.dumps(str(program_dir / "planted")))
        .replace("OUTSIDE", json.dumps(str(outside / "planted")))
    )
    program = write_program(program_dir, {"main.go": source})
    try:
        result, _ = trace(program, go_tools, runs=2)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert [r["status"] for r in result.rows("go_runs")] == ["ok", "ok"]
    for run in result.rows("go_runs"):
        assert "CONNECTED" not in run["stdout_tail"] and "WRITTEN" not in run["stdout_tail"]
        assert sum(line.split(" ")[2] == "refused:" for line in run["stdout_tail"].splitlines()) == 6
    assert not (outside / "planted").exists() and not (program_dir / "planted").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the shared warm cache is hard-linked only when running as root")
def test_a_program_cannot_poison_the_shared_build_cache(tmp_path, go_tools):
    from pipeline.stages.go import build as go_build

    base = Path(go_build.ensure_warm_cache("main", False, toolchain=go_tools.toolchain))
    sizes = {p: p.stat().st_size for p in base.rglob("*") if p.is_file()}
    program = write_program(tmp_path / "progs" / "poison", {"main.go": POISON})
    result, _ = trace(program, go_tools, runs=1)
    [run] = result.rows("go_runs")
    opened, refused = (int(word) for word in run["stdout_tail"].split()[1::2])
    # It may write only the entries its own build added (trim.txt is the one shared file not linked).
    assert refused >= len(sizes) - 1 > 100 and opened < 50
    assert {p: p.stat().st_size for p in base.rglob("*") if p.is_file()} == sizes


def test_events_rederived_from_raw_traces_equal_the_rows(sequential, leaked, abba, go_tools):
    for result, _ in (sequential, leaked, abba):
        assert len(result.rows("go_traces")) == len(result.rows("go_runs"))
        for trace_row in result.rows("go_traces"):
            raw = zstandard.ZstdDecompressor().decompress(trace_row["trace_zstd"])
            assert len(raw) == trace_row["trace_bytes"]
        assert rederive_runs(result.rows("go_runs"), result.rows("go_traces"), go_tools.harness) == result.rows(
            "go_runs"
        )


def test_truncated_runs_rederive_with_the_stored_cap(examples, go_tools):
    result, _ = trace(examples["mutex_counter"], go_tools, runs=2, max_events=20)
    assert all(r["truncated"] and r["trace_stored"] for r in result.rows("go_runs"))
    assert rederive_runs(result.rows("go_runs"), result.rows("go_traces"), go_tools.harness) == result.rows("go_runs")


@dataclass(frozen=True)
class ShortWall(GoSettings):
    """Settings whose sandbox wall clock ends the harness mid-way."""

    def limits(self):
        return replace(super().limits(), wall_s=4.0)


def test_sandbox_kill_keeps_finished_runs_and_records_a_failure(examples, go_tools):
    from pipeline.sandbox import make_sandbox
    from pipeline.stages.go.runs import trace_program

    settings = ShortWall(runs=4, timeout_s=1.0)
    result = trace_program(examples["spin_forever"], settings, make_sandbox("bwrap", settings.limits()), "u", go_tools)
    [failure] = result.rows("failures")
    assert failure["error_type"] == "SandboxFailed" and "spin_forever" in failure["message"]
    assert 1 <= len(result.rows("go_runs")) < 4 and all(r["status"] == "timeout" for r in result.rows("go_runs"))
