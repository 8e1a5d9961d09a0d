package main

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/exp/trace"
)

// Which goroutines are the program's (see README.md, "Which goroutines are
// the program's"): roots by mode, then children of kept goroutines whose
// start function is not internal.

// detectMode returns ModeTest when some goroutine is a top-level test.
func detectMode(raws []rawTransition) Mode {
	for i := range raws {
		if isTestRootCreate(&raws[i]) {
			return ModeTest
		}
	}
	return ModeMain
}

// isTestRootCreate: the creation of a top-level test's goroutine, i.e. a
// testing.tRunner started by testing.(*T).Run called from testing.runTests.
func isTestRootCreate(rt *rawTransition) bool {
	return rt.from == trace.GoNotExist && rt.to != trace.GoNotExist &&
		firstFunc(rt.stack) == "testing.tRunner" && stackHas(rt.evStack, "testing.runTests")
}

// internalStart reports whether a goroutine with this start function is
// never the program's, even when program code caused its creation (GC
// workers started from an allocation, the runtime/trace writer started by
// trace.Start, time.AfterFunc callbacks whose creator is whatever goroutine
// happened to run timers, the harness's own helpers).
func internalStart(fn string) bool {
	switch {
	case fn == "testing.tRunner":
		return false
	case fn == "", fn == "time.goFunc":
		return true
	case strings.HasPrefix(fn, "runtime."), strings.HasPrefix(fn, "runtime/"),
		strings.HasPrefix(fn, "internal/"), strings.HasPrefix(fn, "testing."):
		return true
	case strings.HasPrefix(fn, "main._tracegen"):
		return true
	}
	return false
}

var debugRaw = os.Getenv("GO_HARNESS_DEBUG") != ""

func (p *traceParser) g(id trace.GoID) *gInfo {
	g := p.gs[id]
	if g == nil {
		g = &gInfo{}
		if p.res.Mode == ModeMain && id == 1 {
			g.kept, g.path, g.start = true, []int{p.roots}, "main.main"
			p.roots++
		}
		p.gs[id] = g
	}
	return g
}

// created decides whether a new goroutine is the program's and gives it its
// canonical key path.
func (p *traceParser) created(g *gInfo, rt *rawTransition) {
	*g = gInfo{start: p.rename(firstFunc(rt.stack))}
	g.resume = p.userFrame(rt.stack)
	if p.res.Mode == ModeTest && isTestRootCreate(rt) {
		if c := p.gs[rt.actor]; c == nil || !c.kept {
			g.kept, g.path = true, []int{p.roots}
			p.roots++
			return
		}
	}
	c := p.gs[rt.actor]
	if debugRaw {
		fmt.Fprintf(os.Stderr, "create g%d start=%s actor=g%d actorKept=%v internal=%v creator=%q\n", rt.id, g.start, rt.actor, c != nil && c.kept, internalStart(g.start), firstFunc(rt.evStack))
	}
	if c == nil || !c.kept || internalStart(g.start) {
		return
	}
	c.children++
	g.kept = true
	g.path = append(append([]int{}, c.path...), c.children)
}
