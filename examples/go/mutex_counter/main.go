// Command mutex_counter has four goroutines increment one counter under a
// sync.Mutex, yielding while holding the lock to provoke contention.
package main

import (
	"runtime"
	"sync"
)

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) add(times int, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; i < times; i++ {
		c.mu.Lock()
		c.n++
		runtime.Gosched()
		c.mu.Unlock()
	}
}

func main() {
	var c counter
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go c.add(5, &wg)
	}
	wg.Wait()
	if c.n != 20 {
		panic("lost update")
	}
}
