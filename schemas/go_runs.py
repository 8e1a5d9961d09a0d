"""The `go_runs` table: one row per run of a Go program (docs/architecture.md §9), plus one row per build failure.

Goroutine ids are canonical for the whole program: the harness gives every goroutine a key path
(`gpath`: "0" is the first root, "0.2" the second goroutine it created, ...) that depends only on each
goroutine's own creation order; `goroutine` is the rank of that path among the paths seen in *any*
run of the program, breadth first (by depth, then component-wise). So all runs of a program agree on
the id of a goroutine created in the same order by the same creator.

Besides the scheduler's state changes, `events` holds the program's own runtime/trace user annotations
(`UserLog` for `trace.Log`, `UserRegion` for the begin and end of `trace.WithRegion` / `trace.StartRegion`),
as emitted by the program's goroutines only; go_next_event counts scheduler events only (it skips them).

Objects (version 4). Unless the run's `instrumentation` is `disabled` or `fallback`, the harness rewrote the
program's channel operations (make, send, receive, close, `for range`, `select`) and its `sync.Mutex`, `RWMutex`,
`WaitGroup` and `Cond` calls before building (go_harness/README.md, "Object operations"; line numbers unchanged).
Each such operation is an `ObjectOp` event (an annotation: go_next_event skips it) whose `reason` is the
operation (make | send | recv | close | select | lock | unlock | rlock | runlock | add | done | wait | signal |
broadcast), `object` the object's id and `object_state` its state after the operation; a `GoBlock` (and the
`GoUnblock` that ends it) of a goroutine inside such an operation names the object it waits on and the state
then. Object ids are stable across runs: `KIND@FILE:LINE` of the object's make (`sync.NewCond` for a Cond) or,
for objects made elsewhere (a zero-value mutex, a channel from a library), of its first logged use; plus
`/gGPATH` (the creating goroutine's key path) when goroutines of different paths made objects at that site,
plus `#N` (the creator's N-th object there, from 0) when one made several. KIND: chan | mutex | rwmutex | wg |
cond. States: channel `len L/C` (`, closed`); GoBlock on a channel `recv, len 0/1, senders 0` or
`send, len 2/2, receivers 0` (goroutines inside the opposite operation); mutex `held by gGPATH` | `readers N` |
`free`, GoBlock `lock, held by g0.2`; WaitGroup `counter N`, GoBlock `wait, counter N`; Cond `waiters N`
(goroutines inside Wait), GoBlock `wait, waiters N`; select GoBlock: `object` the offered channels' ids
comma-separated, state `select: recv ID len 0/1, send ID len 1/1, recv untracked` (untracked: a case whose
channel expression the rewriter could not evaluate twice, or a nil channel), select ObjectOp: the fired case's
channel and `recv, len 0/1` (`default` for the default case). Goroutines are named by key path (`gGPATH`),
not by canonical id, so states read the same in every run.
The run's program, source text included, is the `go_programs` row with the same `program_hash`.
"""

import pyarrow as pa

from schemas.fields import field

VERSION = 4

ANNOTATIONS = ("UserLog", "UserRegion", "ObjectOp")
INSTRUMENTATIONS = ("rewritten", "disabled", "fallback")
STATUSES = ("ok", "leak", "deadlock", "timeout", "panic", "race", "exit_error", "build_error")

EVENT = pa.struct(
    [
        field("index", pa.int32(), "position among the run's kept (program) events, from 0", nullable=False),
        field(
            "goroutine",
            pa.int32(),
            "program-canonical id of the goroutine whose state changed (see the "
            "table doc); 0 is the main goroutine (main programs) or the first test's goroutine",
            nullable=False,
        ),
        field("gpath", pa.string(), "the goroutine's canonical key path, e.g. '0.2.1'", nullable=False),
        field(
            "event",
            pa.string(),
            "GoCreate | GoStart | GoBlock | GoUnblock | GoSched | GoEnd | GoSyscall | "
            "GoTransition (a state change the mapping does not name) | UserLog (a trace.Log call of the "
            "goroutine) | UserRegion (a user region of the goroutine begins or ends) | ObjectOp (a channel or "
            "sync operation of the goroutine, logged by the harness's rewriting; see the table doc)",
            nullable=False,
        ),
        field(
            "reason",
            pa.string(),
            "GoBlock: the runtime's block reason (chan send, chan receive, select, "
            "sync, sync.(*Cond).Wait, sleep, forever, ...); GoSched: runtime.Gosched | preempted; GoSyscall: "
            "enter | exit; GoCreate: '' or created blocked / created in syscall; GoTransition: 'From->To'; "
            "UserRegion: begin | end; ObjectOp: the operation (make, send, recv, close, select, lock, unlock, "
            "rlock, runlock, add, done, wait, signal, broadcast); else ''",
            nullable=False,
        ),
        field(
            "peer",
            pa.int32(),
            "program-canonical id of the other program goroutine involved: the creator "
            "for GoCreate, the unblocker for GoUnblock; -1 otherwise or when it is not the program's",
            nullable=False,
        ),
        field(
            "function",
            pa.string(),
            "innermost user (non-runtime, non-standard-library) frame of the relevant "
            "stack: GoCreate the go statement, GoUnblock the unblocker, GoBlock/GoSched/GoSyscall enter the "
            "goroutine itself, GoStart/GoSyscall exit where it resumes, UserLog/UserRegion/ObjectOp the "
            "annotating call (ObjectOp: the operation's line); "
            "'' when none (GoEnd)",
            nullable=False,
        ),
        field("file", pa.string(), "that frame's file, relative to the module root (e.g. main.go)", nullable=False),
        field("line", pa.int32(), "that frame's line; 0 when there is no frame", nullable=False),
        field("time_ns", pa.int64(), "nanoseconds since the run's first kept event", nullable=False),
        field(
            "category",
            pa.string(),
            "UserLog: the trace.Log category (may be ''); '' for every other event",
            nullable=False,
        ),
        field(
            "message",
            pa.string(),
            "UserLog: the trace.Log message; UserRegion: the region type; '' for every other event",
            nullable=False,
        ),
        field(
            "object",
            pa.string(),
            "ObjectOp: the object operated on, e.g. chan@main.go:12 (see the table doc); GoBlock/GoUnblock: the "
            "object the goroutine waits on (select: the offered channels, comma-separated); '' when none or the "
            "run was not rewritten",
            nullable=False,
        ),
        field(
            "object_state",
            pa.string(),
            "ObjectOp: the object's state after the operation (len 1/2, held by g0.1, counter 2, ...); GoBlock/"
            "GoUnblock: what the goroutine waits for and the object's state then (recv, len 0/1, senders 0; "
            "lock, held by g0; wait, counter 2; ...); '' when none",
            nullable=False,
        ),
    ]
)

GOROUTINE = pa.struct(
    [
        field("goroutine", pa.int32(), "program-canonical id", nullable=False),
        field("gpath", pa.string(), "canonical key path", nullable=False),
        field(
            "start_function",
            pa.string(),
            "the goroutine's start function (main.main, main.worker, testing.tRunner, ...)",
            nullable=False,
        ),
        field(
            "final_state",
            pa.string(),
            "state where the trace ends (or where reading stopped, when "
            "truncated): Running | Runnable | Waiting | Syscall | NotExist (ended)",
            nullable=False,
        ),
        field("final_reason", pa.string(), "the block reason when final_state is Waiting, else ''", nullable=False),
    ]
)

LEAKED = pa.struct(
    [
        field("goroutine", pa.int32(), "program-canonical id of the leaked goroutine", nullable=False),
        field("gpath", pa.string(), "its canonical key path", nullable=False),
        field(
            "state",
            pa.string(),
            "the state it was left in: created (never started) | runnable | running | syscall | "
            "blocked(REASON), e.g. blocked(select)",
            nullable=False,
        ),
        field(
            "reason",
            pa.string(),
            "a blocked one's block reason: chan send | chan receive | select | sync | sleep | ...; '' otherwise",
            nullable=False,
        ),
    ]
)

SCHEMA = pa.schema(
    [
        field("program_id", pa.string(), "the program directory's path relative to --programs (posix)", nullable=False),
        field(
            "program_hash",
            pa.string(),
            "content hash of the program's source files: the go_programs row of this program",
            nullable=False,
        ),
        field(
            "run_index", pa.int32(), "0 .. runs-1, each run its own process; -1 for the build_error row", nullable=False
        ),
        field(
            "status",
            pa.string(),
            "ok | leak (the program ended normally, exit 0 and a complete trace, with program goroutines still "
            "alive at the end, whatever their state, goleak's rule: listed in `leaked`; a main program's main "
            "goroutine and the testing framework's test goroutines never count, and the goroutines alive when "
            "main returns get a grace of 100 ms to end) | deadlock (timed out with "
            "every live program goroutine blocked on a channel, select or sync primitive) | timeout | panic | "
            "race (the race detector reported) | exit_error (any other non-zero exit, incl. fatal runtime "
            "errors and failing tests) | build_error (the program did not compile; the compiler's message is "
            "in stderr_tail)",
            nullable=False,
        ),
        field(
            "mode",
            pa.string(),
            "main (a main package) | test (a package with func TestX(t *testing.T))",
            nullable=False,
        ),
        field("race", pa.bool_(), "built with the race detector", nullable=False),
        field("gomaxprocs", pa.int32(), "GOMAXPROCS of the run; null when left to the runtime's default"),
        field(
            "exit_code",
            pa.int32(),
            "the process's exit code; -1 when killed by a signal (the harness kills "
            "a run at timeout + max(2s, timeout/2)); 124 when the injected watchdog ended a main program at "
            "its timeout",
            nullable=False,
        ),
        field("duration_ms", pa.int64(), "wall time of the run (of the build, for build_error)", nullable=False),
        field(
            "complete",
            pa.bool_(),
            "true when `events` is the run's whole story: the trace was written, read to its end without "
            "error, not truncated, holds at least one complete generation (a trace that is only its header, "
            "e.g. when a test panics while the trace is being stopped, does not), and the run ended by itself "
            "(ok, leak, panic, race, a failing test) or deadlocked. False for timeout (the run was cut, later "
            "events are unknown), truncated runs, lost traces (os.Exit, fatal runtime errors) and build_error. "
            "Incomplete runs are censored in go_next_event, never counted as having ended",
            nullable=False,
        ),
        field(
            "truncated", pa.bool_(), "the event cap (max_events) was hit; later events were not read", nullable=False
        ),
        field(
            "trace_error",
            pa.string(),
            "why the trace reader stopped early (a cut-short trace: the events of "
            "every complete generation are kept); null when it did not",
        ),
        field(
            "stderr_tail",
            pa.string(),
            "last 4000 bytes of the run's stderr (panic, race report, goroutine "
            "dump); for build_error the compiler's output; null when empty",
        ),
        field("stdout_tail", pa.string(), "last 4000 bytes of the run's stdout; null when empty"),
        field(
            "generations",
            pa.int32(),
            "complete trace generations the reader read (about one per second of the run); 0 for a trace that "
            "holds no generation (and for build_error)",
            nullable=False,
        ),
        field(
            "instrumentation",
            pa.string(),
            "how the program was built: rewritten (its channel and sync operations log their objects: ObjectOp "
            "events, objects on GoBlock/GoUnblock) | disabled (the rewrite option was off) | fallback (rewriting "
            "or building the rewritten source failed, so the original source was built; why: rewrite_error). A "
            "fallback is not a failure",
            nullable=False,
        ),
        field(
            "rewrite_error",
            pa.string(),
            "instrumentation fallback: why (the type checker's or the compiler's message, shortened); else null",
        ),
        field(
            "leaked",
            pa.list_(pa.field("item", LEAKED, nullable=False)),
            "status leak: the program goroutines still alive when the program ended, with their state; else empty",
            nullable=False,
        ),
        field("n_events", pa.int32(), "number of events", nullable=False),
        field(
            "events",
            pa.list_(pa.field("item", EVENT, nullable=False)),
            "the program's goroutine events in "
            "trace order (runtime, tracer, testing-framework and timer goroutines are dropped)",
            nullable=False,
        ),
        field(
            "goroutines",
            pa.list_(pa.field("item", GOROUTINE, nullable=False)),
            "the program goroutines that appear in this run",
            nullable=False,
        ),
        field("trace_bytes", pa.int64(), "size of the run's raw runtime/trace file; null when none was written"),
        field(
            "trace_stored",
            pa.bool_(),
            "the raw trace is in the go_traces table (false when none was written or it exceeded max_trace_bytes)",
            nullable=False,
        ),
        field(
            "go_version", pa.string(), "the Go toolchain that built and ran the program, e.g. go1.26.8", nullable=False
        ),
        field(
            "harness_version",
            pa.string(),
            "hash of the go_harness sources (the event mapping and filters)",
            nullable=False,
        ),
    ]
)
