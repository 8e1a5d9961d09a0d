// Package queue starts work it never waits for.
package queue

import "time"

// Prepare computes for a millisecond, then parks until block is closed.
func Prepare(block <-chan bool) {
	for start := time.Now(); time.Since(start) < time.Millisecond; {
	}
	<-block
}

// Notify would return at once, had it ever run.
func Notify(done chan<- bool) {
	done <- true
}
