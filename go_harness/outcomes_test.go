package main

// Run outcomes beyond the basic statuses: leaks, traces with no complete generation, goroutines the
// runtime starts for the program, and which frames count as the program's.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLeakedSelectNeverUnblocks(t *testing.T) {
	for _, r := range runExample(t, "leaked_select", 2, 5*time.Second) {
		if r.Status != "leak" {
			t.Fatalf("status %q", r.Status)
		}
		var last Event
		for _, e := range r.Events {
			if e.GPath == "0.1" {
				last = e
			}
		}
		if last.Event != "GoBlock" || last.Reason != "select" || last.Function != "main.waitForever" {
			t.Fatalf("leaked goroutine's last event = %+v", last)
		}
	}
}

// finalStates maps a leaked goroutine's state to its summary's final state.
var finalStates = map[string]string{"created": "Runnable", "runnable": "Runnable", "running": "Running",
	"syscall": "Syscall"}

// wantLeak checks a leak run: the leaked goroutines (gpath, state and
// reason) and that each is one of the run's goroutines, ending in that state.
func wantLeak(t *testing.T, r RunResult, want ...LeakedGoroutine) {
	t.Helper()
	if r.Status != "leak" || r.ExitCode != 0 || r.TraceError != "" || r.Generations < 1 {
		t.Fatalf("run %d: status %q exit %d trace_error %q generations %d, stderr %q",
			r.RunIndex, r.Status, r.ExitCode, r.TraceError, r.Generations, r.StderrTail)
	}
	var got []LeakedGoroutine
	for _, l := range r.Leaked {
		got = append(got, LeakedGoroutine{GPath: l.GPath, State: l.State, Reason: l.Reason})
		final, ok := finalStates[l.State]
		if !ok {
			final = "Waiting"
		}
		found := false
		for _, g := range r.Goroutines {
			if g.Goroutine == l.Goroutine {
				found = g.GPath == l.GPath && g.FinalState == final && g.FinalReason == l.Reason
			}
		}
		if !found {
			t.Fatalf("run %d: leaked %+v is not a goroutine of the run ending %s: %+v", r.RunIndex, l, final, r.Goroutines)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("run %d: leaked %+v, want %+v", r.RunIndex, got, want)
	}
}

func TestGoroutineBlockedAtNormalExitIsALeak(t *testing.T) {
	for _, r := range runExample(t, "leak_unsatisfiable_select", 3, 5*time.Second) {
		wantLeak(t, r, LeakedGoroutine{GPath: "0.1", State: "blocked(select)", Reason: "select"})
	}
	// A test binary that exits 0 has ended normally too: the goroutine the
	// test did not wait for is leaked.
	for _, r := range runExample(t, "leak_in_test", 2, 5*time.Second) {
		wantLeak(t, r, LeakedGoroutine{GPath: "0.1", State: "blocked(chan receive)", Reason: "chan receive"})
		if r.Mode != ModeTest {
			t.Fatalf("mode %q", r.Mode)
		}
	}
	// Leaks are decided on the end of the trace even when the events were
	// cut at the cap, and a leaked goroutine is always one of the run's
	// goroutines, with or without events of its own.
	p, work := prepare(t, "leak_unsatisfiable_select", false)
	for n := 1; n <= 3; n++ {
		r := RunOnce(p, RunConfig{Runs: 1, Timeout: 5 * time.Second, MaxEvents: n}, 0, work)
		if !r.Truncated || len(r.Events) != n {
			t.Fatalf("cap %d: truncated %v, %d events", n, r.Truncated, len(r.Events))
		}
		wantLeak(t, r, LeakedGoroutine{GPath: "0.1", State: "blocked(select)", Reason: "select"})
	}
	// Runs that end otherwise list nothing.
	for _, name := range []string{"producer_consumer", "abba_deadlock"} {
		r := runExample(t, name, 1, time.Second)[0]
		if len(r.Leaked) != 0 || r.Leaked == nil {
			t.Fatalf("%s: status %q, leaked %#v", name, r.Status, r.Leaked)
		}
	}
}

// A goroutine alive at the end is leaked whatever its state: never started
// (queued behind 400 others when a test binary stops its trace), computing,
// asleep. Goroutines about to end when main returns end in its grace.
func TestLeakWhateverTheState(t *testing.T) {
	// Queued last behind 400 ms of work, the notifier has not started when the
	// trace stops in most runs (a busy machine can delay the stop past it).
	notifier := false
	for _, r := range runExample(t, "leak_never_started", 6, 5*time.Second) {
		start := map[int]string{}
		for _, g := range r.Goroutines {
			start[g.Goroutine] = g.StartFunction
		}
		var want []LeakedGoroutine
		for _, l := range r.Leaked {
			if l.State != "created" && l.State != "runnable" && l.State != "blocked(chan receive)" {
				t.Fatalf("queued: leaked %+v", l)
			}
			notifier = notifier || l.State == "created" && start[l.Goroutine] == "prog.Notify"
			want = append(want, LeakedGoroutine{GPath: l.GPath, State: l.State, Reason: l.Reason})
		}
		wantLeak(t, r, want...)
	}
	if !notifier {
		t.Fatal("the notifier started in every run")
	}
	for _, r := range runExample(t, "leak_busy_loop", 2, 5*time.Second) {
		if len(r.Leaked) != 1 || r.Leaked[0].State != "running" && r.Leaked[0].State != "runnable" {
			t.Fatalf("busy loop: leaked %+v", r.Leaked)
		}
		wantLeak(t, r, LeakedGoroutine{GPath: "0.1", State: r.Leaked[0].State})
	}
	for _, r := range runExample(t, "leak_sleeping", 2, 5*time.Second) {
		wantLeak(t, r, LeakedGoroutine{GPath: "0.1", State: "blocked(sleep)", Reason: "sleep"})
	}
	for _, name := range []string{"pingpong_unbuffered", "init_goroutine", "select_timeout"} {
		for _, r := range runExample(t, name, 2, 5*time.Second) {
			if r.Status != "ok" {
				t.Fatalf("%s: status %q, leaked %+v", name, r.Status, r.Leaked)
			}
		}
	}
}

func TestClassifyRun(t *testing.T) {
	race := "WARNING: DATA RACE\n"
	for _, c := range []struct {
		exit           int
		timedOut       bool
		stderr         string
		blocked, leaks bool
		want           string
	}{
		{0, false, "", false, false, "ok"},
		{0, false, "", false, true, "leak"},
		{0, false, race, false, true, "race"}, // race wins over leak
		{124, true, "", true, true, "deadlock"},
		{124, true, "", false, true, "timeout"},
		{2, false, "panic: x\n\ngoroutine 1 [running]:\n", false, true, "panic"},
		{1, false, "", false, true, "exit_error"},
	} {
		if got := classifyRun(c.exit, c.timedOut, c.stderr, c.blocked, c.leaks); got != c.want {
			t.Errorf("classifyRun(%d, %v, %q, %v, %v) = %q, want %q", c.exit, c.timedOut, c.stderr, c.blocked, c.leaks, got, c.want)
		}
	}
}

func firstBatchEnd(t *testing.T, data []byte) int {
	t.Helper()
	const header = 16
	if !bytes.HasPrefix(data, []byte("go 1.26 trace\x00")) {
		t.Fatalf("not a Go 1.26 trace: %q", data[:min(len(data), header)])
	}
	r := bytes.NewReader(data[header:])
	if typ, err := r.ReadByte(); err != nil || typ != 1 {
		t.Fatalf("first batch type %d, %v", typ, err)
	}
	var size uint64
	for range 4 { // generation, M, timestamp, size
		v, err := binary.ReadUvarint(r)
		if err != nil {
			t.Fatal(err)
		}
		size = v
	}
	return len(data) - r.Len() + int(size)
}

// A trace that is its header and nothing else, or its header and the first
// (sync) batch, which is what a test binary that panics while the testing
// framework stops the trace leaves (67-69 bytes), reads without error and
// without events: only generations (0) says that nothing is known.
func TestHeaderOnlyTraceHasNoGenerations(t *testing.T) {
	r := runExample(t, "sequential", 1, 5*time.Second)[0]
	if r.Status != "ok" || r.Generations < 1 {
		t.Fatalf("status %q, generations %d", r.Status, r.Generations)
	}
	data, err := os.ReadFile(r.TraceFile)
	if err != nil {
		t.Fatal(err)
	}
	end := firstBatchEnd(t, data)
	if end > 100 {
		t.Fatalf("first batch ends at %d", end)
	}
	dir := t.TempDir()
	for _, n := range []int{16, end} {
		for _, mode := range []Mode{ModeAuto, ModeMain, ModeTest} {
			opt := DefaultParseOptions()
			opt.Mode = mode
			res, err := ParseTrace(bytes.NewReader(data[:n]), opt)
			if err != nil || res.TraceError != "" || len(res.Events) != 0 || res.Generations != 0 {
				t.Fatalf("%d-byte trace, mode %s: %v, trace error %q, %d events, generations %d",
					n, mode, err, res.TraceError, len(res.Events), res.Generations)
			}
		}
		file := filepath.Join(dir, "cut.trace")
		if err := os.WriteFile(file, data[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		if got := readTrailer(t, file)["generations"]; got != 0.0 {
			t.Fatalf("%d-byte trace: trailer generations %v", n, got)
		}
	}
	if got := readTrailer(t, r.TraceFile)["generations"]; got != float64(r.Generations) {
		t.Fatalf("trailer generations %v, run %d", got, r.Generations)
	}
}

// readTrailer runs `go_harness parse` on a trace and returns its trailer.
func readTrailer(t *testing.T, file string) map[string]any {
	t.Helper()
	var out bytes.Buffer
	if err := cmdParse([]string{"-trace", file}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil || m["end"] != true {
		t.Fatalf("trailer %q: %v", lines[len(lines)-1], err)
	}
	return m
}

// logAfterTest is a test whose goroutine logs once the test has completed,
// which panics ("Log in goroutine after TestLate has completed") while the
// testing framework is stopping the trace or just before: a race, so the
// trace is whole, cut, or only its header.
var logAfterTest = map[string]string{
	"late.go": "package late\n\nfunc Work(ch chan int) { ch <- 1 }\n",
	"late_test.go": `package late

import (
	"testing"
	"time"
)

// completed reports whether t has completed: t.Log panics once it has.
func completed(t *testing.T) (done bool) {
	defer func() { done = recover() != nil }()
	t.Log("still running")
	return false
}

func TestLate(t *testing.T) {
	ch := make(chan int)
	go Work(ch)
	<-ch
	go func() {
		for !completed(t) {
			time.Sleep(20 * time.Microsecond)
		}
		t.Log("too late")
	}()
}
`,
}

func TestPanicWhileTheTraceStops(t *testing.T) {
	dir := t.TempDir()
	for name, src := range logAfterTest {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	work := t.TempDir()
	p, err := Prepare(context.Background(), dir, work, ModeAuto, false, true)
	if err != nil {
		t.Fatal(err)
	}
	cfg := RunConfig{Runs: 1, Timeout: 5 * time.Second, TestRegex: "^Test", MaxEvents: 20000, KeepTraces: true}
	for i := range 6 {
		r := RunOnce(p, cfg, i, work)
		size := -1
		if fi, err := os.Stat(r.TraceFile); err == nil {
			size = int(fi.Size())
		}
		t.Logf("run %d: status %s, %d-byte trace, generations %d, %d events, trace error %q",
			i, r.Status, size, r.Generations, len(r.Events), r.TraceError)
		// Usually a panic; once in a while the binary exits first, leaving the
		// logging goroutine asleep (ok) or blocked (leak).
		if r.Status != "panic" && r.Status != "leak" && r.Status != "ok" {
			t.Fatalf("run %d: status %q, stderr %q", i, r.Status, r.StderrTail)
		}
		if size >= 0 && size < 100 && (r.Generations != 0 || r.TraceError != "" || len(r.Events) != 0) {
			t.Fatalf("run %d: a %d-byte trace has generations %d, trace error %q, %d events",
				i, size, r.Generations, r.TraceError, len(r.Events))
		}
		if len(r.Events) > 0 && r.Generations < 1 {
			t.Fatalf("run %d: %d events but no complete generation", i, len(r.Events))
		}
	}
}

// A time.AfterFunc callback has no creating program goroutine; it is kept
// under the root of its start function, with the same gpath in every run.
func TestAfterFuncCallbackKeptWithStableGPath(t *testing.T) {
	want := fmt.Sprintf("%d.1", siteRoot("main.main.func1"))
	for _, r := range runExample(t, "afterfunc_callback", 3, 5*time.Second) {
		if r.Status != "ok" {
			t.Fatalf("status %q", r.Status)
		}
		var paths []string
		for _, g := range r.Goroutines {
			paths = append(paths, g.GPath+"="+g.StartFunction)
		}
		if !slices.Equal(paths, []string{"0=main.main", want + "=main.main.func1"}) {
			t.Fatalf("goroutines %v", paths)
		}
		kinds, unblocked := map[string]int{}, 0
		for _, e := range r.Events {
			if e.Event == "GoUnblock" && e.Peer == 1 {
				unblocked++ // main, by the callback's receive (main is parked sending by then)
			}
			if e.GPath != want {
				continue
			}
			kinds[e.Event]++
			if e.Event == "GoCreate" && (e.Peer != -1 || e.Function != "") {
				t.Fatalf("the callback's creation has a creator: %+v", e)
			}
		}
		if kinds["GoCreate"] != 1 || kinds["GoStart"] < 1 || kinds["GoEnd"] != 1 || unblocked < 1 {
			t.Fatalf("callback events %v, %d unblocks by the callback", kinds, unblocked)
		}
	}
}

// No event names a generated function or file: the test binary's main
// (_testmain.go), the harness's watchdog file and its main._tracegen*.
func TestNoGeneratedFrames(t *testing.T) {
	for _, name := range []string{"two_tests", "subtests_shards", "producer_consumer", "stuck_test"} {
		for _, r := range runExample(t, name, 1, time.Second) {
			for _, e := range r.Events {
				if e.Function != "" && !isProgramFrame(e.Function, e.File) || strings.Contains(e.Function, "_tracegen") {
					t.Fatalf("%s: event %+v", name, e)
				}
			}
		}
	}
}
