// Package sum adds slices in parallel chunks.
package sum

import "sync"

// ParallelSum adds xs using one goroutine per chunk of the given size.
func ParallelSum(xs []int, chunk int) int {
	var wg sync.WaitGroup
	parts := make([]int, (len(xs)+chunk-1)/chunk)
	for i := range parts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			end := min((i+1)*chunk, len(xs))
			for _, x := range xs[i*chunk : end] {
				parts[i] += x
			}
		}(i)
	}
	wg.Wait()
	total := 0
	for _, p := range parts {
		total += p
	}
	return total
}
