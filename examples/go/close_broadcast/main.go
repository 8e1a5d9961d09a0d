// Command close_broadcast parks four goroutines on one channel and releases
// them all at once by closing it.
package main

import "sync"

func main() {
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	for g := 0; g < 4; g++ {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}
