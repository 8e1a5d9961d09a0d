package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/exp/trace"
)

func TestTransitionEventMapping(t *testing.T) {
	const (
		ne = trace.GoNotExist
		rb = trace.GoRunnable
		rn = trace.GoRunning
		wt = trace.GoWaiting
		sc = trace.GoSyscall
	)
	cases := []struct {
		from, to     trace.GoState
		reason       string
		event, wantR string
	}{
		{ne, rb, "", "GoCreate", ""},
		{ne, wt, "", "GoCreate", "created blocked"},
		{rb, rn, "", "GoStart", ""},
		{rn, wt, "chan send", "GoBlock", "chan send"},
		{wt, rb, "", "GoUnblock", ""},
		{rn, rb, "preempted", "GoSched", "preempted"},
		{rn, ne, "", "GoEnd", ""},
		{sc, ne, "", "GoEnd", ""},
		{rn, sc, "", "GoSyscall", "enter"},
		{sc, rn, "", "GoSyscall", "exit"},
		{sc, rb, "", "GoSyscall", "exit blocked"},
		{wt, rn, "", "GoTransition", "Waiting->Running"},
	}
	for _, c := range cases {
		ev, r := transitionEvent(c.from, c.to, c.reason)
		if ev != c.event || r != c.wantR {
			t.Errorf("%v->%v: got (%q, %q), want (%q, %q)", c.from, c.to, ev, r, c.event, c.wantR)
		}
	}
}

func TestUserFrames(t *testing.T) {
	user := []string{"main.main", "main.main.func1", "prog.TestX", "example.com/a/b.(*T).M", "prog_test.TestY", "golang.org/x/sync/errgroup.(*Group).Go"}
	notUser := []string{"runtime.gopark", "sync.(*Mutex).Lock", "internal/sync.(*Mutex).lockSlow",
		"testing.tRunner", "runtime/trace.Start.func1", "fmt.Fprintln", "os.(*File).Write", "vendor/golang.org/x/net/dns/dnsmessage.(*Parser).Start", ""}
	for _, fn := range user {
		if !isUserFunc(fn) {
			t.Errorf("isUserFunc(%q) = false", fn)
		}
	}
	for _, fn := range notUser {
		if isUserFunc(fn) {
			t.Errorf("isUserFunc(%q) = true", fn)
		}
	}
	if got := funcPackage("example.com/a/b.F.func1"); got != "example.com/a/b" {
		t.Errorf("funcPackage = %q", got)
	}
}

func TestInternalStart(t *testing.T) {
	for fn, want := range map[string]bool{
		"runtime.gcBgMarkWorker":        true,
		"runtime/trace.Start.func1":     true,
		"internal/runtime/x.f":          true,
		"testing.(*M).startAlarm.func1": true,
		"time.goFunc":                   true,
		"main._tracegenWatchdog":        true,
		"":                              true,
		"testing.tRunner":               false,
		"main.worker":                   false,
		"sync.(*WaitGroup).Go.func1":    false,
		"main.main.func1":               false,
	} {
		if got := internalStart(fn); got != want {
			t.Errorf("internalStart(%q) = %v, want %v", fn, got, want)
		}
	}
}

func TestSortByPathIsBreadthFirst(t *testing.T) {
	gs := []*gInfo{{path: []int{0, 2, 1}}, {path: []int{0, 10}}, {path: []int{0}}, {path: []int{0, 2}}, {path: []int{1}}, {path: []int{0, 1}}}
	sortByPath(gs)
	var got []string
	for _, g := range gs {
		got = append(got, g.gpath())
	}
	want := []string{"0", "1", "0.1", "0.2", "0.10", "0.2.1"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v, want %v", got, want)
		}
	}
}

func TestRenameUndoesMainRename(t *testing.T) {
	p := &traceParser{opt: DefaultParseOptions()}
	for in, want := range map[string]string{
		"main.tracegenUserMain":       "main.main",
		"main.tracegenUserMain.func2": "main.main.func2",
		"main.tracegenUserMainX":      "main.tracegenUserMainX",
		"main.worker":                 "main.worker",
	} {
		if got := p.rename(in); got != want {
			t.Errorf("rename(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseRejectsNonPositiveCap(t *testing.T) {
	opt := DefaultParseOptions()
	opt.MaxEvents = 0
	if _, err := ParseTrace(nil, opt); err == nil {
		t.Fatal("want error for MaxEvents = 0")
	}
}

// synth builds a parser over synthetic transitions (stacks via MakeStack).
func synth(mode Mode, raws []rawTransition) *ParseResult {
	res, _ := replay(mode, raws, "")
	return res
}

// replay steps a parser through raws as ParseTrace does for a trace whose
// reader stopped with traceError ("" for a complete trace, else a trace cut
// right after raws). held reports whether a preemption was still held back
// when the transitions ran out.
func replay(mode Mode, raws []rawTransition, traceError string) (res *ParseResult, held bool) {
	opt := DefaultParseOptions()
	opt.Mode = mode
	res = &ParseResult{Mode: mode, Events: []Event{}, Goroutines: []GoroutineSummary{}, TraceError: traceError}
	p := newParser(opt, res)
	for i := range raws {
		p.step(&raws[i])
	}
	held = p.heldPreemption != nil
	p.finish()
	return res, held
}

// eventKeys renders what must agree between a cut trace and the full one (the
// dense ids may differ: they rank the goroutines that appear in the output).
func eventKeys(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%d %s %s %q %s %s:%d @%d",
			e.Index, e.GPath, e.Event, e.Reason, e.Function, e.File, e.Line, e.TimeNs))
	}
	return out
}

// isPrefix reports whether got is a prefix of full.
func isPrefix(got, full []string) bool {
	return len(got) <= len(full) && slices.Equal(got, full[:len(got)])
}

func stk(fns ...string) trace.Stack {
	var fr []trace.StackFrame
	for i, fn := range fns {
		fr = append(fr, trace.StackFrame{PC: uint64(i + 1), Func: fn, File: "prog/main.go", Line: uint64(10 + i)})
	}
	return trace.MakeStack(fr)
}

func TestSyntheticFilteringFoldingAndStates(t *testing.T) {
	const (
		ud = trace.GoUndetermined
		ne = trace.GoNotExist
		rb = trace.GoRunnable
		rn = trace.GoRunning
		wt = trace.GoWaiting
		sc = trace.GoSyscall
	)
	raws := []rawTransition{
		{t: 100, id: 1, from: ud, to: rn},                                                                 // status record: dropped
		{t: 110, id: 9, actor: 1, from: ne, to: rb, stack: stk("runtime.gcBgMarkWorker")},                 // runtime: dropped
		{t: 120, id: 2, actor: 1, from: ne, to: rb, stack: stk("main.worker"), evStack: stk("main.main")}, // kept 0.1
		{t: 130, id: 1, from: rn, to: wt, reason: "chan receive", stack: stk("runtime.chanrecv1", "main.main")},
		{t: 140, id: 2, from: rb, to: rn},
		{t: 150, id: 2, from: rn, to: sc, stack: stk("syscall.write", "main.worker")},
		{t: 160, id: 2, from: sc, to: rb}, // slow exit: folded
		{t: 170, id: 2, from: rb, to: rb}, // status record: dropped
		{t: 180, id: 2, from: rb, to: rn}, // reported as GoSyscall exit
		{t: 190, id: 9, from: rb, to: rn}, // not the program's
		{t: 200, id: 2, from: rn, to: wt, reason: "select", stack: stk("runtime.selectgo", "main.worker")},
	}
	res := synth(ModeMain, raws)
	var got []string
	for _, e := range res.Events {
		got = append(got, e.GPath+" "+e.Event+" "+e.Reason+" "+e.Function)
	}
	want := []string{
		"0.1 GoCreate  main.main",
		"0 GoBlock chan receive main.main",
		"0.1 GoStart  main.worker",
		"0.1 GoSyscall enter main.worker",
		"0.1 GoSyscall exit main.worker",
		"0.1 GoBlock select main.worker",
	}
	if len(got) != len(want) {
		t.Fatalf("events:\n%v\nwant\n%v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
	if res.Events[0].Peer != 0 || res.Events[0].TimeNs != 0 || res.Events[4].TimeNs != 60 {
		t.Fatalf("peer/time: %+v %+v", res.Events[0], res.Events[4])
	}
	if !res.AllBlocked || len(res.Goroutines) != 2 || res.Goroutines[1].FinalReason != "select" {
		t.Fatalf("summary: blocked=%v %+v", res.AllBlocked, res.Goroutines)
	}
}

func TestSyntheticTestRootsAndCap(t *testing.T) {
	const (
		ne = trace.GoNotExist
		rb = trace.GoRunnable
		rn = trace.GoRunning
	)
	runner := stk("testing.(*T).Run", "testing.runTests.func1", "testing.tRunner", "testing.runTests")
	raws := []rawTransition{
		{id: 5, actor: 1, from: ne, to: rb, stack: stk("testing.(*M).startAlarm.func1")},
		{id: 6, actor: 1, from: ne, to: rb, stack: stk("testing.tRunner"), evStack: runner},
		{id: 7, actor: 6, from: ne, to: rb, stack: stk("prog.helper"), evStack: stk("prog.TestA")},
		{id: 8, actor: 1, from: ne, to: rb, stack: stk("testing.tRunner"), evStack: runner},
		{id: 8, from: rb, to: rn},
	}
	if m := detectMode(raws); m != ModeTest {
		t.Fatalf("detected %q", m)
	}
	res := synth(ModeTest, raws)
	var paths []string
	for _, g := range res.Goroutines {
		paths = append(paths, g.GPath)
	}
	if len(paths) != 3 || paths[0] != "0" || paths[1] != "1" || paths[2] != "0.1" {
		t.Fatalf("paths %v", paths)
	}
	if res.Events[1].Goroutine != 2 || res.Events[1].Peer != 0 {
		t.Fatalf("child event %+v", res.Events[1])
	}
	opt := DefaultParseOptions()
	opt.Mode, opt.MaxEvents = ModeTest, 2
	capped := &ParseResult{Mode: ModeTest, Events: []Event{}}
	p := newParser(opt, capped)
	for i := range raws {
		p.step(&raws[i])
	}
	p.finish()
	if len(capped.Events) != 2 || !capped.Truncated {
		t.Fatalf("cap: %d events, truncated %v", len(capped.Events), capped.Truncated)
	}
}

func TestAPreemptionNoOtherGoroutineSawIsDropped(t *testing.T) {
	raws := preemptionTrace()
	res := synth(ModeMain, raws)
	var got []string
	for _, e := range res.Events {
		got = append(got, e.GPath+" "+e.Event+" "+e.Reason)
	}
	want := []string{"0.1 GoCreate ", "0 GoSched preempted", "0.1 GoStart ", "0.1 GoBlock select", "0 GoStart ",
		"0 GoSched preempted"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
	for i, e := range res.Events {
		if e.Index != i {
			t.Fatalf("event %d has index %d", i, e.Index)
		}
	}
}

// preemptionTrace: a preemption nobody saw (folded), one the worker saw
// (kept), and one at the very end.
func preemptionTrace() []rawTransition {
	const (
		ne = trace.GoNotExist
		rb = trace.GoRunnable
		rn = trace.GoRunning
		wt = trace.GoWaiting
	)
	return []rawTransition{
		{t: 100, id: 1, from: trace.GoUndetermined, to: rn},
		{t: 110, id: 1, from: rn, to: rb, reason: "preempted", stack: stk("main.main")}, // invisible: dropped
		{t: 120, id: 1, from: rb, to: rn},                                               // with its restart
		{t: 130, id: 2, actor: 1, from: ne, to: rb, stack: stk("main.worker"), evStack: stk("main.main")},
		{t: 140, id: 1, from: rn, to: rb, reason: "preempted", stack: stk("main.main")}, // the worker runs next: kept
		{t: 150, id: 2, from: rb, to: rn},
		{t: 160, id: 2, from: rn, to: wt, reason: "select", stack: stk("runtime.selectgo", "main.worker")},
		{t: 170, id: 1, from: rb, to: rn},
		{t: 180, id: 1, from: rn, to: rb, reason: "preempted", stack: stk("main.main")}, // last: kept unless the trace was cut
	}
}

// A cut trace (the reader stopped with an error) must not flush a preemption
// it still holds: its restart may be in the lost part, where the full trace
// folds the pair away. What a cut yields is a prefix of the full trace's events.
func TestACutTraceDropsAHeldPreemption(t *testing.T) {
	raws := preemptionTrace()
	full := eventKeys(synth(ModeMain, raws).Events)
	if n := len(full); n != 6 || !strings.Contains(full[n-1], `GoSched "preempted"`) {
		t.Fatalf("a complete trace keeps its final preemption: %q", full)
	}
	held := 0
	for k := 0; k <= len(raws); k++ {
		cut, h := replay(ModeMain, raws[:k], "failed to read full batch")
		got := eventKeys(cut.Events)
		if !isPrefix(got, full) {
			t.Fatalf("cut after %d transitions: events\n%q\nare not a prefix of the full trace's\n%q", k, got, full)
		}
		if h {
			held++
			if n := len(got); n > 0 && strings.Contains(got[n-1], `GoSched "preempted"`) {
				t.Fatalf("cut after %d transitions emitted the preemption it held: %q", k, got)
			}
		}
	}
	if held != 3 {
		t.Fatalf("%d cuts held a preemption, want 3", held)
	}
}

// stkAt builds a stack from "func@file" entries (innermost first).
func stkAt(entries ...string) trace.Stack {
	var fr []trace.StackFrame
	for i, e := range entries {
		fn, file, _ := strings.Cut(e, "@")
		fr = append(fr, trace.StackFrame{PC: uint64(100 + i), Func: fn, File: file, Line: uint64(20 + i)})
	}
	return trace.MakeStack(fr)
}

func TestProgramFrames(t *testing.T) {
	for _, c := range []struct {
		fn, file string
		want     bool
	}{
		{"main.main", "prog/main.go", true},
		{"main.main", "_testmain.go", false}, // the test binary's generated main
		{"main.main", "prog/_testmain.go", false},
		{"main.main", "prog/" + watchdogFile, false}, // the harness's main, calling the user's
		{"main._tracegenStop.func1", "prog/" + watchdogFile, false},
		{"prog.TestX", "prog/x_test.go", true},
		{"testing.tRunner", "testing/testing.go", false},
	} {
		if got := isProgramFrame(c.fn, c.file); got != c.want {
			t.Errorf("isProgramFrame(%q, %q) = %v, want %v", c.fn, c.file, got, c.want)
		}
	}
}

// A test root's creation and the testing main goroutine's unblocks have only
// the generated main (_testmain.go) below the testing package: no frame. A
// goroutine's position before a folded preemption never carries over to its
// later events once it moved into code without a program frame.
func TestFramesAreProgramFramesOrNone(t *testing.T) {
	const (
		ne = trace.GoNotExist
		rb = trace.GoRunnable
		rn = trace.GoRunning
		wt = trace.GoWaiting
		sc = trace.GoSyscall
	)
	testMain := stkAt("testing.(*T).Run@testing/testing.go", "testing.runTests.func1@testing/testing.go",
		"testing.tRunner@testing/testing.go", "testing.runTests@testing/testing.go",
		"testing.(*M).Run@testing/testing.go", "main.main@_testmain.go")
	inTesting := stkAt("runtime.gopark@runtime/proc.go", "testing.tRunner.func1@testing/testing.go",
		"testing.tRunner@testing/testing.go")
	raws := []rawTransition{
		{t: 10, id: 6, actor: 1, from: ne, to: rb, stack: stkAt("testing.tRunner@testing/testing.go"), evStack: testMain},
		{t: 20, id: 6, from: rb, to: rn},
		{t: 30, id: 6, from: rn, to: rb, reason: "preempted", stack: stkAt("prog.TestA@prog/a_test.go", "testing.tRunner@testing/testing.go")},
		{t: 40, id: 6, from: rb, to: rn}, // folded with the preemption
		{t: 50, id: 6, from: rn, to: sc, stack: stkAt("syscall.write@syscall/syscall.go", "testing.tRunner.func1@testing/testing.go")},
		{t: 60, id: 6, from: sc, to: rn},
		{t: 70, id: 6, from: rn, to: wt, reason: "chan receive", stack: inTesting},
		{t: 80, id: 6, actor: 1, from: wt, to: rb, evStack: stkAt("testing.(*M).Run@testing/testing.go", "main.main@_testmain.go")},
		{t: 90, id: 6, from: rb, to: rn},
		{t: 100, id: 6, from: rn, to: ne},
	}
	res := synth(ModeTest, raws)
	var got []string
	for _, e := range res.Events {
		got = append(got, fmt.Sprintf("%s %s %q %s", e.Event, e.Reason, e.Function, e.File))
	}
	want := []string{
		`GoCreate  "" `, `GoStart  "" `,
		`GoSyscall enter "" `, `GoSyscall exit "" `, `GoBlock chan receive "" `,
		`GoUnblock  "" `, `GoStart  "" `, `GoEnd  "" `,
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
}

// Goroutines no program goroutine created: time.AfterFunc callbacks (no
// creating goroutine, or the timer machinery on whatever goroutine ran it)
// with a program start function are kept under a root of their own, keyed
// by the start function, numbered per root in creation order; standard-
// library helpers are dropped but count for the deadlock rule.
func TestRuntimeStartedAndHelperGoroutines(t *testing.T) {
	const (
		ud = trace.GoUndetermined
		ne = trace.GoNotExist
		rb = trace.GoRunnable
		rn = trace.GoRunning
		wt = trace.GoWaiting
		sc = trace.GoSyscall
		no = trace.NoGoroutine
	)
	tick, tock := siteRoot("main.tick"), siteRoot("main.tock")
	raws := []rawTransition{
		{t: 1, id: 1, from: ud, to: rn},
		{t: 2, id: 2, actor: no, from: ne, to: rb, stack: stk("main.tick")},                                                                    // AfterFunc callback: kept
		{t: 3, id: 3, actor: no, from: ne, to: rb, stack: stk("main.tick")},                                                                    // the same function again
		{t: 4, id: 4, actor: no, from: ne, to: rb, stack: stk("context.WithDeadlineCause.func2")},                                              // the library's own callback
		{t: 5, id: 5, actor: 1, from: ne, to: rb, stack: stk("os/exec.(*Cmd).Start.func2"), evStack: stk("os/exec.(*Cmd).Start", "main.main")}, // helper
		{t: 6, id: 6, actor: 5, from: ne, to: rb, stack: stk("io.copyBuffer"), evStack: stk("os/exec.(*Cmd).Start.func2")},                     // helper's helper
		{t: 7, id: 7, actor: 1, from: ne, to: rb, stack: stk("sync.(*WaitGroup).Go.func1"), evStack: stk("sync.(*WaitGroup).Go", "main.main")}, // wrapper: kept
		{t: 8, id: 8, actor: 1, from: ne, to: rb, stack: stk("net/http.(*Server).Serve"), evStack: stk("main.main")},                           // go statement in the program: kept
		{t: 9, id: 9, actor: 2, from: ne, to: rb, stack: stk("main.child"), evStack: stk("main.tick")},                                         // a callback's child
		{t: 10, id: 10, actor: 1, from: ne, to: rb, stack: stk("main.tock"), evStack: stk("time.goFunc", "runtime.(*timer).unlockAndRun", "main.main")},
		{t: 11, id: 11, actor: 1, from: ne, to: rb, stack: stk("runtime.gcBgMarkWorker"), evStack: stk("runtime.gcBgMarkStartWorkers", "main.main")},
		{t: 12, id: 1, from: rn, to: wt, reason: "chan receive", stack: stk("main.main")},
		{t: 13, id: 5, from: rb, to: rn},
		{t: 14, id: 5, from: rn, to: sc, stack: stk("syscall.read")},
		{t: 15, id: 11, from: rb, to: rn},
		{t: 16, id: 11, from: rn, to: wt, reason: "GC worker (idle)", stack: stk("runtime.gopark")},
	}
	for _, id := range []trace.GoID{2, 3, 7, 8, 9, 10} { // every kept goroutine parks
		raws = append(raws, rawTransition{t: 20 + trace.Time(id), id: id, from: rb, to: rn},
			rawTransition{t: 40 + trace.Time(id), id: id, from: rn, to: wt, reason: "select", stack: stk("main.main")})
	}
	paths := func(res *ParseResult) map[string]string {
		m := map[string]string{}
		for _, g := range res.Goroutines {
			m[g.GPath] = g.StartFunction
		}
		return m
	}
	res := synth(ModeMain, raws)
	want := map[string]string{
		"0": "main.main", "0.1": "sync.(*WaitGroup).Go.func1", "0.2": "net/http.(*Server).Serve",
		fmt.Sprintf("%d.1", tick): "main.tick", fmt.Sprintf("%d.2", tick): "main.tick",
		fmt.Sprintf("%d.1.1", tick): "main.child", fmt.Sprintf("%d.1", tock): "main.tock",
	}
	if got := paths(res); !reflect.DeepEqual(got, want) {
		t.Fatalf("goroutines %v, want %v", got, want)
	}
	for _, e := range res.Events {
		if e.Event == "GoCreate" && strings.HasPrefix(e.GPath, fmt.Sprint(tock)) && (e.Peer != -1 || e.Function != "") {
			t.Fatalf("a timer-started goroutine has no creator: %+v", e)
		}
	}
	if res.AllBlocked {
		t.Fatal("a helper in a syscall can still unblock the program: not all blocked")
	}
	if len(res.Leaked) != 6 { // every kept goroutine but main (it stops the trace)
		t.Fatalf("leaked %+v", res.Leaked)
	}
	// Once the helpers are gone (and the GC worker idles), everything is blocked.
	done := append(slices.Clone(raws), rawTransition{t: 90, id: 5, from: sc, to: ne}, rawTransition{t: 91, id: 6, from: rb, to: ne})
	if res := synth(ModeMain, done); !res.AllBlocked {
		t.Fatal("all program goroutines blocked, no helper left: all blocked")
	}
	// The root of a start function is the same in every run and never a test root.
	if tick != siteRoot("main.tick") || tick == tock || tick < 100_000_000 || tick > 999_999_999 {
		t.Fatalf("site roots %d %d", tick, tock)
	}
}

// A goroutine that ends the trace blocked is listed in Leaked and in
// Goroutines even when the cap kept all its events out.
func TestLeakedWithoutEventsIsSummarised(t *testing.T) {
	const (
		ne = trace.GoNotExist
		rb = trace.GoRunnable
		rn = trace.GoRunning
		wt = trace.GoWaiting
	)
	raws := []rawTransition{
		{t: 1, id: 1, from: trace.GoUndetermined, to: rn},
		{t: 2, id: 1, from: rn, to: rb, reason: "runtime.Gosched", stack: stk("main.main")},
		{t: 3, id: 1, from: rb, to: rn},
		{t: 4, id: 2, actor: 1, from: ne, to: rb, stack: stk("main.worker"), evStack: stk("main.main")},
		{t: 5, id: 2, from: rb, to: rn},
		{t: 6, id: 2, from: rn, to: wt, reason: "chan send", stack: stk("main.worker")},
	}
	opt := DefaultParseOptions()
	opt.Mode, opt.MaxEvents = ModeMain, 1
	res := &ParseResult{Mode: ModeMain, Events: []Event{}, Goroutines: []GoroutineSummary{}}
	p := newParser(opt, res)
	for i := range raws {
		p.step(&raws[i])
	}
	p.finish()
	if len(res.Events) != 1 || !res.Truncated || len(res.Leaked) != 1 || res.Leaked[0].GPath != "0.1" {
		t.Fatalf("events %d truncated %v leaked %+v", len(res.Events), res.Truncated, res.Leaked)
	}
	if g := res.Goroutines[res.Leaked[0].Goroutine]; g.GPath != "0.1" || g.FinalReason != "chan send" {
		t.Fatalf("summary %+v", res.Goroutines)
	}
	// A cut trace tells nothing about the end: no leaks.
	cut, _ := replay(ModeMain, raws, "cut")
	if len(cut.Leaked) != 0 || cut.Leaked == nil {
		t.Fatalf("cut trace leaked %#v", cut.Leaked)
	}
}

// A leak is any program goroutine alive at the end of the trace, whatever its
// state, named with it; a main program's main goroutine and the testing
// framework's tRunner goroutines are never leaked.
func TestLeakedWhateverTheState(t *testing.T) {
	const (
		ud = trace.GoUndetermined
		ne = trace.GoNotExist
		rb = trace.GoRunnable
		rn = trace.GoRunning
		wt = trace.GoWaiting
		sc = trace.GoSyscall
	)
	create := func(id trace.GoID, fn string) rawTransition {
		return rawTransition{id: id, actor: 1, from: ne, to: rb, stack: stk(fn), evStack: stk("main.main")}
	}
	raws := []rawTransition{
		{id: 1, from: ud, to: rn},
		create(2, "main.created"),
		create(3, "main.preempted"), {id: 3, from: rb, to: rn}, {id: 3, from: rn, to: rb, reason: "preempted"},
		create(4, "main.running"), {id: 4, from: rb, to: rn},
		create(5, "main.syscall"), {id: 5, from: rb, to: rn}, {id: 5, from: rn, to: sc},
		create(6, "main.sleeping"), {id: 6, from: rb, to: rn}, {id: 6, from: rn, to: wt, reason: "sleep"},
		create(7, "main.ended"), {id: 7, from: rb, to: rn}, {id: 7, from: rn, to: ne},
	}
	res := synth(ModeMain, raws)
	var got []string
	for _, l := range res.Leaked {
		got = append(got, l.GPath+" "+l.State+" "+l.Reason)
	}
	want := []string{"0.1 created ", "0.2 runnable ", "0.3 running ", "0.4 syscall ", "0.5 blocked(sleep) sleep"}
	if !slices.Equal(got, want) {
		t.Fatalf("leaked %q, want %q", got, want)
	}
	// A cut trace tells nothing about the end.
	if cut, _ := replay(ModeMain, raws, "cut"); len(cut.Leaked) != 0 {
		t.Fatalf("cut trace leaked %+v", cut.Leaked)
	}
	// Test binaries: a top-level test's and a subtest's tRunner still alive are
	// only returning (the binary exited 0); the test's own goroutine leaked.
	runner := stk("testing.(*T).Run", "testing.runTests.func1", "testing.tRunner", "testing.runTests")
	tests := []rawTransition{
		{id: 6, actor: 1, from: ne, to: rb, stack: stk("testing.tRunner"), evStack: runner},
		{id: 6, from: rb, to: rn},
		{id: 7, actor: 6, from: ne, to: rb, stack: stk("testing.tRunner"), evStack: stk("testing.(*T).Run", "prog.TestA")},
		{id: 8, actor: 6, from: ne, to: rb, stack: stk("prog.worker"), evStack: stk("prog.TestA")},
		{id: 7, from: rb, to: rn},
	}
	got = nil
	for _, l := range synth(ModeTest, tests).Leaked {
		got = append(got, l.GPath+" "+l.State)
	}
	if !slices.Equal(got, []string{"0.2 created"}) {
		t.Fatalf("test binary leaked %q", got)
	}
}
