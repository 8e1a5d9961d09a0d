// Command buffered_semaphore limits five tasks to two at a time with a
// buffered channel used as a counting semaphore.
package main

import (
	"runtime"
	"sync"
)

func main() {
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	running, peak := 0, 0
	for t := 0; t < 5; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			mu.Lock()
			running++
			peak = max(peak, running)
			mu.Unlock()
			runtime.Gosched()
			mu.Lock()
			running--
			mu.Unlock()
			<-sem
		}()
	}
	wg.Wait()
	if peak > 2 {
		panic("semaphore let too many in")
	}
}
