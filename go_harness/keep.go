package main

import (
	"fmt"
	"hash/fnv"
	"os"
	"strings"

	"golang.org/x/exp/trace"
)

// Which goroutines are the program's (see README.md, "Which goroutines are
// the program's"): roots by mode; children of kept goroutines whose start
// function or creating site is program code (or that a standard-library
// wrapper starts only to call a program function); and goroutines with a
// program start function that no program goroutine created (time.AfterFunc
// callbacks), which get a root-level path of their own.

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

// wrapperStarts are standard-library start functions that only call a
// function the program handed over: t.Run's tRunner and the goroutine of
// sync.(*WaitGroup).Go. A program goroutine's child starting with one of
// them is kept although neither its start function nor its creating site
// (the go statement, inside the standard library) is program code.
var wrapperStarts = map[string]bool{"testing.tRunner": true, "sync.(*WaitGroup).Go.func1": true}

// internalStart reports whether a goroutine with this start function is
// machinery that neither is nor serves the program: GC workers started from
// an allocation, the runtime/trace reader started by trace.Start, the
// testing framework's alarm, the harness's own helpers. Such goroutines are
// dropped and, unlike standard-library helpers, their states are ignored by
// the deadlock rule.
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

// runtimeStarted reports whether no goroutine's go statement created the
// goroutine: the runtime started it outside any goroutine (a time.AfterFunc
// timer firing in the scheduler: the event has no goroutine and no stack),
// or the creating stack is the timer machinery (time.goFunc) of whatever
// goroutine happened to run the timer.
func runtimeStarted(rt *rawTransition) bool {
	return rt.actor == trace.NoGoroutine || stackHas(rt.evStack, "time.goFunc")
}

// siteRootBase and siteRootSpan bound the root component of a site path:
// [100000000, 999999999], nine digits, never a test root (those count from 0).
const (
	siteRootBase = 100_000_000
	siteRootSpan = 900_000_000
)

// siteRoot is the root component of the key path of a goroutine with a
// program start function that no program goroutine created: derived from
// the start function's name (after the main rename), so it is the same in
// every run: 100000000 + FNV-1a-32(name) mod 900000000.
func siteRoot(start string) int {
	h := fnv.New32a()
	h.Write([]byte(start))
	return siteRootBase + int(h.Sum32()%siteRootSpan)
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
	start := firstFrame(rt.stack)
	*g = gInfo{start: p.rename(start.Func)}
	g.resume = p.programFrame(rt.stack)
	c := p.gs[rt.actor]
	if p.res.Mode == ModeTest && isTestRootCreate(rt) && (c == nil || !c.kept) {
		g.kept, g.path = true, []int{p.roots}
		p.roots++
		return
	}
	g.runtimeStarted = runtimeStarted(rt)
	byProgram := c != nil && c.kept && !g.runtimeStarted
	programStart := isProgramFrame(start.Func, start.File)
	site := firstFrame(rt.evStack)
	switch {
	case byProgram && (programStart || wrapperStarts[start.Func] || isProgramFrame(site.Func, site.File)):
		c.children++
		g.kept = true
		g.path = append(append([]int{}, c.path...), c.children)
	case byProgram || (c != nil && c.helper):
		// A standard-library helper serving the program (os/exec's pipe
		// copiers, os/signal's loop, …): dropped, but its state still counts
		// for the deadlock rule, as it can unblock program goroutines.
		g.helper = !internalStart(start.Func)
		if programStart { // created by a helper, running program code
			p.keepAtSite(g)
		}
	case programStart:
		// No program goroutine created it: a time.AfterFunc callback, or a go
		// statement in code run by a non-program goroutine (TestMain, a
		// finalizer).
		p.keepAtSite(g)
	}
	if debugRaw {
		fmt.Fprintf(os.Stderr, "create g%d start=%s actor=g%d actorKept=%v runtimeStarted=%v site=%q kept=%v path=%v helper=%v\n",
			rt.id, g.start, rt.actor, c != nil && c.kept, g.runtimeStarted, site.Func, g.kept, g.path, g.helper)
	}
}

// keepAtSite keeps g under the root component of its start function: path
// [siteRoot(start), k] for the k-th such goroutine (k = 1, 2, …) with that
// root in this run, in creation order.
func (p *traceParser) keepAtSite(g *gInfo) {
	root := siteRoot(g.start)
	p.sites[root]++
	g.kept, g.helper = true, false
	g.path = []int{root, p.sites[root]}
}
