// Command leak_unsatisfiable_select parks a worker on a select that no
// goroutine can ever satisfy, and main returns without waiting for it: the
// run ends normally with the worker still blocked, so its status is leak
// (the worker is listed in the run's "leaked", reason "select").
package main

import "time"

// worker reports ready, then selects on three cases that can never proceed.
func worker(results chan<- int, ready chan<- struct{}) {
	var never chan int           // nil: a receive from it blocks forever
	private := make(chan string) // no other goroutine can send on it
	ready <- struct{}{}
	select {
	case v := <-never:
		results <- v
	case s := <-private:
		results <- len(s)
	case results <- 42: // main never receives from results
	}
	println("unreachable")
}

func main() {
	results := make(chan int)
	ready := make(chan struct{})
	go worker(results, ready)
	<-ready
	// The worker is about to select. Leave it the processor for a moment so
	// it is parked when the program ends (even on a loaded machine), then
	// return without receiving from results.
	time.Sleep(time.Millisecond)
}
