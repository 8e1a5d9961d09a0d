// Command abba_deadlock takes two mutexes in opposite orders in two
// goroutines; a rendezvous makes sure each holds its first lock before
// asking for the second, so the program always deadlocks.
package main

import "sync"

func main() {
	var a, b sync.Mutex
	var holding sync.WaitGroup
	holding.Add(2)
	var done sync.WaitGroup
	done.Add(2)
	go func() {
		defer done.Done()
		a.Lock()
		holding.Done()
		holding.Wait()
		b.Lock()
		b.Unlock()
		a.Unlock()
	}()
	go func() {
		defer done.Done()
		b.Lock()
		holding.Done()
		holding.Wait()
		a.Lock()
		a.Unlock()
		b.Unlock()
	}()
	done.Wait()
}
