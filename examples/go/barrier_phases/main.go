// Command barrier_phases runs three goroutines through two phases; a fresh
// WaitGroup per phase acts as a barrier between them.
package main

import "sync"

func main() {
	results := make([]int, 3)
	for phase := 1; phase <= 2; phase++ {
		var wg sync.WaitGroup
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[g] += phase * (g + 1)
			}()
		}
		wg.Wait()
	}
	if results[2] != 9 {
		panic("bad result")
	}
}
