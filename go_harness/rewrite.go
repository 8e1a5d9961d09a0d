package main

// Source rewriting that makes a program's channel and sync operations visible
// in its trace (README.md, "Object operations"). Every rewrite is a byte-level
// edit that adds no newline and removes none, so each original line keeps its
// number; the helpers the edits call live in objectsFile, whose frames the
// parser never reports (frames.go).

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// objectsFile is the generated file holding the helpers the rewritten code
// calls; objCategory is the trace.Log category they log under (reserved: the
// parser reads such logs as object operations, never as the program's own).
const (
	objectsFile = "0001_tracegen_objects.go"
	objCategory = "tracegen.obj"
)

// Instrumentation says how a run's program was built (go_runs.instrumentation).
const (
	InstrRewritten = "rewritten" // object operations rewritten and logged
	InstrDisabled  = "disabled"  // -rewrite=false: the original source
	InstrFallback  = "fallback"  // rewriting or the rewritten build failed; the original source
)

// syncHelpers maps a sync method (types.Func.FullName) to its helper.
var syncHelpers = map[string]string{
	"(*sync.Mutex).Lock":      "_tracegenLock",
	"(*sync.Mutex).Unlock":    "_tracegenUnlock",
	"(*sync.RWMutex).Lock":    "_tracegenRWLock",
	"(*sync.RWMutex).Unlock":  "_tracegenRWUnlock",
	"(*sync.RWMutex).RLock":   "_tracegenRLock",
	"(*sync.RWMutex).RUnlock": "_tracegenRUnlock",
	"(*sync.WaitGroup).Add":   "_tracegenWGAdd",
	"(*sync.WaitGroup).Done":  "_tracegenWGDone",
	"(*sync.WaitGroup).Wait":  "_tracegenWGWait",
	"(*sync.WaitGroup).Go":    "_tracegenWGGo",
	"(*sync.Cond).Wait":       "_tracegenCondWait",
	"(*sync.Cond).Signal":     "_tracegenCondSignal",
	"(*sync.Cond).Broadcast":  "_tracegenCondBroadcast",
}

// edit replaces src[off:end] with text (an insertion when off == end).
// Insertions at one offset are ordered: closing text first, inner before
// outer (seq descending), then opening text, outer before inner (seq
// ascending); a replacement starting there comes last.
type edit struct {
	off, end int
	text     string
	closing  bool
	seq      int
}

// rewriter collects the edits of one file.
type rewriter struct {
	fset  *token.FileSet
	info  *types.Info
	src   []byte
	base  int // the file's base offset in fset
	edits []edit
	skip  map[ast.Node]bool // operations that must stay as they are (select comms, go statements)
	label map[ast.Stmt]token.Pos
	nsel  int
}

// rewriteObjects rewrites the package in dir in place: its Go files (and
// in-package test files when withTests) get the object-operation edits and
// objectsFile is added. Any error leaves dir as it was, except that files may
// already be rewritten: the caller restores the copy (Prepare's fallback).
// race: the program is built with -race (the importer then finds the
// standard library's export data of that build).
func rewriteObjects(dir string, withTests, race bool) error {
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		return err
	}
	if len(pkg.CgoFiles) > 0 {
		return errors.New("cgo files are not rewritten")
	}
	names := slices.Clone(pkg.GoFiles)
	if withTests {
		names = append(names, pkg.TestGoFiles...)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	srcs := map[*ast.File][]byte{}
	paths := map[*ast.File]string{}
	for _, name := range names {
		path := filepath.Join(dir, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
		srcs[f], paths[f] = src, path
	}
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Uses:       map[*ast.Ident]types.Object{},
		Defs:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	if err := ensureGoroot(); err != nil {
		return err
	}
	// The "gc" importer runs `go list -export` with this process's
	// environment: the build's flags make it find the export data the build
	// cache already holds (a warm cache, or the program's own build) instead
	// of compiling the standard library again.
	flags := "-mod=mod -trimpath"
	if race {
		flags += " -race"
	}
	for k, v := range map[string]string{"GOFLAGS": flags, "GOPROXY": "off", "GOTOOLCHAIN": "local",
		"GOWORK": "off", "GOSUMDB": "off"} {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	conf := types.Config{Importer: newPkgImporter(fset)}
	if _, err := conf.Check(pkg.ImportPath, fset, files, info); err != nil {
		return fmt.Errorf("type-check: %w", err)
	}
	for _, f := range files {
		src := srcs[f]
		rw := &rewriter{fset: fset, info: info, src: src, base: fset.File(f.Pos()).Base(),
			skip: map[ast.Node]bool{}, label: map[ast.Stmt]token.Pos{}}
		ast.Inspect(f, rw.visit)
		if len(rw.edits) == 0 {
			continue
		}
		out, err := applyEdits(src, rw.edits)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(paths[f]), err)
		}
		if err := os.WriteFile(paths[f], out, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, objectsFile), []byte(objectsSource(pkg.Name)), 0o644)
}

// ensureGoroot sets go/build's GOROOT, which the importers need to find the
// standard library, from `go env GOROOT` when neither $GOROOT nor the
// harness's build (-trimpath) tells it.
func ensureGoroot() error {
	if build.Default.GOROOT != "" {
		return nil
	}
	cmd := exec.Command(goTool(), "env", "GOROOT")
	cmd.Env = goEnv()
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go env GOROOT: %w", err)
	}
	build.Default.GOROOT = strings.TrimSpace(string(out))
	return nil
}

// pkgImporter imports the standard library from the toolchain's export data
// (the "gc" importer: `go list -export`, offline, about 0.5 s for sync, time
// and fmt on a small machine) and anything else from source ("source"
// importer: the program's own packages and modules; the standard library that
// way costs about 2 s).
type pkgImporter struct {
	gc, src types.ImporterFrom
}

func newPkgImporter(fset *token.FileSet) *pkgImporter {
	return &pkgImporter{gc: importer.ForCompiler(fset, "gc", nil).(types.ImporterFrom),
		src: importer.ForCompiler(fset, "source", nil).(types.ImporterFrom)}
}

func (im *pkgImporter) Import(path string) (*types.Package, error) { return im.ImportFrom(path, "", 0) }

func (im *pkgImporter) ImportFrom(path, dir string, mode types.ImportMode) (*types.Package, error) {
	if first, _, _ := strings.Cut(path, "/"); !strings.Contains(first, ".") && stdRoots[first] {
		return im.gc.ImportFrom(path, dir, mode)
	}
	return im.src.ImportFrom(path, dir, mode)
}

// applyEdits applies non-overlapping edits; it refuses a result whose line
// count differs from the source's (no edit may add or remove a newline).
func applyEdits(src []byte, edits []edit) ([]byte, error) {
	slices.SortStableFunc(edits, func(a, b edit) int {
		if a.off != b.off {
			return a.off - b.off
		}
		rank := func(e edit) int {
			switch {
			case e.end > e.off:
				return 2
			case e.closing:
				return 0
			}
			return 1
		}
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		if a.closing {
			return b.seq - a.seq
		}
		return a.seq - b.seq
	})
	var out []byte
	pos := 0
	for _, e := range edits {
		if e.off < pos {
			return nil, fmt.Errorf("overlapping edits at offset %d", e.off)
		}
		out = append(append(out, src[pos:e.off]...), e.text...)
		pos = e.end
	}
	out = append(out, src[pos:]...)
	if strings.Count(string(out), "\n") != strings.Count(string(src), "\n") {
		return nil, errors.New("an edit changed the line count")
	}
	return out, nil
}

func (rw *rewriter) off(p token.Pos) int { return int(p) - rw.base }

func (rw *rewriter) line(p token.Pos) int { return rw.fset.Position(p).Line }

func (rw *rewriter) add(off, end int, text string, closing bool) {
	rw.edits = append(rw.edits, edit{off: off, end: end, text: text, closing: closing, seq: len(rw.edits)})
}

// wrap inserts open before n and close after it.
func (rw *rewriter) wrap(n ast.Node, open, close string) {
	rw.add(rw.off(n.Pos()), rw.off(n.Pos()), open, false)
	rw.add(rw.off(n.End()), rw.off(n.End()), close, true)
}

// chanOperand reports whether x is a channel whose operations a generic
// helper can take (not a type parameter with a channel core type).
func (rw *rewriter) chanOperand(x ast.Expr) bool {
	t := rw.info.TypeOf(x)
	if t == nil {
		return false
	}
	if _, tp := t.(*types.TypeParam); tp {
		return false
	}
	_, ok := t.Underlying().(*types.Chan)
	return ok
}

func (rw *rewriter) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.LabeledStmt:
		rw.label[n.Stmt] = n.Pos()
	case *ast.GoStmt:
		rw.skip[n.Call] = true // a helper would become the goroutine's start function
	case *ast.SelectStmt:
		rw.selectStmt(n)
	case *ast.SendStmt:
		// The statement and its arrow on one line: the helper's call is
		// then on the line the send was.
		if !rw.skip[n] && rw.chanOperand(n.Chan) && rw.line(n.Pos()) == rw.line(n.Arrow) {
			rw.add(rw.off(n.Pos()), rw.off(n.Pos()), "_tracegenSend(", false)
			rw.add(rw.off(n.Arrow), rw.off(n.Arrow)+2, ",", false)
			rw.add(rw.off(n.End()), rw.off(n.End()), ")", true)
		}
	case *ast.AssignStmt:
		if len(n.Lhs) == 2 && len(n.Rhs) == 1 {
			rw.commaOK(n.Rhs[0])
		}
	case *ast.ValueSpec:
		if len(n.Names) == 2 && len(n.Values) == 1 {
			rw.commaOK(n.Values[0])
		}
	case *ast.UnaryExpr:
		if n.Op == token.ARROW && !rw.skip[n] && rw.chanOperand(n.X) {
			rw.add(rw.off(n.OpPos), rw.off(n.OpPos)+2, "_tracegenRecv(", false)
			rw.add(rw.off(n.End()), rw.off(n.End()), ")", true)
		}
	case *ast.RangeStmt:
		rw.rangeStmt(n)
	case *ast.CallExpr:
		if !rw.skip[n] {
			rw.call(n)
		}
	}
	return true
}

// commaOK rewrites `v, ok := <-ch` (and =, var) to the two-result helper.
func (rw *rewriter) commaOK(x ast.Expr) {
	u, ok := ast.Unparen(x).(*ast.UnaryExpr)
	if !ok || u.Op != token.ARROW || rw.skip[u] || !rw.chanOperand(u.X) {
		return
	}
	rw.skip[u] = true
	rw.add(rw.off(u.OpPos), rw.off(u.OpPos)+2, "_tracegenRecv2(", false)
	rw.add(rw.off(u.End()), rw.off(u.End()), ")", true)
}

// rangeStmt turns `for v := range ch {` into a three-clause loop receiving
// through the helper: `for v, _tracegenOK := _tracegenRecv2(ch);
// _tracegenOK; v, _tracegenOK = _tracegenRecv2(ch) {`. The channel is then
// evaluated every iteration, so only a plain variable that the loop body
// never assigns (or takes the address of) is rewritten; `for v = range ch`
// (assignment) is left alone.
func (rw *rewriter) rangeStmt(n *ast.RangeStmt) {
	id, ok := n.X.(*ast.Ident)
	if !ok || !rw.chanOperand(id) || (n.Key != nil && n.Tok != token.DEFINE) || n.Value != nil {
		return
	}
	obj := rw.info.Uses[id]
	if obj == nil || rw.assigns(n.Body, obj) {
		return
	}
	start, end := n.Range, n.X.End()
	recv := "_tracegenRecv2(" + id.Name + ")"
	text := "_tracegenOK := _tracegenRecvOK(" + id.Name + "); _tracegenOK; _tracegenOK = _tracegenRecvOK(" + id.Name + ")"
	if n.Key != nil {
		key := string(rw.src[rw.off(n.Key.Pos()):rw.off(n.Key.End())])
		start = n.Key.Pos()
		text = key + ", _tracegenOK := " + recv + "; _tracegenOK; " + key + ", _tracegenOK = " + recv
	}
	if rw.line(start) != rw.line(end) {
		return
	}
	rw.skip[id] = true
	rw.add(rw.off(start), rw.off(end), text, false)
}

// assigns reports whether body assigns obj or takes its address.
func (rw *rewriter) assigns(body ast.Node, obj types.Object) bool {
	found := false
	is := func(x ast.Expr) bool {
		id, ok := ast.Unparen(x).(*ast.Ident)
		return ok && (rw.info.Uses[id] == obj || rw.info.Defs[id] == obj)
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			found = found || slices.ContainsFunc(n.Lhs, is)
		case *ast.UnaryExpr:
			found = found || (n.Op == token.AND && is(n.X))
		case *ast.RangeStmt:
			found = found || (n.Tok == token.ASSIGN && (is(n.Key) || n.Value != nil && is(n.Value)))
		}
		return !found
	})
	return found
}

// call rewrites make(chan …), close(ch), sync.NewCond(…) and the sync
// methods of syncHelpers.
func (rw *rewriter) call(n *ast.CallExpr) {
	if id, ok := ast.Unparen(n.Fun).(*ast.Ident); ok {
		if _, builtin := rw.info.Uses[id].(*types.Builtin); !builtin {
			return
		}
		switch {
		case id.Name == "make" && rw.chanOperand(n):
			rw.wrap(n, "_tracegenMake(", ")")
		case id.Name == "close" && len(n.Args) == 1 && rw.chanOperand(n.Args[0]):
			rw.add(rw.off(id.Pos()), rw.off(id.End()), "_tracegenClose", false)
		}
		return
	}
	sel, ok := n.Fun.(*ast.SelectorExpr)
	if !ok || n.Ellipsis.IsValid() || rw.line(n.Pos()) != rw.line(n.Lparen) {
		return
	}
	if fn, ok := rw.info.Uses[sel.Sel].(*types.Func); ok && fn.FullName() == "sync.NewCond" {
		rw.wrap(n, "_tracegenNewCond(", ")") // the cond's allocation site
		return
	}
	s := rw.info.Selections[sel]
	if s == nil || s.Kind() != types.MethodVal {
		return
	}
	fn, ok := s.Obj().(*types.Func)
	if !ok {
		return
	}
	helper := syncHelpers[fn.FullName()]
	if helper == "" {
		return
	}
	// The receiver: the selector's operand, through the embedded fields of
	// a promoted method, as a pointer.
	path, t := "", rw.info.TypeOf(sel.X)
	for _, i := range s.Index()[:len(s.Index())-1] {
		st, ok := deref(t).Underlying().(*types.Struct)
		if !ok {
			return
		}
		path += "." + st.Field(i).Name()
		t = st.Field(i).Type()
	}
	amp := "&"
	if _, ptr := t.Underlying().(*types.Pointer); ptr {
		amp = ""
	}
	if len(n.Args) == 0 && rw.line(n.Lparen) != rw.line(n.Rparen) {
		return
	}
	rw.add(rw.off(n.Pos()), rw.off(n.Pos()), helper+"("+amp, false)
	if len(n.Args) == 0 {
		rw.add(rw.off(sel.X.End()), rw.off(n.Rparen)+1, path+")", false)
	} else {
		rw.add(rw.off(sel.X.End()), rw.off(n.Lparen)+1, path+", ", false)
	}
}

func deref(t types.Type) types.Type {
	if p, ok := t.Underlying().(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}

// selectStmt logs the cases a select offers (before it, on its line) and
// the case that fired (first in each clause's body, on the clause's line).
// A case whose channel expression could have side effects is offered as
// untracked: evaluating it again would change the program.
func (rw *rewriter) selectStmt(n *ast.SelectStmt) {
	rw.nsel++
	args, hasDefault := "", "false"
	for i, c := range n.Body.List {
		cc := c.(*ast.CommClause)
		op, ch := "", ast.Expr(nil)
		switch comm := cc.Comm.(type) {
		case nil:
			hasDefault = "true"
			rw.add(rw.off(cc.Colon)+1, rw.off(cc.Colon)+1, " _tracegenFired(-1, nil);", false)
			continue
		case *ast.SendStmt:
			rw.skip[comm] = true
			op, ch = "send", comm.Chan
		case *ast.ExprStmt:
			op, ch = "recv", rw.commRecv(comm.X)
		case *ast.AssignStmt:
			op, ch = "recv", rw.commRecv(comm.Rhs[0])
		}
		// The fired log re-reads the channel only when the clause's own
		// variables cannot shadow it.
		arg := "nil"
		if ch != nil && pure(ch) && !rw.shadows(cc.Comm, ch) && rw.chanOperand(ch) {
			arg = string(rw.src[rw.off(ch.Pos()):rw.off(ch.End())])
		}
		rw.add(rw.off(cc.Colon)+1, rw.off(cc.Colon)+1, fmt.Sprintf(" _tracegenFired(%d, %s);", i, arg), false)
		offered := "false" // untracked
		if ch != nil && pure(ch) && rw.chanOperand(ch) && !strings.Contains(rw.srcOf(ch), "\n") {
			offered = rw.srcOf(ch)
		}
		args += fmt.Sprintf(", %q, %s", op, offered)
	}
	pos := n.Pos()
	if l, ok := rw.label[n]; ok {
		pos = l
	}
	rw.add(rw.off(pos), rw.off(pos), "_tracegenSelect("+hasDefault+args+"); ", false)
}

func (rw *rewriter) srcOf(x ast.Node) string { return string(rw.src[rw.off(x.Pos()):rw.off(x.End())]) }

// commRecv returns the channel of a select case's receive and marks the
// receive as not to be rewritten.
func (rw *rewriter) commRecv(x ast.Expr) ast.Expr {
	u, ok := ast.Unparen(x).(*ast.UnaryExpr)
	if !ok || u.Op != token.ARROW {
		return nil
	}
	rw.skip[u] = true
	return u.X
}

// shadows reports whether a case's `v, ok := <-ch` (or `=`) sets a name that ch uses.
func (rw *rewriter) shadows(comm ast.Stmt, ch ast.Expr) bool {
	as, ok := comm.(*ast.AssignStmt)
	if !ok {
		return false
	}
	names := map[string]bool{}
	for _, l := range as.Lhs {
		if id, ok := l.(*ast.Ident); ok {
			names[id.Name] = true
		}
	}
	found := false
	ast.Inspect(ch, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && names[id.Name] {
			found = true
		}
		return !found
	})
	return found
}

// pure reports whether evaluating x again has no side effects and cannot
// block: identifiers, field selections, dereferences and indexing by such.
func pure(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.Ident, *ast.BasicLit:
		return true
	case *ast.ParenExpr:
		return pure(x.X)
	case *ast.SelectorExpr:
		return pure(x.X)
	case *ast.StarExpr:
		return pure(x.X)
	case *ast.IndexExpr:
		return pure(x.X) && pure(x.Index)
	}
	return false
}
