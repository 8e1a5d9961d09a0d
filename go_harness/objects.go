package main

// The parser's side of object operations: the logs of objectsFile's helpers
// (category objCategory, see objects_src.go) become ObjectOp events, and a
// GoBlock or GoUnblock of a goroutine inside such an operation names the
// object it waits on and the object's state (README.md, "Object operations").

import (
	"fmt"
	"strconv"
	"strings"
)

// object is one channel, mutex, RWMutex, WaitGroup or Cond of a run.
type object struct {
	kind    string // chan | mutex | rwmutex | wg | cond
	site    string // file:line of its make, or of its first logged use
	creator string // gpath of the goroutine that made (first used) it
	ordinal int    // objects of the same kind and site that creator made before it
	id      string // the stable id, set by finishObjects
	len     int    // chan: len and cap after the last logged operation
	cap     int
	closed  bool
	holder  *gInfo // mutex, rwmutex: the goroutine holding it for writing
	readers int    // rwmutex: read locks held
	counter int    // wg: the counter, from the logged Add/Done
	inOp    map[string]int
}

// pendingOp is what a goroutine logged it is about to do ("?op" logs) and
// has not finished yet.
type pendingOp struct {
	op     string    // send | recv | select | lock | rlock | wait
	objs   []*object // the object; select: each case's channel (nil: untracked or nil channel)
	ops    []string  // select: each case's op
	lockOf *object   // cond wait: the cond's L when it is a *sync.Mutex
}

// objectTable holds a run's objects by runtime token.
type objectTable struct {
	byTok map[string]*object
	made  map[string]int // objects per "kind@site|creator", for ordinals
	all   []*object
}

func newObjectTable() *objectTable {
	return &objectTable{byTok: map[string]*object{}, made: map[string]int{}}
}

// get returns the object of tok, creating it (at site, by g) when it is new
// or when made is set (a make at a reused address is a new channel). nil for
// a nil channel ("0") or an untracked select case ("-").
func (t *objectTable) get(kind, tok, site string, g *gInfo, made bool) *object {
	if tok == "0" || tok == "-" {
		return nil
	}
	if o := t.byTok[tok]; o != nil && !made {
		return o
	}
	creator := g.gpath()
	key := kind + "@" + site + "|" + creator
	o := &object{kind: kind, site: site, creator: creator, ordinal: t.made[key], inOp: map[string]int{}}
	t.made[key]++
	t.byTok[tok] = o
	t.all = append(t.all, o)
	return o
}

// finishObjects sets each object's id: KIND@FILE:LINE of its site, plus
// "/gGPATH" when goroutines of different gpaths made objects there, plus
// "#N" (the creator's N-th there, from 0) when one goroutine made several.
func (t *objectTable) finishObjects() {
	creators := map[string]map[string]bool{}
	several := map[string]bool{}
	for _, o := range t.all {
		key := o.kind + "@" + o.site
		if creators[key] == nil {
			creators[key] = map[string]bool{}
		}
		creators[key][o.creator] = true
		several[key] = several[key] || o.ordinal > 0
	}
	for _, o := range t.all {
		key := o.kind + "@" + o.site
		o.id = key
		if len(creators[key]) > 1 {
			o.id += "/g" + o.creator
		}
		if several[key] {
			o.id += "#" + strconv.Itoa(o.ordinal)
		}
	}
}

func (o *object) ref() string {
	if o == nil {
		return ""
	}
	return o.id
}

// chanText is a channel's state: "len L/C" (", closed").
func (o *object) chanText() string {
	s := fmt.Sprintf("len %d/%d", o.len, o.cap)
	if o.closed {
		s += ", closed"
	}
	return s
}

// lockText is a mutex's state: "held by gGPATH", "readers N" or "free".
func (o *object) lockText() string {
	switch {
	case o.holder != nil:
		return "held by g" + o.holder.gpath()
	case o.readers > 0:
		return fmt.Sprintf("readers %d", o.readers)
	}
	return "free"
}

// objectOp handles one log of objectsFile's helpers by goroutine g.
func (p *traceParser) objectOp(g *gInfo, rt *rawTransition) {
	f := strings.Fields(rt.message)
	if len(f) < 3 {
		return
	}
	op, kind, pre := f[0], f[1], strings.HasPrefix(f[0], "?")
	op = strings.TrimPrefix(op, "?")
	pos := p.programFrame(rt.evStack)
	site := fmt.Sprintf("%s:%d", pos.File, pos.Line)
	t := p.objects
	if kind == "select" {
		p.selectOp(g, rt, pre, f[2:], site, pos)
		return
	}
	o := t.get(kind, f[2], site, g, op == "make")
	if kind == "chan" && o != nil && len(f) >= 5 {
		o.len, _ = strconv.Atoi(f[3])
		o.cap, _ = strconv.Atoi(f[4])
	}
	if pre {
		pend := &pendingOp{op: op, objs: []*object{o}}
		if kind == "cond" && len(f) >= 4 {
			// Cond.Wait unlocks its L.
			if pend.lockOf = t.get("mutex", f[3], site, g, false); pend.lockOf != nil && pend.lockOf.holder == g {
				pend.lockOf.holder = nil
			}
		}
		p.begin(g, pend)
		return
	}
	if pend := g.pending; pend != nil && pend.op == op && len(pend.objs) == 1 && pend.objs[0] == o {
		p.end(g)
		if pend.lockOf != nil {
			pend.lockOf.holder = g
		}
	}
	if o == nil {
		p.recordObjectOp(rt, g, op, pos, nil, func() string { return "nil channel" })
		return
	}
	var text string
	switch {
	case kind == "chan":
		o.closed = o.closed || op == "close"
		text = o.chanText()
	case op == "lock":
		o.holder = g
		text = o.lockText()
	case op == "unlock":
		o.holder = nil
		text = o.lockText()
	case op == "rlock" || op == "runlock":
		if op == "rlock" {
			o.readers++
		} else if o.readers > 0 {
			o.readers--
		}
		text = o.lockText()
	case kind == "wg":
		switch op {
		case "add":
			if len(f) >= 4 {
				d, _ := strconv.Atoi(f[3])
				o.counter += d
			}
		case "done":
			o.counter--
		}
		text = fmt.Sprintf("counter %d", o.counter)
	case kind == "cond":
		text = fmt.Sprintf("waiters %d", o.inOp["wait"])
	}
	if op == "make" {
		text = strings.TrimPrefix(text, "waiters 0") // a new cond has no state to tell
	}
	p.recordObjectOp(rt, g, op, pos, o, func() string { return text })
}

// selectOp handles a select's offered cases ("?select": default flag, then
// op, token, len, cap per case) and the case that fired (index, or -1 for
// default, then the channel's token, len, cap).
func (p *traceParser) selectOp(g *gInfo, rt *rawTransition, pre bool, f []string, site string, pos frame) {
	if pre {
		pend := &pendingOp{op: "select"}
		for i := 1; i+3 < len(f); i += 4 {
			o := p.objects.get("chan", f[i+1], site, g, false)
			if o != nil {
				o.len, _ = strconv.Atoi(f[i+2])
				o.cap, _ = strconv.Atoi(f[i+3])
			}
			pend.objs, pend.ops = append(pend.objs, o), append(pend.ops, f[i])
		}
		p.begin(g, pend)
		return
	}
	pend := g.pending
	if pend == nil || pend.op != "select" || len(f) < 4 {
		return
	}
	p.end(g)
	i, _ := strconv.Atoi(f[0])
	if i < 0 || i >= len(pend.objs) {
		p.recordObjectOp(rt, g, "select", pos, nil, func() string { return "default" })
		return
	}
	o, op := pend.objs[i], pend.ops[i]
	if o != nil && f[1] != "-" && f[1] != "0" {
		o.len, _ = strconv.Atoi(f[2])
		o.cap, _ = strconv.Atoi(f[3])
	}
	text := op
	if o != nil {
		text += ", " + o.chanText()
	}
	p.recordObjectOp(rt, g, "select", pos, o, func() string { return text })
}

// begin makes pend g's pending operation, counting g in each object's inOp.
func (p *traceParser) begin(g *gInfo, pend *pendingOp) {
	if g.pending != nil {
		p.end(g)
	}
	g.pending = pend
	for i, o := range pend.objs {
		if o != nil {
			o.inOp[pend.opAt(i)]++
		}
	}
}

// end clears g's pending operation.
func (p *traceParser) end(g *gInfo) {
	pend := g.pending
	g.pending = nil
	for i, o := range pend.objs {
		if o != nil && o.inOp[pend.opAt(i)] > 0 {
			o.inOp[pend.opAt(i)]--
		}
	}
}

func (pend *pendingOp) opAt(i int) string {
	if pend.op == "select" {
		return pend.ops[i]
	}
	return pend.op
}

func (p *traceParser) recordObjectOp(rt *rawTransition, g *gInfo, op string, pos frame, o *object, text func() string) {
	state := text()
	p.record(rt.t, Event{Event: "ObjectOp", Reason: op, Function: pos.Func, File: pos.File, Line: pos.Line, g: g,
		render: func() (string, string) { return o.ref(), state }})
}

// waitState describes, for a GoBlock or GoUnblock of g, the object g's
// pending operation is on and its state now: e.g. "recv, len 0/1, senders
// 0", "lock, held by g0.2", "wait, counter 2". nil when g has no pending
// operation. A Cond.Wait blocked again on relocking its L reports the L.
func (p *traceParser) waitState(g *gInfo, reason string) func() (string, string) {
	pend := g.pending
	if pend == nil {
		return nil
	}
	if pend.op == "select" {
		return selectState(pend)
	}
	o := pend.objs[0]
	if pend.lockOf != nil && strings.Contains(reason, "Mutex") {
		o = pend.lockOf
		state := "lock, " + o.lockText()
		return func() (string, string) { return o.ref(), state }
	}
	var state string
	switch {
	case o == nil:
		state = pend.op + ", nil channel"
	case o.kind == "chan" && pend.op == "send":
		state = fmt.Sprintf("send, %s, receivers %d", o.chanText(), o.inOp["recv"])
	case o.kind == "chan":
		state = fmt.Sprintf("recv, %s, senders %d", o.chanText(), o.inOp["send"])
	case o.kind == "wg":
		state = fmt.Sprintf("wait, counter %d", o.counter)
	case o.kind == "cond":
		state = fmt.Sprintf("wait, waiters %d", o.inOp["wait"])
	default:
		state = pend.op + ", " + o.lockText()
	}
	return func() (string, string) { return o.ref(), state }
}

// selectState: object = the offered channels' ids, comma-separated;
// state = "select: recv ID len 0/1, send ID len 1/1, recv untracked".
func selectState(pend *pendingOp) func() (string, string) {
	texts := make([]string, len(pend.objs))
	for i, o := range pend.objs {
		switch {
		case o == nil:
			texts[i] = "untracked"
		default:
			texts[i] = o.chanText()
		}
	}
	objs, ops := pend.objs, pend.ops
	return func() (string, string) {
		if len(objs) == 0 {
			return "", "select, no cases"
		}
		var ids, parts []string
		for i, o := range objs {
			if o != nil {
				ids = append(ids, o.id)
				parts = append(parts, ops[i]+" "+o.id+" "+texts[i])
			} else {
				parts = append(parts, ops[i]+" untracked")
			}
		}
		return strings.Join(ids, ","), "select: " + strings.Join(parts, ", ")
	}
}
