// Command gosched_interleave runs three goroutines that each append to a
// shared log under a mutex and then call runtime.Gosched, so their steps
// interleave in a scheduler-dependent order.
package main

import (
	"runtime"
	"sync"
)

func main() {
	var mu sync.Mutex
	var log []int
	var wg sync.WaitGroup
	for id := 0; id < 3; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for step := 0; step < 4; step++ {
				mu.Lock()
				log = append(log, id)
				mu.Unlock()
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
	if len(log) != 12 {
		panic("lost steps")
	}
}
