package main

import (
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
	user := []string{"main.main", "main.main.func1", "prog.TestX", "example.com/a/b.(*T).M", "prog_test.TestY"}
	notUser := []string{"runtime.gopark", "sync.(*Mutex).Lock", "internal/sync.(*Mutex).lockSlow",
		"testing.tRunner", "runtime/trace.Start.func1", "fmt.Fprintln", "os.(*File).Write", ""}
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
