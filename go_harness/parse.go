package main

import (
	"errors"
	"fmt"
	"io"
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
	// StopAtCap stops reading once MaxEvents events were kept (and one more
	// was seen). Parsing a long trace to its end costs seconds; with this set,
	// final states and AllBlocked describe the point where reading stopped.
	StopAtCap bool
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
	// Category and Message: a user annotation's (UserLog: trace.Log's category
	// and message; UserRegion: "" and the region type); "" otherwise.
	Category string `json:"category"`
	Message  string `json:"message"`
	// Object and ObjectState: for ObjectOp, the object operated on and its
	// state after the operation; for GoBlock and GoUnblock, the object the
	// goroutine's pending operation is on and its state then (objects.go);
	// "" when none.
	Object      string `json:"object"`
	ObjectState string `json:"object_state"`

	g, peer *gInfo                  // resolved to canonical ids by finish
	render  func() (string, string) // Object and ObjectState, rendered by finish once ids are known
}

// LeakedGoroutine is a program goroutine still alive when a run ended
// normally (status leak): State is "created" (never started), "runnable",
// "running", "syscall" or "blocked(REASON)"; Reason is the block reason of a
// blocked one, "" otherwise.
type LeakedGoroutine struct {
	Goroutine int    `json:"goroutine"`
	GPath     string `json:"gpath"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
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
	Goroutines []GoroutineSummary // kept goroutines that appear in Events (and Leaked), by canonical id
	// Generations is the number of complete trace generations read: the
	// reader emits an EventSync when it starts each generation (it has read
	// and checked the generation's bytes whole by then) and one more at the
	// end of the trace or before an error, so a read to EOF or to an error
	// has read one fewer than it saw syncs; a read stopped early (StopAtCap)
	// has read as many. A trace that is a header and nothing else, or whose
	// first generation is cut, has 0.
	Generations int
	// AllBlocked reports whether at the end of the trace (or where reading
	// stopped, see StopAtCap) at least one kept goroutine still existed and
	// every existing kept goroutine (and standard-library helper, see
	// keep.go) was Waiting for a reason in deadlockReasons.
	AllBlocked bool
	// Leaked lists the kept goroutines still alive at the end of the trace,
	// whatever their state (goleak's rule; see leakedState for the ones that
	// are not the program's to end), by canonical id; set only when the whole
	// trace was read without error (never with a StopAtCap stop). Each is also
	// in Goroutines, even if it has no event (a truncated run).
	Leaked []LeakedGoroutine
}

// deadlockReasons are the block reasons that nothing but another program
// goroutine can end. "sleep", "network" and GC waits end on their own.
var deadlockReasons = map[string]bool{
	"forever": true, "select": true, "sync.(*Cond).Wait": true, "sync": true,
	"chan send": true, "chan receive": true,
}

// gInfo is the parser's view of one raw goroutine.
type gInfo struct {
	kept   bool
	helper bool // a dropped standard-library helper serving the program (keep.go)
	// runtimeStarted: created by the runtime, not by a go statement of a
	// goroutine (time.AfterFunc); its GoCreate has no peer and no frame.
	runtimeStarted bool
	path           []int // canonical key path; "0" is the first root
	children       int   // kept goroutines created so far by this one
	start          string
	state          trace.GoState
	reason         string
	resume         frame // where the goroutine will continue when next started
	ran            bool  // it has been Running (a leaked goroutine that never ran is "created")
	// inSlowExit: the goroutine left a syscall without a P (Syscall->Runnable);
	// its next start is reported as the syscall's exit.
	inSlowExit bool
	canon      int // dense canonical id, set by finish
	emitted    bool
	pending    *pendingOp // the object operation it is inside (objects.go)
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
	gen      int         // syncs seen so far: stacks of different generations never compare equal
	// annotation is "UserLog" or "UserRegion" for a user annotation that
	// goroutine actor emitted (from, to and stack unset; reason is "begin" or
	// "end" for a region), "" for a state transition.
	annotation        string
	category, message string
}

// maxBufferedTransitions bounds memory in auto mode, the only mode that
// buffers (it must see the whole trace before it knows the roots).
const maxBufferedTransitions = 2_000_000

// readTransitions calls fn for each goroutine transition until EOF, the first
// reader error or fn returning false, and returns the reader's error text
// ("" at a clean EOF or when fn stopped it) and the number of complete
// generations read (see ParseResult.Generations). A trace cut short still
// yields every complete generation before the error.
func readTransitions(r io.Reader, fn func(*rawTransition) bool) (string, int) {
	rd, err := trace.NewReader(r)
	if err != nil {
		return err.Error(), 0
	}
	syncs := 0
	for {
		ev, err := rd.ReadEvent()
		if err != nil {
			// The last sync seen ended the trace (EOF), came before the error
			// (a generation that could not be read), or started the generation
			// the error is in: it did not start a complete generation.
			gens := max(syncs-1, 0)
			if errors.Is(err, io.EOF) {
				return "", gens
			}
			return err.Error(), gens
		}
		switch ev.Kind() {
		case trace.EventSync:
			syncs++
			continue
		case trace.EventLog, trace.EventRegionBegin, trace.EventRegionEnd:
			if !fn(annotationOf(ev, syncs)) {
				return "", syncs
			}
			continue
		case trace.EventStateTransition:
		default:
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		from, to := st.Goroutine()
		rt := rawTransition{
			t: ev.Time(), id: st.Resource.Goroutine(), actor: ev.Goroutine(),
			from: from, to: to, reason: st.Reason, stack: st.Stack, evStack: ev.Stack(), gen: syncs,
		}
		if !fn(&rt) {
			return "", syncs // stopped inside a generation read whole
		}
	}
}

// annotationOf is the rawTransition of a trace.Log call or a region's
// begin or end (trace.WithRegion, trace.StartRegion).
func annotationOf(ev trace.Event, gen int) *rawTransition {
	rt := &rawTransition{t: ev.Time(), id: ev.Goroutine(), actor: ev.Goroutine(), evStack: ev.Stack(), gen: gen}
	switch ev.Kind() {
	case trace.EventLog:
		l := ev.Log()
		rt.annotation, rt.category, rt.message = "UserLog", l.Category, l.Message
	case trace.EventRegionBegin:
		rt.annotation, rt.reason, rt.message = "UserRegion", "begin", ev.Region().Type
	default:
		rt.annotation, rt.reason, rt.message = "UserRegion", "end", ev.Region().Type
	}
	return rt
}

// ParseTrace reads a runtime/trace stream and returns the program's events.
// With an explicit mode it streams (memory bounded by MaxEvents and the
// number of goroutines); ModeAuto buffers the transitions to decide the mode.
// Unless StopAtCap is set, the whole trace is read, past MaxEvents, so the
// goroutines' final states (and AllBlocked) reflect the end of the trace.
func ParseTrace(r io.Reader, opt ParseOptions) (*ParseResult, error) {
	if opt.MaxEvents <= 0 {
		return nil, fmt.Errorf("max events must be positive, got %d", opt.MaxEvents)
	}
	res := &ParseResult{Mode: opt.Mode, Events: []Event{}, Goroutines: []GoroutineSummary{}}
	p := newParser(opt, res)
	if opt.Mode != ModeAuto {
		res.TraceError, res.Generations = readTransitions(r, func(rt *rawTransition) bool {
			p.step(rt)
			p.stopped = opt.StopAtCap && res.Truncated
			return !p.stopped
		})
	} else {
		var raws []rawTransition
		res.TraceError, res.Generations = readTransitions(r, func(rt *rawTransition) bool {
			raws = append(raws, *rt)
			return len(raws) < maxBufferedTransitions
		})
		if len(raws) >= maxBufferedTransitions {
			res.TraceError = "too many goroutine transitions to buffer; stopped reading"
			p.stopped = true
		}
		res.Mode = detectMode(raws)
		for i := range raws {
			p.step(&raws[i])
		}
	}
	p.finish() // after res.TraceError is set: a cut trace settles a held preemption differently
	return res, nil
}

type traceParser struct {
	opt            ParseOptions
	res            *ParseResult
	gs             map[trace.GoID]*gInfo
	roots          int
	sites          map[int]int // goroutines kept so far per site root (keepAtSite)
	t0             trace.Time
	started        bool
	stopped        bool                  // reading stopped before the end of the trace
	heldPreemption *Event                // see emit
	frames         map[trace.Stack]frame // programFrame's cache, for the generation framesGen
	framesGen      int
	objects        *objectTable
}

func newParser(opt ParseOptions, res *ParseResult) *traceParser {
	return &traceParser{opt: opt, res: res, gs: map[trace.GoID]*gInfo{}, sites: map[int]int{},
		frames: map[trace.Stack]frame{}, objects: newObjectTable()}
}

func (p *traceParser) step(rt *rawTransition) {
	if rt.gen != p.framesGen {
		// A new generation has its own stack table: drop the old one's frames
		// (and with them the references that would keep that table alive).
		clear(p.frames)
		p.framesGen = rt.gen
	}
	if rt.annotation != "" {
		p.annotate(rt)
		return
	}
	g := p.g(rt.id)
	if rt.from == trace.GoUndetermined || rt.from == rt.to {
		// Per-generation status record: learn the state, emit nothing.
		g.state = rt.to
		g.ran = g.ran || rt.to == trace.GoRunning
		return
	}
	if rt.from == trace.GoNotExist {
		p.created(g, rt)
	}
	if !g.kept || p.res.Truncated {
		// Not the program's, or past the cap (nothing more is emitted): only
		// the state matters (final states, AllBlocked, Leaked).
		p.setState(g, rt)
		return
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
		// The event's own stack is the creator's / unblocker's. A goroutine
		// the runtime started has neither a creator nor a creating frame.
		if !(name == "GoCreate" && g.runtimeStarted) {
			pos = p.programFrame(rt.evStack)
			if a := p.gs[rt.actor]; a != nil && a.kept && rt.actor != rt.id {
				peer = a
			}
		}
	case "GoStart":
		pos = g.resume
	case "GoSyscall":
		// A syscall exit carries no stack: it returns where it entered.
		if hasFrames(rt.stack) {
			g.resume = p.programFrame(rt.stack)
		}
		pos = g.resume
	case "GoEnd":
	default: // GoBlock, GoSched: the goroutine's own stack
		// The goroutine resumes here: the innermost program frame, or none
		// (e.g. tRunner blocking in the testing package after the test
		// function returned). A frame seen before never carries over.
		pos = p.programFrame(rt.stack)
		g.resume = pos
	}
	var render func() (string, string)
	if name == "GoBlock" || name == "GoUnblock" {
		render = p.waitState(g, g.reason)
		if name == "GoBlock" {
			render = p.waitState(g, reason)
		}
	}
	p.setState(g, rt)
	p.record(rt.t, Event{Event: name, Reason: reason, Function: pos.Func, File: pos.File, Line: pos.Line,
		g: g, peer: peer, render: render})
}

// record emits ev, which happened at t, unless the cap is reached (then the
// result is truncated): its time is rebased on the first kept event, and its
// goroutine and peer are marked as appearing in the output.
func (p *traceParser) record(t trace.Time, ev Event) {
	if len(p.res.Events) >= p.opt.MaxEvents {
		p.res.Truncated = true
		return
	}
	if !p.started {
		p.t0, p.started = t, true
	}
	ev.TimeNs = int64(t - p.t0)
	ev.g.emitted = true
	if ev.peer != nil {
		ev.peer.emitted = true
	}
	p.emit(ev)
}

// annotate emits a user annotation of a program goroutine (trace.Log,
// regions) as its own event, at the innermost program frame of its stack;
// annotations of other goroutines (the testing framework, the runtime) and
// outside any goroutine are dropped. Annotations count toward the event cap.
func (p *traceParser) annotate(rt *rawTransition) {
	g := p.gs[rt.id]
	if rt.id == trace.NoGoroutine || g == nil || !g.kept || p.res.Truncated {
		return
	}
	if rt.annotation == "UserLog" && rt.category == objCategory {
		p.objectOp(g, rt)
		return
	}
	pos := p.programFrame(rt.evStack)
	p.record(rt.t, Event{Event: rt.annotation, Reason: rt.reason, Function: pos.Func, File: pos.File,
		Line: pos.Line, Category: rt.category, Message: rt.message, g: g})
}

// emit appends a program event, holding back a preemption until the next one:
// a goroutine preempted and started again before any other program event
// happened was never observably interrupted (no program goroutine ran in
// between; the runtime preempts for GC or a long time slice, a wall-clock
// artifact of machine load), so the pair is dropped. Otherwise the preemption
// is emitted in its place. settlePreemption decides one still held at the end.
func (p *traceParser) emit(ev Event) {
	if held := p.heldPreemption; held != nil {
		p.heldPreemption = nil
		if ev.Event == "GoStart" && ev.g == held.g {
			return
		}
		p.append(*held)
	}
	if ev.Event == "GoSched" && ev.Reason == "preempted" {
		p.heldPreemption = &ev
		return
	}
	p.append(ev)
}

// settlePreemption decides a preemption still held when reading ended. A
// complete trace ended with the goroutine preempted, so the preemption is
// emitted. A cut trace (TraceError set: a generation could not be read whole,
// or the auto-mode buffer filled) drops it: the restart that would have folded
// it may lie in the part that was lost, and emitting it could add an event the
// full trace does not have. So a cut trace's events are a prefix of the full
// trace's: nothing else held back is ever emitted at the end (a slow syscall
// exit still waiting for its restart is simply not reported).
func (p *traceParser) settlePreemption() {
	held := p.heldPreemption
	p.heldPreemption = nil
	if held != nil && p.res.TraceError == "" {
		p.append(*held)
	}
}

func (p *traceParser) append(ev Event) {
	if len(p.res.Events) >= p.opt.MaxEvents {
		p.res.Truncated = true
		return
	}
	ev.Index = len(p.res.Events)
	p.res.Events = append(p.res.Events, ev)
}

// setState records the goroutine's state after the transition.
func (p *traceParser) setState(g *gInfo, rt *rawTransition) {
	g.state = rt.to
	g.ran = g.ran || rt.to == trace.GoRunning
	if rt.to == trace.GoWaiting {
		g.reason = rt.reason
	} else {
		g.reason = ""
	}
}

// maxCachedFrames bounds the frame cache of one generation.
const maxCachedFrames = 1 << 16

// programFrame is the innermost program frame of st (topProgramFrame) with
// the rename and file prefix options applied; the zero frame when there is
// none.
func (p *traceParser) programFrame(st trace.Stack) frame {
	if f, ok := p.frames[st]; ok {
		return f
	}
	var out frame
	if f, ok := topProgramFrame(st); ok {
		out = frame{Func: p.rename(f.Func), File: strings.TrimPrefix(f.File, p.opt.FilePrefix), Line: f.Line}
	}
	if len(p.frames) >= maxCachedFrames {
		clear(p.frames)
	}
	p.frames[st] = out
	return out
}

func (p *traceParser) rename(fn string) string {
	for old, orig := range p.opt.FuncRename {
		if fn == old || strings.HasPrefix(fn, old+".") {
			return orig + fn[len(old):]
		}
	}
	return fn
}
