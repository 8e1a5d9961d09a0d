// Command data_race increments a plain int from two goroutines without
// synchronisation; built with -race it reports a data race.
package main

import "sync"

func main() {
	hits := 0
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				hits++
			}
		}()
	}
	wg.Wait()
	_ = hits
}
