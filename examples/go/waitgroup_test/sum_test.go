package sum

import "testing"

func TestParallelSum(t *testing.T) {
	xs := make([]int, 100)
	for i := range xs {
		xs[i] = i
	}
	if got := ParallelSum(xs, 25); got != 4950 {
		t.Fatalf("ParallelSum = %d, want 4950", got)
	}
}
