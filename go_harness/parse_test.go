package main

import (
	"fmt"
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
	p := &traceParser{opt: opt, res: res, gs: map[trace.GoID]*gInfo{}}
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
	p := &traceParser{opt: opt, res: capped, gs: map[trace.GoID]*gInfo{}}
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
