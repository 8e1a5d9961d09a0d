// Command spin_forever starts a goroutine that never blocks and never ends;
// main waits for it forever. The run must end with status timeout (the
// spinner keeps running, so it is not a deadlock).
package main

import "sync"

var counter uint64

func spin() {
	for {
		counter++
	}
}

func main() {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		spin()
	}()
	wg.Wait()
}
