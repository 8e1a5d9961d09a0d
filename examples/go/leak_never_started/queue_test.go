package queue

import (
	"runtime"
	"testing"
)

// TestNotifyQueuedLast leaves behind a goroutine that, in most runs, never
// ran. With one P, the test queues 400 goroutines that each compute for a
// millisecond before they park, then a notifier, and passes. The runtime
// runs its queue in order, so the notifier's turn is 400 ms of work away,
// while the testing framework stops the trace a few scheduler turns later
// (unless the machine is busy): it is left "created", like the goroutines
// ahead of it not yet run; those that ran are blocked: all leaked.
func TestNotifyQueuedLast(t *testing.T) {
	runtime.GOMAXPROCS(1)
	block := make(chan bool)
	for i := 0; i < 400; i++ {
		go Prepare(block)
	}
	go Notify(make(chan bool, 1))
}
