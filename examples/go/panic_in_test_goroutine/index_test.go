package index

import "testing"

func TestLookupOutOfRange(t *testing.T) {
	xs := []int{1, 2, 3}
	if Lookup(xs, 1) != 2 {
		t.Fatal("bad lookup")
	}
	Lookup(xs, len(xs))
}
