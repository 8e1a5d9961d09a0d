package shard

import "testing"

func TestSum(t *testing.T) {
	xs := []int{1, 2, 3, 4, 5, 6, 7}
	for _, n := range []int{1, 2, 3} {
		t.Run("shards", func(t *testing.T) {
			if got := Sum(xs, n); got != 28 {
				t.Errorf("Sum(xs, %d) = %d, want 28", n, got)
			}
		})
	}
}
