package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/exp/trace"
)

// Mode says how a trace was produced, which decides the root goroutines.
type Mode string

const (
	ModeAuto Mode = "auto" // test if the trace shows a top-level testing.tRunner, else main
	ModeMain Mode = "main" // a main package: goroutine 1 (running main.main) is the root
	ModeTest Mode = "test" // a test binary: each top-level test's tRunner goroutine is a root
)

// ParseOptions configures ParseTrace. The zero value is not valid: use
// DefaultParseOptions and override fields.
type ParseOptions struct {
	Mode      Mode
	MaxEvents int // cap on kept (emitted) events; > 0
	// FuncRename maps a function-name prefix to its original spelling; run
	// uses it to undo the renaming of the user's main (see inject.go).
	FuncRename map[string]string
	// FilePrefix is stripped from file names (run passes "<module path>/",
	// so files read "main.go" rather than "prog/main.go").
	FilePrefix string
}

// DefaultParseOptions returns options with the documented defaults.
func DefaultParseOptions() ParseOptions {
	return ParseOptions{Mode: ModeAuto, MaxEvents: 20000,
		FuncRename: map[string]string{"main." + userMainName: "main.main"}}
}

// Event is one program-goroutine event, the unit of the JSON output.
type Event struct {
	Index     int    `json:"index"`
	Goroutine int    `json:"goroutine"`
	GPath     string `json:"gpath"`
	Event     string `json:"event"`
	Reason    string `json:"reason"`
	Peer      int    `json:"peer"`
	Function  string `json:"function"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	TimeNs    int64  `json:"time_ns"`

	g, peer *gInfo // resolved to canonical ids by finish
}

// GoroutineSummary describes one kept goroutine at the end of the trace.
type GoroutineSummary struct {
	Goroutine     int    `json:"goroutine"`
	GPath         string `json:"gpath"`
	StartFunction string `json:"start_function"`
	FinalState    string `json:"final_state"`
	FinalReason   string `json:"final_reason"`
}

// ParseResult is everything ParseTrace learned from one trace.
type ParseResult struct {
	Mode       Mode
	Events     []Event
	Truncated  bool               // MaxEvents was reached; later events were dropped
	TraceError string             // non-empty when the reader stopped before a clean EOF
	Goroutines []GoroutineSummary // kept goroutines that appear in Events, by canonical id
	// AllBlocked reports whether at the end of the trace at least one kept
	// goroutine still existed and every existing kept goroutine was Waiting
	// for a reason in deadlockReasons (counts goroutines past the cap too).
	AllBlocked bool
}

// deadlockReasons are the block reasons that nothing but another program
// goroutine can end. "sleep", "network" and GC waits end on their own.
var deadlockReasons = map[string]bool{
	"forever": true, "select": true, "sync.(*Cond).Wait": true, "sync": true,
	"chan send": true, "chan receive": true,
}

// gInfo is the parser's view of one raw goroutine.
type gInfo struct {
	kept     bool
	path     []int // canonical key path; "0" is the first root
	children int   // kept goroutines created so far by this one
	start    string
	state    trace.GoState
	reason   string
	resume   frame // where the goroutine will continue when next started
	// inSlowExit: the goroutine left a syscall without a P (Syscall->Runnable);
	// its next start is reported as the syscall's exit.
	inSlowExit bool
	canon      int // dense canonical id, set by finish
	emitted    bool
}

func (g *gInfo) gpath() string {
	parts := make([]string, len(g.path))
	for i, p := range g.path {
		parts[i] = fmt.Sprint(p)
	}
	return strings.Join(parts, ".")
}

// rawTransition is one goroutine state transition as read from the trace.
type rawTransition struct {
	t        trace.Time
	id       trace.GoID // the goroutine that transitions
	actor    trace.GoID // the goroutine executing the event (creator, unblocker)
	from, to trace.GoState
	reason   string
	stack    trace.Stack // the transition's stack (start stack for GoCreate)
	evStack  trace.Stack // the event's stack (the creator's/unblocker's)
}

// maxRawTransitions bounds memory for pathological traces.
const maxRawTransitions = 5_000_000

// readTransitions reads goroutine transitions until EOF or the first reader
// error; a trace cut short still yields every complete generation.
func readTransitions(r io.Reader) ([]rawTransition, string) {
	rd, err := trace.NewReader(r)
	if err != nil {
		return nil, err.Error()
	}
	var out []rawTransition
	for len(out) < maxRawTransitions {
		ev, err := rd.ReadEvent()
		if errors.Is(err, io.EOF) {
			return out, ""
		}
		if err != nil {
			return out, err.Error()
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		from, to := st.Goroutine()
		out = append(out, rawTransition{
			t: ev.Time(), id: st.Resource.Goroutine(), actor: ev.Goroutine(),
			from: from, to: to, reason: st.Reason, stack: st.Stack, evStack: ev.Stack(),
		})
	}
	return out, "too many goroutine transitions; stopped reading"
}

// ParseTrace reads a runtime/trace stream and returns the program's events.
func ParseTrace(r io.Reader, opt ParseOptions) (*ParseResult, error) {
	if opt.MaxEvents <= 0 {
		return nil, fmt.Errorf("max events must be positive, got %d", opt.MaxEvents)
	}
	raws, traceErr := readTransitions(r)
	res := &ParseResult{Mode: opt.Mode, TraceError: traceErr, Events: []Event{}, Goroutines: []GoroutineSummary{}}
	if res.Mode == ModeAuto {
		res.Mode = detectMode(raws)
	}
	p := &traceParser{opt: opt, res: res, gs: map[trace.GoID]*gInfo{}}
	for i := range raws {
		p.step(&raws[i])
	}
	p.finish()
	return res, nil
}

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

type traceParser struct {
	opt     ParseOptions
	res     *ParseResult
	gs      map[trace.GoID]*gInfo
	roots   int
	t0      trace.Time
	started bool
}

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

func (p *traceParser) step(rt *rawTransition) {
	g := p.g(rt.id)
	if rt.from == trace.GoUndetermined || rt.from == rt.to {
		// Per-generation status record: learn the state, emit nothing.
		g.state = rt.to
		return
	}
	if rt.from == trace.GoNotExist {
		p.created(g, rt)
	}
	name, reason := transitionEvent(rt.from, rt.to, rt.reason)
	// Fold a slow syscall exit (Syscall->Runnable, then Runnable->Running)
	// into one "GoSyscall exit" at the moment the goroutine runs again: whether
	// the P was retaken during the call is a scheduler artifact, and without
	// folding even a sequential program's event sequence varies across runs.
	slowExit := g.inSlowExit
	g.inSlowExit = name == "GoSyscall" && reason == "exit blocked"
	switch {
	case g.inSlowExit:
		g.state, g.reason = rt.to, ""
		return
	case slowExit && name == "GoStart":
		name, reason = "GoSyscall", "exit"
	}
	var pos frame
	var peer *gInfo
	switch name {
	case "GoCreate", "GoUnblock":
		// The event's own stack is the creator's / unblocker's.
		pos = p.userFrame(rt.evStack)
		if a := p.gs[rt.actor]; a != nil && a.kept && rt.actor != rt.id {
			peer = a
		}
	case "GoStart":
		pos = g.resume
	case "GoSyscall":
		pos = p.userFrame(rt.stack)
		if pos.Func == "" {
			pos = g.resume // a syscall exit carries no stack: it returns where it entered
		} else {
			g.resume = pos
		}
	case "GoEnd":
	default: // GoBlock, GoSched: the goroutine's own stack
		pos = p.userFrame(rt.stack)
		if pos.Func != "" {
			g.resume = pos
		}
	}
	g.state = rt.to
	if rt.to == trace.GoWaiting {
		g.reason = rt.reason
	} else {
		g.reason = ""
	}
	if !g.kept {
		return
	}
	if len(p.res.Events) >= p.opt.MaxEvents {
		p.res.Truncated = true
		return
	}
	if !p.started {
		p.t0, p.started = rt.t, true
	}
	g.emitted = true
	if peer != nil {
		peer.emitted = true
	}
	p.res.Events = append(p.res.Events, Event{
		Index: len(p.res.Events), Event: name, Reason: reason,
		Function: pos.Func, File: pos.File, Line: pos.Line,
		TimeNs: int64(rt.t - p.t0), g: g, peer: peer,
	})
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

// userFrame is the innermost user frame of st with the rename and file
// prefix options applied; the zero frame when there is none.
func (p *traceParser) userFrame(st trace.Stack) frame {
	f, ok := topUserFrame(st)
	if !ok {
		return frame{}
	}
	return frame{Func: p.rename(f.Func), File: strings.TrimPrefix(f.File, p.opt.FilePrefix), Line: f.Line}
}

func (p *traceParser) rename(fn string) string {
	for old, orig := range p.opt.FuncRename {
		if fn == old || strings.HasPrefix(fn, old+".") {
			return orig + fn[len(old):]
		}
	}
	return fn
}

// transitionEvent maps a goroutine state transition to an event name and reason.
// Status records (from Undetermined, or X->X) never reach it.
func transitionEvent(from, to trace.GoState, reason string) (string, string) {
	switch {
	case from == trace.GoNotExist:
		switch to {
		case trace.GoWaiting:
			return "GoCreate", "created blocked"
		case trace.GoSyscall:
			return "GoCreate", "created in syscall"
		}
		return "GoCreate", ""
	case to == trace.GoNotExist:
		return "GoEnd", ""
	case from == trace.GoRunnable && to == trace.GoRunning:
		return "GoStart", ""
	case from == trace.GoRunning && to == trace.GoWaiting:
		return "GoBlock", reason
	case from == trace.GoWaiting && to == trace.GoRunnable:
		return "GoUnblock", ""
	case from == trace.GoRunning && to == trace.GoRunnable:
		return "GoSched", reason
	case from == trace.GoRunning && to == trace.GoSyscall:
		return "GoSyscall", "enter"
	case from == trace.GoSyscall && to == trace.GoRunning:
		return "GoSyscall", "exit"
	case from == trace.GoSyscall && to == trace.GoRunnable:
		return "GoSyscall", "exit blocked"
	}
	return "GoTransition", from.String() + "->" + to.String()
}

// finish assigns dense canonical ids and fills the summary fields.
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
	var emitted []*gInfo
	anyAlive, allBlocked := false, true
	for _, g := range p.gs {
		if g.emitted {
			emitted = append(emitted, g)
		}
		if g.kept && g.state != trace.GoNotExist && g.state != trace.GoUndetermined {
			anyAlive = true
			if g.state != trace.GoWaiting || !deadlockReasons[g.reason] {
				allBlocked = false
			}
		}
	}
	p.res.AllBlocked = anyAlive && allBlocked
	sortByPath(emitted)
	for i, g := range emitted {
		g.canon = i
		p.res.Goroutines = append(p.res.Goroutines, GoroutineSummary{
			Goroutine: i, GPath: g.gpath(), StartFunction: p.rename(g.start),
			FinalState: g.state.String(), FinalReason: g.reason,
		})
	}
	for i := range p.res.Events {
		ev := &p.res.Events[i]
		ev.Goroutine, ev.GPath, ev.Peer = ev.g.canon, ev.g.gpath(), -1
		if ev.peer != nil {
			ev.Peer = ev.peer.canon
		}
	}
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
