// Command atomic_counter counts with sync/atomic from four goroutines;
// atomics never block, so only creation, start and end events appear
// besides main's wait.
package main

import (
	"sync"
	"sync/atomic"
)

func main() {
	var n atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if n.Load() != 400 {
		panic("lost increments")
	}
}
