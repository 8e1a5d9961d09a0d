"""The `go_next_event` table: empirical next-event distributions of a Go program over its runs.

One row per (program, prefix key). Only scheduler events count: a run's events are its go_runs `events`
without the annotations (UserLog, UserRegion, and the harness's ObjectOp), and depths, prefixes and hashes
are over those. Every
row counts, over the program's runs, what came next after
the key's prefix: one of the event types, or `End` (nothing: the run is known to have ended there).
Four keys (`prefix_kind`), each computed at *every* depth that any counted run reaches:

- `global`: depth k = the first k events of the run, whatever they were. Row k counts each run's
  event k.
- `goroutine`: depth k of goroutine g = the first k events *of g* (the run's events restricted to g).
  Row (g, k) counts each run's k-th event of g. Only runs in which g appears count. A goroutine leaked
  on an unsatisfiable select has, after its GoBlock(select) at depth j, only `End` at depth j+1 and no
  row deeper: P(GoUnblock) = 0 at every later depth.
- `goroutine_exact`: goroutine g's own history and the state it leaves g in: runs in which g's first k
  events are identical (as for `exact`) count, and `state` says where those k events left g (e.g.
  `blocked(select)` after a GoBlock on a select). A goroutine leaked on a select no goroutine can ever
  satisfy has, in every run, `End` after that GoBlock: the seed's claim "P(GoUnblock) = 0 for a goroutine
  leaked on an unsatisfiable select" is `counts.GoUnblock == 0` on the rows with that `state`, and `ends`
  shows those runs ended by `leak`; a select whose fate depends on the schedule has GoUnblock and End
  both, split by how the runs ended.
- `exact`: runs that agree exactly on their first k events (event identity: goroutine, event, reason,
  function, file, line; not time, not peer). Row (prefix, k) counts the runs sharing that prefix.
  Only prefixes shared by at least `min_prefix_runs` counted runs (default 2) get a row; a run's own
  unshared tail is already in go_runs.

How runs are counted (`n`): build_error rows never count. A run counts at depth k when its event k is
known (k < n_events; for `goroutine`, k < the number of g's events), giving that event's type; or when
k equals that length and the run is `complete` (go_runs.complete), giving `End`. An incomplete run
(timeout, truncated at the event cap, lost or cut-short trace) is censored: it counts at every depth
where its event is known and at no depth beyond, and never as `End`. So `n` can fall as k grows, and a
row exists only when n >= 1. Runs of different GOMAXPROCS values are pooled.
"""

import pyarrow as pa

from schemas.fields import field, named_values

VERSION = 4

EVENT_TYPES = ("GoCreate", "GoStart", "GoBlock", "GoUnblock", "GoSched", "GoEnd", "GoSyscall", "GoTransition")
END = "End"
OUTCOMES = EVENT_TYPES + (END,)
PREFIX_KINDS = ("global", "goroutine", "goroutine_exact", "exact")
RUN_ENDS = ("ok", "leak", "deadlock", "timeout", "other")

_OUTCOME_DOC = {END: "the run (global, exact) or the goroutine's sequence in it (goroutine) is known to end here"}

COUNTS = pa.struct(
    [
        field(name, pa.int32(), _OUTCOME_DOC.get(name, f"runs whose next event is {name}"), nullable=False)
        for name in OUTCOMES
    ]
)
PROBS = pa.struct([field(name, pa.float64(), f"counts.{name} / n", nullable=False) for name in OUTCOMES])
ENDS = pa.struct(
    [field(name, pa.int32(), f"counted runs whose status is {name}", nullable=False) for name in RUN_ENDS[:-1]]
    + [field("other", pa.int32(), "counted runs whose status is panic, race or exit_error", nullable=False)]
)

SCHEMA = pa.schema(
    [
        field("program_id", pa.string(), "the go_runs program_id", nullable=False),
        field(
            "prefix_kind",
            pa.string(),
            "global | goroutine | goroutine_exact | exact (see the table doc)",
            nullable=False,
        ),
        field(
            "depth",
            pa.int32(),
            "k: the prefix length (global, exact: events of the run; goroutine: events of "
            "that goroutine); the row describes event k (0-based), i.e. what follows k events",
            nullable=False,
        ),
        field(
            "goroutine",
            pa.int32(),
            "program-canonical goroutine id (as in go_runs) for goroutine and goroutine_exact rows; null for "
            "global and exact rows",
        ),
        field("gpath", pa.string(), "that goroutine's canonical key path; null for global and exact rows"),
        field(
            "state",
            pa.string(),
            "goroutine_exact rows: the goroutine's state after the prefix, from its last event: not_created "
            "(no event yet) | runnable (GoCreate, GoUnblock, GoSched) | running (GoStart, GoSyscall exit) | "
            "blocked(REASON) (GoBlock) | syscall (GoSyscall enter) | ended (GoEnd) | other; null for the "
            "other kinds. When the GoBlock names the object the goroutine waits on (go_runs events.object, "
            "object_state: a rewritten run), blocked(REASON: OBJECT STATE), e.g. 'blocked(chan receive: "
            "chan@main.go:12 recv, len 0/1, senders 0)', 'blocked(sync: mutex@main.go:9 lock, held by g0.2)'; "
            "the object and state are those of the row's first counted run (rows group runs by the exact "
            "prefix, which does not include object states)",
        ),
        field(
            "prefix_hash",
            pa.string(),
            "exact and goroutine_exact rows (for the latter over the goroutine's own events): hex of h_k, "
            "where h_0 = sha256(b'') and h_{i+1} = "
            "sha256(h_i || json.dumps([goroutine, event, reason, function, file, line]) of event i) (digests as "
            "raw bytes; JSON with separators (',', ':')); the prefix itself is events[:depth] of any run in "
            "`runs`. Null for global and goroutine rows",
        ),
        field("n", pa.int32(), "number of runs counted (see the table doc for censoring)", nullable=False),
        field(
            "runs",
            pa.list_(pa.field("item", pa.int32(), nullable=False)),
            "run_index of every counted run, ascending",
            nullable=False,
        ),
        field("counts", COUNTS, "raw counts per next event type; they sum to n", nullable=False),
        field("ends", ENDS, "how the counted runs ended (go_runs.status); they sum to n", nullable=False),
        field(
            "probs", PROBS, "empirical probabilities counts / n (unsmoothed: smooth from counts and n)", nullable=False
        ),
        field(
            "detail_counts",
            named_values(pa.int32()),
            "counts per event and reason as (name, value) entries, name 'Event' or 'Event(reason)', e.g. "
            "'GoBlock(select)'; sorted by name",
            nullable=False,
        ),
        field(
            "entropy",
            pa.float64(),
            "Shannon entropy of probs in bits (0 when every counted run agrees)",
            nullable=False,
        ),
    ]
)
