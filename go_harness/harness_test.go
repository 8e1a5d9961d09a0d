package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const examples = "../examples/go"

// prepare builds one bundled example into a fresh scratch dir.
func prepare(t *testing.T, name string, race bool) (*Program, string) {
	t.Helper()
	work := t.TempDir()
	p, err := Prepare(context.Background(), filepath.Join(examples, name), work, ModeAuto, race, true)
	if err != nil {
		t.Fatalf("prepare %s: %v", name, err)
	}
	return p, work
}

// runExample runs an example n times with the given per-run timeout.
func runExample(t *testing.T, name string, n int, timeout time.Duration) []RunResult {
	t.Helper()
	p, work := prepare(t, name, false)
	cfg := RunConfig{Runs: n, Timeout: timeout, TestRegex: "^Test", MaxEvents: 20000, KeepTraces: true}
	var out []RunResult
	for i := range n {
		out = append(out, RunOnce(p, cfg, i, work))
	}
	return out
}

type step struct {
	G            int
	GPath, Event string
	Reason, Func string
	Line, Peer   int
}

func steps(r RunResult) []step {
	var s []step
	for _, e := range r.Events {
		s = append(s, step{e.Goroutine, e.GPath, e.Event, e.Reason, e.Function, e.Line, e.Peer})
	}
	return s
}

func wantStatus(t *testing.T, rs []RunResult, status string) {
	t.Helper()
	for _, r := range rs {
		if r.Status != status {
			t.Fatalf("run %d: status %q, want %q (exit %d, stderr %q)", r.RunIndex, r.Status, status, r.ExitCode, r.StderrTail)
		}
		if len(r.Events) == 0 && status != "exit_error" {
			t.Fatalf("run %d: no events", r.RunIndex)
		}
	}
}

func TestProducerConsumerEventsAndIDs(t *testing.T) {
	rs := runExample(t, "producer_consumer", 3, 5*time.Second)
	wantStatus(t, rs, "ok")
	for _, r := range rs {
		got := map[string]string{}
		for _, g := range r.Goroutines {
			got[g.GPath] = g.StartFunction
		}
		want := map[string]string{"0": "main.main", "0.1": "main.produce", "0.2": "main.consume"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("goroutines = %v, want %v", got, want)
		}
		// The first scheduler event (the first event is the ObjectOp of a make).
		i := slices.IndexFunc(r.Events, func(e Event) bool { return e.Event != "ObjectOp" })
		first := r.Events[i]
		if first.Event != "GoCreate" || first.GPath != "0.1" || first.Peer != 0 || first.Function != "main.main" || first.File != "main.go" {
			t.Fatalf("first event = %+v", first)
		}
		for _, e := range r.Events {
			if e.Function != "" && !isUserFunc(e.Function) {
				t.Fatalf("non-user frame in event %+v", e)
			}
		}
	}
}

func TestSequentialIsDeterministic(t *testing.T) {
	rs := runExample(t, "sequential", 4, 5*time.Second)
	wantStatus(t, rs, "ok")
	for _, r := range rs[1:] {
		if !reflect.DeepEqual(steps(r), steps(rs[0])) {
			t.Fatalf("run %d differs:\n%v\n%v", r.RunIndex, steps(r), steps(rs[0]))
		}
	}
}

func TestDeadlockPanicTimeout(t *testing.T) {
	for name, status := range map[string]string{
		"abba_deadlock":   "deadlock",
		"stuck_test":      "deadlock",
		"goroutine_panic": "panic",
		"spin_forever":    "timeout",
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			rs := runExample(t, name, 1, time.Second)
			wantStatus(t, rs, status)
			if d := time.Since(start); d > 15*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

func TestTestPackageRootsPerTest(t *testing.T) {
	rs := runExample(t, "two_tests", 2, 5*time.Second)
	wantStatus(t, rs, "ok")
	for _, r := range rs {
		if r.Mode != ModeTest {
			t.Fatalf("mode %q", r.Mode)
		}
		roots := 0
		for _, g := range r.Goroutines {
			if !strings.Contains(g.GPath, ".") {
				roots++
				if g.StartFunction != "testing.tRunner" {
					t.Fatalf("root %+v", g)
				}
			} else if !strings.HasPrefix(g.StartFunction, "prog.") {
				t.Fatalf("non-program goroutine kept: %+v", g)
			}
		}
		if roots != 2 {
			t.Fatalf("roots = %d, want 2 (one per test)", roots)
		}
	}
}

func TestBuildErrorIsData(t *testing.T) {
	var out bytes.Buffer
	err := cmdRun([]string{"-dir", filepath.Join(examples, "compile_error"), "-work", t.TempDir(), "-runs", "2"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r RunResult
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &r) != nil {
		t.Fatalf("want one JSON line, got %q", out.String())
	}
	if r.Status != "build_error" || r.RunIndex != -1 || r.Mode != ModeMain || !strings.Contains(r.StderrTail, "main.go:6") {
		t.Fatalf("got %+v", r)
	}
}

func TestRunStdoutIsJSONLines(t *testing.T) {
	var out bytes.Buffer
	err := cmdRun([]string{"-dir", filepath.Join(examples, "worker_pool"), "-work", t.TempDir(),
		"-runs", "3", "-gomaxprocs", "1,2", "-max-events", "10", "-keep-traces=false"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<24)
	n := 0
	for sc.Scan() {
		var r RunResult
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if r.RunIndex != n || r.GOMAXPROCS == nil || *r.GOMAXPROCS != []int{1, 2}[n%2] {
			t.Fatalf("line %d: %+v", n, r)
		}
		if len(r.Events) != 10 || !r.Truncated || r.TraceFile != "" {
			t.Fatalf("line %d: %d events, truncated %v", n, len(r.Events), r.Truncated)
		}
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		if leaked, ok := raw["leaked"].([]any); !ok || len(leaked) != 0 || raw["generations"] != 1.0 {
			t.Fatalf("line %d: leaked %#v, generations %#v", n, raw["leaked"], raw["generations"])
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d lines", n)
	}
}

func TestCanonicalIDsAgreeAcrossRuns(t *testing.T) {
	rs := runExample(t, "fan_in", 4, 5*time.Second)
	wantStatus(t, rs, "ok")
	ids := func(r RunResult) map[string]string {
		m := map[string]string{}
		for _, g := range r.Goroutines {
			m[g.GPath] = g.StartFunction
		}
		for _, e := range r.Events {
			if e.Event == "GoCreate" {
				m[e.GPath] += "@" + e.Function + ":" + strconv.Itoa(e.Line)
			}
		}
		return m
	}
	for _, r := range rs[1:] {
		if !reflect.DeepEqual(ids(r), ids(rs[0])) {
			t.Fatalf("ids differ: %v vs %v", ids(r), ids(rs[0]))
		}
	}
}

func TestTruncatedTraceYieldsCompleteGenerations(t *testing.T) {
	rs := runExample(t, "spin_forever", 1, 2500*time.Millisecond)
	if rs[0].Status != "timeout" || rs[0].TraceFile == "" {
		t.Fatalf("status %q, trace file %q, stderr %q", rs[0].Status, rs[0].TraceFile, rs[0].StderrTail)
	}
	data, err := os.ReadFile(rs[0].TraceFile)
	if err != nil {
		t.Fatal(err)
	}
	full, err := ParseTrace(bytes.NewReader(data), DefaultParseOptions())
	if err != nil || full.TraceError != "" {
		t.Fatalf("full trace: %v %q", err, full.TraceError)
	}
	want := eventKeys(full.Events)
	if full.Generations < 2 || full.Generations != rs[0].Generations {
		t.Fatalf("a %d ms run has %d generations (run: %d)", rs[0].DurationMs, full.Generations, rs[0].Generations)
	}
	// What a cut trace yields is an error and a prefix of the full trace's events: every complete
	// generation before the cut, nothing invented. Cuts all over the file reach every generation
	// boundary (a 2.5 s run has three or four generations). A cut exactly at a boundary reads as a
	// complete, shorter trace: skipped.
	cuts := 0
	for i := 1; i < 32; i++ {
		n := len(data) * i / 32
		cut, err := ParseTrace(bytes.NewReader(data[:n]), DefaultParseOptions())
		if err != nil {
			t.Fatal(err)
		}
		if cut.TraceError == "" {
			continue
		}
		if got := eventKeys(cut.Events); !isPrefix(got, want) {
			t.Fatalf("trace cut at %d of %d bytes (%q): events\n%q\nare not a prefix of the full trace's\n%q",
				n, len(data), cut.TraceError, got, want)
		}
		if len(cut.Events) > 0 {
			cuts++
		}
		if cut.Generations >= full.Generations || (len(cut.Events) > 0) != (cut.Generations > 0) {
			t.Fatalf("trace cut at %d of %d bytes: %d of %d generations, %d events",
				n, len(data), cut.Generations, full.Generations, len(cut.Events))
		}
	}
	if cuts == 0 {
		t.Fatalf("no cut of the %d-byte trace kept a complete generation", len(data))
	}
	// A byte cut stops between generations, and only a generation that ends with the spinner
	// preempted but not yet restarted (it takes a busy machine) tests that a cut drops the
	// preemption it holds. Cut the transition stream after every transition instead: the
	// spinner is preempted every 10 ms and at each generation switch, whatever the load.
	var raws []rawTransition
	readTransitions(bytes.NewReader(data), func(rt *rawTransition) bool {
		raws = append(raws, *rt)
		return true
	})
	if res, _ := replay(full.Mode, raws, ""); !slices.Equal(eventKeys(res.Events), want) {
		t.Fatalf("replay of the full trace: %q, ParseTrace: %q", eventKeys(res.Events), want)
	}
	held := 0
	for k := 0; k <= len(raws); k++ {
		cut, h := replay(full.Mode, raws[:k], "cut")
		if got := eventKeys(cut.Events); !isPrefix(got, want) {
			t.Fatalf("cut after %d of %d transitions (preemption held: %v): events\n%q\nare not a prefix of the full trace's\n%q",
				k, len(raws), h, got, want)
		}
		if h {
			held++
		}
	}
	if held == 0 {
		t.Fatalf("the spinner was never preempted in %d transitions", len(raws))
	}
	if _, err := ParseTrace(bytes.NewReader(nil), DefaultParseOptions()); err != nil {
		t.Fatalf("empty input must not fail: %v", err)
	}
}

func TestHarnessKillsProcessGroup(t *testing.T) {
	// A "program" without the watchdog: only the harness-side kill ends it.
	dir := t.TempDir()
	bin := filepath.Join(dir, "hang.sh")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nsleep 60 &\nsleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := &Program{Mode: ModeMain, SrcDir: dir, Binary: bin, ModulePath: "prog"}
	start := time.Now()
	r := RunOnce(p, RunConfig{Runs: 1, Timeout: 100 * time.Millisecond, MaxEvents: 10}, 0, dir)
	if r.Status != "timeout" || time.Since(start) > 10*time.Second {
		t.Fatalf("status %q after %v", r.Status, time.Since(start))
	}
}

func TestRaceDetected(t *testing.T) {
	if testing.Short() {
		t.Skip("race builds are slow")
	}
	p, work := prepare(t, "data_race", true)
	r := RunOnce(p, RunConfig{Runs: 1, Timeout: 5 * time.Second, MaxEvents: 100}, 0, work)
	if r.Status != "race" {
		t.Fatalf("status %q, stderr %q", r.Status, r.StderrTail)
	}
}

// Under -race a hang is still a deadlock (or a timeout), never a race: the
// injected watchdog must not race with the harness's own init (issue 17). A
// main program that deadlocks, a test that deadlocks and a main program that
// spins are each built with -race; the racy example still reports race.
func TestRaceModeLabelsHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("race builds are slow")
	}
	for name, status := range map[string]string{
		"abba_deadlock": "deadlock",
		"stuck_test":    "deadlock",
		"spin_forever":  "timeout",
		"data_race":     "race",
	} {
		t.Run(name, func(t *testing.T) {
			p, work := prepare(t, name, true)
			r := RunOnce(p, RunConfig{Runs: 1, Timeout: time.Second, TestRegex: "^Test", MaxEvents: 20000}, 0, work)
			if r.Status != status {
				t.Fatalf("status %q, want %q (exit %d, stderr %q)", r.Status, status, r.ExitCode, r.StderrTail)
			}
		})
	}
}

func TestBuildErrorFromPrepare(t *testing.T) {
	_, err := Prepare(context.Background(), filepath.Join(examples, "compile_error"), t.TempDir(), ModeAuto, false, true)
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("want BuildError, got %v", err)
	}
}

func TestScratchInsideProgramDir(t *testing.T) {
	dir := t.TempDir()
	if err := copyTree(filepath.Join(examples, "producer_consumer"), dir, ""); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	var out bytes.Buffer
	if err := cmdRun([]string{"-dir", ".", "-work", "scratch", "-runs", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	var r RunResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Status != "ok" || len(r.Events) == 0 ||
		!filepath.IsAbs(r.TraceFile) {
		t.Fatalf("%v %+v", err, r)
	}
	if _, err := os.Stat(filepath.Join(dir, "scratch", "src", "scratch")); err == nil {
		t.Fatal("scratch dir was copied into itself")
	}
}

func TestSyntaxErrorReportsCompilerMessage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nfunc main() {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Prepare(context.Background(), dir, t.TempDir(), ModeAuto, false, true)
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(be.Output, "./main.go:3") {
		t.Fatalf("got %v", err)
	}
}

// firstBatchEnd is the offset just past the first batch of a Go 1.26 trace:
// the 16-byte header, then EvEventBatch (1), generation, M, timestamp and
// size as uvarints, then size bytes.
