// Command concurrent_map_writes writes one map from several goroutines
// without a lock until the runtime detects it and dies with "fatal error:
// concurrent map writes" (status exit_error; its trace may be missing).
package main

import "sync"

func main() {
	m := map[int]int{}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1_000_000; i++ {
				m[i%64] = g
			}
		}()
	}
	wg.Wait()
}
