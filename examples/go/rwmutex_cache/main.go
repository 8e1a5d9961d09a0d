// Command rwmutex_cache has three readers and one writer share a map
// guarded by a sync.RWMutex.
package main

import (
	"runtime"
	"sync"
)

type cache struct {
	mu sync.RWMutex
	m  map[string]int
}

func (c *cache) get(k string) (int, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	runtime.Gosched()
	v, ok := c.m[k]
	return v, ok
}

func (c *cache) put(k string, v int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	runtime.Gosched()
	c.m[k] = v
}

func main() {
	c := &cache{m: map[string]int{}}
	var wg sync.WaitGroup
	wg.Add(4)
	go func() {
		defer wg.Done()
		for i := 0; i < 3; i++ {
			c.put("k", i)
		}
	}()
	for r := 0; r < 3; r++ {
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				c.get("k")
			}
		}()
	}
	wg.Wait()
}
