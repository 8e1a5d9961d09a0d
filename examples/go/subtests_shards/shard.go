// Package shard sums shards of a slice concurrently.
package shard

import "sync"

// Sum adds xs split into n shards, one goroutine each.
func Sum(xs []int, n int) int {
	partial := make(chan int, n)
	var wg sync.WaitGroup
	size := (len(xs) + n - 1) / n
	for s := 0; s < n; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := 0
			for _, x := range xs[min(s*size, len(xs)):min((s+1)*size, len(xs))] {
				t += x
			}
			partial <- t
		}()
	}
	wg.Wait()
	close(partial)
	total := 0
	for p := range partial {
		total += p
	}
	return total
}
