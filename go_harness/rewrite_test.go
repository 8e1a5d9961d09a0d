package main

// The object rewriting (rewrite.go, objects_src.go) and the object events it
// yields (objects.go).

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// allOps has every operation form the rewriter handles, and forms it leaves
// alone (line 57: a call split over lines), spread over lines in ways that
// must keep their numbers.
const allOps = `package main

import "sync"

type guarded struct {
	sync.Mutex
	n int
}

func main() {
	ch := make(chan int, 3)
	ch <- 1; ch <- 2
	v := <-ch
	w, ok := <-ch
	_, _, _ = v, w, ok
	ch <- 3
	close(ch)
	for x := range ch {
		_ = x
	}
	var mu sync.Mutex
	mu.Lock()
	defer mu.Unlock()
	var rw sync.RWMutex
	rw.RLock(); rw.RUnlock()
	rw.Lock()
	rw.Unlock()
	g := &guarded{}
	g.Lock()
	g.n++
	g.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go wg.Done()
	wg.Wait()
	wg.Go(func() {
		g.Lock()
		g.Unlock()
	})
	wg.Wait()
	c := sync.NewCond(&mu)
	c.Signal()
	c.Broadcast()
	a, b := make(chan int), make(chan int, 1)
	b <- 1
	select {
	case <-a:
	case y := <-b:
		_ = y
	}
	select {
	case <-a:
	default:
	}
	ch2 := make(chan int,
		1)
	mu.
		Unlock()
	_ = <-ch2
}
`

func TestRewriteKeepsEveryLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "main.go")
	if err := os.WriteFile(path, []byte(allOps), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module prog\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewriteObjects(dir, false, false); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	orig, got := strings.Split(allOps, "\n"), strings.Split(string(out), "\n")
	if len(orig) != len(got) {
		t.Fatalf("%d lines, want %d", len(got), len(orig))
	}
	// Each rewritten line names its helpers; lines without operations are
	// untouched, and so are the operations the rewriter leaves alone.
	want := map[int][]string{
		11: {"_tracegenMake(make(chan int, 3))"},
		12: {"_tracegenSend(ch", "_tracegenSend(ch"},
		13: {"_tracegenRecv(ch)"},
		14: {"_tracegenRecv2(ch)"},
		16: {"_tracegenSend(ch"},
		17: {"_tracegenClose(ch)"},
		18: {"for x, _tracegenOK := _tracegenRecv2(ch); _tracegenOK; x, _tracegenOK = _tracegenRecv2(ch) {"},
		22: {"_tracegenLock(&mu)"},
		23: {"defer _tracegenUnlock(&mu)"},
		25: {"_tracegenRLock(&rw)", "_tracegenRUnlock(&rw)"},
		26: {"_tracegenRWLock(&rw)"},
		27: {"_tracegenRWUnlock(&rw)"},
		29: {"_tracegenLock(&g.Mutex)"},
		31: {"_tracegenUnlock(&g.Mutex)"},
		33: {"_tracegenWGAdd(&wg, 1)"},
		34: {"go wg.Done()"}, // a helper would become the goroutine's start function
		35: {"_tracegenWGWait(&wg)"},
		36: {"_tracegenWGGo(&wg, func() {"},
		37: {"_tracegenLock(&g.Mutex)"},
		38: {"_tracegenUnlock(&g.Mutex)"},
		40: {"_tracegenWGWait(&wg)"},
		41: {"_tracegenNewCond(sync.NewCond(&mu))"},
		42: {"_tracegenCondSignal(c)"},
		43: {"_tracegenCondBroadcast(c)"},
		44: {"_tracegenMake(make(chan int))", "_tracegenMake(make(chan int, 1))"},
		45: {"_tracegenSend(b"},
		46: {`_tracegenSelect(false, "recv", a, "recv", b); select {`},
		47: {"case <-a: _tracegenFired(0, a);"},
		48: {"case y := <-b: _tracegenFired(1, b);"},
		51: {`_tracegenSelect(true, "recv", a); select {`},
		52: {"case <-a: _tracegenFired(0, a);"},
		53: {"default: _tracegenFired(-1, nil);"},
		55: {"_tracegenMake(make(chan int,"},
		56: {"1))"},
		59: {"_tracegenRecv(ch2)"},
	}
	for i := range orig {
		parts, ok := want[i+1]
		if !ok {
			if got[i] != orig[i] {
				t.Errorf("line %d changed: %q -> %q", i+1, orig[i], got[i])
			}
			continue
		}
		rest := got[i]
		for _, p := range parts {
			k := strings.Index(rest, p)
			if k < 0 {
				t.Errorf("line %d %q lacks %q", i+1, got[i], p)
				break
			}
			rest = rest[k+len(p):]
		}
	}
	build := exec.Command(goTool(), "build", "-o", filepath.Join(dir, "prog.bin"), ".")
	build.Dir, build.Env = dir, goEnv()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the rewritten program does not build: %v\n%s", err, out)
	}
}

// objectEvents returns the run's events that name an object.
func objectEvents(r RunResult) []Event {
	var out []Event
	for _, e := range r.Events {
		if e.Object != "" || e.ObjectState != "" {
			out = append(out, e)
		}
	}
	return out
}

// has reports whether some event matches event, reason, object and a state
// regexp.
func has(evs []Event, event, reason, object, state string) bool {
	re := regexp.MustCompile("^" + state + "$")
	return slices.ContainsFunc(evs, func(e Event) bool {
		return e.Event == event && e.Reason == reason && e.Object == object && re.MatchString(e.ObjectState)
	})
}

func TestObjectStatesEveryRun(t *testing.T) {
	rs := runExample(t, "object_states", 3, 5*time.Second)
	wantStatus(t, rs, "ok")
	var ids [][]string
	for _, r := range rs {
		if r.Instrumentation != InstrRewritten || r.RewriteError != "" {
			t.Fatalf("run %d: instrumentation %q %q", r.RunIndex, r.Instrumentation, r.RewriteError)
		}
		evs := objectEvents(r)
		for _, c := range []struct{ event, reason, object, state string }{
			{"ObjectOp", "make", "chan@main.go:14", "len 0/2"},
			{"ObjectOp", "send", "chan@main.go:14", "len 2/2"},
			{"GoBlock", "chan send", "chan@main.go:14", "send, len 2/2, receivers 0"},
			{"ObjectOp", "lock", "mutex@main.go:29", "held by g0"},
			{"GoBlock", "sync", "mutex@main.go:29", "lock, held by g0"},
			{"ObjectOp", "add", "wg@main.go:31", "counter 3"},
			{"GoBlock", "sync", "wg@main.go:31", "wait, counter [1-3]"},
			{"ObjectOp", "done", "wg@main.go:31", "counter 0"},
			{"GoBlock", "select", "chan@main.go:45,chan@main.go:46",
				"select: recv chan@main.go:45 len 0/0, recv chan@main.go:46 len 0/1"},
			{"ObjectOp", "select", "chan@main.go:46", "recv, len 0/1"},
		} {
			if !has(evs, c.event, c.reason, c.object, c.state) {
				t.Errorf("run %d: no %s %s on %s with state %q", r.RunIndex, c.event, c.reason, c.object, c.state)
			}
		}
		// Three goroutines wait for the mutex main holds.
		blocked := 0
		for _, e := range evs {
			if e.Event == "GoBlock" && e.Object == "mutex@main.go:29" && e.ObjectState == "lock, held by g0" {
				blocked++
			}
			// Reported frames are the program's: the lines of main.go.
			if e.File != "main.go" || e.Line < 1 || strings.Contains(e.Function, "_tracegen") {
				t.Errorf("run %d: event at a generated frame: %+v", r.RunIndex, e)
			}
		}
		if blocked != 3 {
			t.Errorf("run %d: %d goroutines blocked on main's lock, want 3", r.RunIndex, blocked)
		}
		var runIDs []string
		for _, e := range evs {
			if !slices.Contains(runIDs, e.Object) {
				runIDs = append(runIDs, e.Object)
			}
		}
		slices.Sort(runIDs)
		ids = append(ids, runIDs)
	}
	for _, got := range ids[1:] {
		if !slices.Equal(got, ids[0]) {
			t.Fatalf("object ids differ across runs: %v vs %v", got, ids[0])
		}
	}
}

func TestCondWaitNamesTheCond(t *testing.T) {
	for _, r := range runExample(t, "cond_queue", 2, 5*time.Second) {
		evs := objectEvents(r)
		for _, c := range []struct{ event, reason, object, state string }{
			{"ObjectOp", "make", "cond@main.go:17", ""},
			{"GoBlock", "sync.(*Cond).Wait", "cond@main.go:(17|18)", "wait, waiters 1"},
			{"ObjectOp", "signal", "cond@main.go:(17|18)", "waiters [01]"},
			{"ObjectOp", "lock", "mutex@main.go:23", "held by g0(\\.1)?"},
		} {
			if !slices.ContainsFunc(evs, func(e Event) bool {
				return e.Event == c.event && e.Reason == c.reason &&
					regexp.MustCompile("^"+c.object+"$").MatchString(e.Object) &&
					regexp.MustCompile("^"+c.state+"$").MatchString(e.ObjectState)
			}) {
				t.Errorf("run %d: no %s %s on %s with state %q", r.RunIndex, c.event, c.reason, c.object, c.state)
			}
		}
	}
}

// The scheduler events' frames are the same with and without rewriting:
// every (event, reason, function, file, line) seen in runs of one build is
// seen in runs of the other (a test program, so the helpers live in a
// package other than main).
func TestRewritingKeepsReportedFrames(t *testing.T) {
	frames := func(rewrite bool) map[[3]string]bool {
		work := t.TempDir()
		p, err := Prepare(context.Background(), filepath.Join(examples, "two_tests"), work, ModeAuto, false, rewrite)
		if err != nil {
			t.Fatal(err)
		}
		cfg := RunConfig{Runs: 3, Timeout: 5 * time.Second, TestRegex: "^Test", MaxEvents: 20000,
			GOMAXPROCS: []int{1}, KeepTraces: false}
		out := map[[3]string]bool{}
		for i := range cfg.Runs {
			for _, e := range RunOnce(p, cfg, i, work).Events {
				if e.Event != "ObjectOp" && e.Event != "GoSched" {
					out[[3]string{e.Event, e.Function, e.File + ":" + strconv.Itoa(e.Line)}] = true
				}
			}
		}
		return out
	}
	with, without := frames(true), frames(false)
	for k := range with {
		if !without[k] {
			t.Errorf("only when rewritten: %v", k)
		}
	}
	for k := range without {
		if !with[k] {
			t.Errorf("only when not rewritten: %v", k)
		}
	}
}

func TestRewriteFallbackAndDisabled(t *testing.T) {
	dir := filepath.Join(examples, "rewrite_fallback")
	p, err := Prepare(context.Background(), dir, t.TempDir(), ModeAuto, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if p.Instrumentation != InstrFallback || !strings.Contains(p.RewriteError, "_tracegenSend redeclared") {
		t.Fatalf("instrumentation %q, error %q", p.Instrumentation, p.RewriteError)
	}
	if _, err := os.Stat(filepath.Join(p.SrcDir, objectsFile)); !os.IsNotExist(err) {
		t.Fatalf("the fallback build kept the helpers: %v", err)
	}
	r := RunOnce(p, RunConfig{Runs: 1, Timeout: 5 * time.Second, MaxEvents: 100, KeepTraces: false}, 0, t.TempDir())
	if r.Status != "ok" || r.Instrumentation != InstrFallback || r.RewriteError != p.RewriteError {
		t.Fatalf("run %+v", r)
	}
	p, err = Prepare(context.Background(), filepath.Join(examples, "object_states"), t.TempDir(), ModeAuto, false, false)
	if err != nil || p.Instrumentation != InstrDisabled || p.RewriteError != "" {
		t.Fatalf("disabled: %v %q %q", err, p.Instrumentation, p.RewriteError)
	}
	// A program the type checker rejects falls back before building twice.
	p, err = Prepare(context.Background(), filepath.Join(examples, "compile_error"), t.TempDir(), ModeAuto, false, true)
	if err == nil || p.Instrumentation != InstrFallback || !strings.HasPrefix(p.RewriteError, "rewrite: type-check: ") {
		t.Fatalf("compile_error: %v %q %q", err, p.Instrumentation, p.RewriteError)
	}
}
