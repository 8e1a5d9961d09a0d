package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/exp/trace"
)

// gpath renders the canonical key path, e.g. "0.2.1".
func (g *gInfo) gpath() string {
	parts := make([]string, len(g.path))
	for i, p := range g.path {
		parts[i] = fmt.Sprint(p)
	}
	return strings.Join(parts, ".")
}

// finish settles a held preemption (see settlePreemption: it reads
// res.TraceError, so that must be set first), decides AllBlocked and Leaked,
// then assigns dense canonical ids and fills the summary fields.
//
// Canonical ids: every emitted goroutine has a key path (roots "0", "1", ...
// in creation order; a child is its creator's path plus its creation rank
// among that creator's kept children, e.g. "0.2.1"). Paths do not depend on
// how creators interleave, so they agree across runs of the same program
// whenever each goroutine creates its children in the same order. The dense
// id is the goroutine's rank when paths are sorted by depth and then
// component-wise (breadth first), so the first root is 0 and its children
// come next.
func (p *traceParser) finish() {
	p.settlePreemption()
	anyAlive, allBlocked := false, true
	wholeTrace := !p.stopped && p.res.TraceError == ""
	var leaked []*gInfo
	for _, g := range p.gs {
		alive := g.state != trace.GoNotExist && g.state != trace.GoUndetermined
		if !alive || !(g.kept || g.helper) {
			continue
		}
		blocked := g.state == trace.GoWaiting && deadlockReasons[g.reason]
		if g.kept {
			anyAlive = true
		}
		if !blocked {
			allBlocked = false
		}
		if g.kept && wholeTrace && !p.endsWithTheRun(g) {
			leaked = append(leaked, g)
			g.emitted = true // a leaked goroutine is always summarised
		}
	}
	p.res.AllBlocked = anyAlive && allBlocked
	var emitted []*gInfo
	for _, g := range p.gs {
		if g.emitted {
			emitted = append(emitted, g)
		}
	}
	sortByPath(emitted)
	for i, g := range emitted {
		g.canon = i
		p.res.Goroutines = append(p.res.Goroutines, GoroutineSummary{
			Goroutine: i, GPath: g.gpath(), StartFunction: p.rename(g.start),
			FinalState: g.state.String(), FinalReason: g.reason,
		})
	}
	sortByPath(leaked)
	p.res.Leaked = []LeakedGoroutine{}
	for _, g := range leaked {
		reason := ""
		if g.state == trace.GoWaiting {
			reason = g.reason
		}
		p.res.Leaked = append(p.res.Leaked, LeakedGoroutine{Goroutine: g.canon, GPath: g.gpath(), State: g.leakState(),
			Reason: reason})
	}
	p.objects.finishObjects()
	for i := range p.res.Events {
		ev := &p.res.Events[i]
		ev.Goroutine, ev.GPath, ev.Peer = ev.g.canon, ev.g.gpath(), -1
		if ev.render != nil {
			ev.Object, ev.ObjectState = ev.render()
		}
		if ev.peer != nil {
			ev.Peer = ev.peer.canon
		}
	}
}

// endsWithTheRun reports whether a kept goroutine alive at the end of the
// trace is one whose life is the run's own, never a leak: a main program's
// main goroutine (it stops the trace after the user's main returned) and a
// test's goroutine, testing.tRunner (a top-level test's or a subtest's: when
// the binary exits 0 every test has reported, so one still alive is only
// returning).
func (p *traceParser) endsWithTheRun(g *gInfo) bool {
	return (p.res.Mode == ModeMain && len(g.path) == 1 && g.path[0] == 0) || g.start == "testing.tRunner"
}

// leakState names the state a leaked goroutine was left in: created (never
// started), runnable, running, syscall or blocked(REASON).
func (g *gInfo) leakState() string {
	switch {
	case g.state == trace.GoWaiting:
		return "blocked(" + g.reason + ")"
	case g.state == trace.GoRunnable && !g.ran:
		return "created"
	}
	return strings.ToLower(g.state.String())
}

// sortByPath orders goroutines by (depth, path component-wise).
func sortByPath(gs []*gInfo) {
	slices.SortFunc(gs, func(a, b *gInfo) int {
		if c := cmp.Compare(len(a.path), len(b.path)); c != 0 {
			return c
		}
		return slices.Compare(a.path, b.path)
	})
}
