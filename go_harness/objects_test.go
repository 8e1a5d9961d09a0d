package main

// Object ids (objects.go): the site alone when it is unambiguous, else the
// maker's gpath and the maker's ordinal there.

import (
	"slices"
	"testing"
)

func TestObjectIDsAreSiteThenMakerThenOrdinal(t *testing.T) {
	tab := newObjectTable()
	main, w1, w2 := &gInfo{path: []int{0}}, &gInfo{path: []int{0, 1}}, &gInfo{path: []int{0, 2}}
	once := tab.get("chan", "a1", "main.go:5", main, true)
	perWorker := []*object{tab.get("mutex", "b1", "main.go:9", w1, false), tab.get("mutex", "b2", "main.go:9", w2, false)}
	loop := []*object{tab.get("chan", "c1", "main.go:12", main, true), tab.get("chan", "c2", "main.go:12", main, true)}
	mixed := []*object{tab.get("wg", "d1", "main.go:20", w1, false), tab.get("wg", "d2", "main.go:20", w1, false),
		tab.get("wg", "d3", "main.go:20", w2, false)}
	if again := tab.get("mutex", "b1", "main.go:30", main, false); again != perWorker[0] {
		t.Fatal("a known token is the same object wherever it is used")
	}
	remade := tab.get("chan", "a1", "main.go:5", main, true) // the runtime reused the address for a new make
	tab.finishObjects()
	ids := func(os ...*object) []string {
		var out []string
		for _, o := range os {
			out = append(out, o.id)
		}
		return out
	}
	for _, c := range []struct{ got, want []string }{
		{ids(once, remade), []string{"chan@main.go:5#0", "chan@main.go:5#1"}},
		{ids(perWorker...), []string{"mutex@main.go:9/g0.1", "mutex@main.go:9/g0.2"}},
		{ids(loop...), []string{"chan@main.go:12#0", "chan@main.go:12#1"}},
		{ids(mixed...), []string{"wg@main.go:20/g0.1#0", "wg@main.go:20/g0.1#1", "wg@main.go:20/g0.2#0"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("ids %v, want %v", c.got, c.want)
		}
	}
	if tab.get("chan", "0", "main.go:40", main, false) != nil || tab.get("chan", "-", "main.go:40", main, false) != nil {
		t.Fatal("nil channels and untracked cases are no objects")
	}
}
