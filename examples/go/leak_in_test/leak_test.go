package leak

import (
	"testing"
	"time"
)

// TestWatch passes and returns while Watch's goroutine is still blocked on
// its channel receive: the test binary exits 0 and the run's status is leak.
func TestWatch(t *testing.T) {
	if got := <-Watch(); got != "started" {
		t.Fatalf("got %q", got)
	}
	// Leave the processor to the watcher so it reaches its receive before
	// the test returns (otherwise it may still be runnable at the end).
	time.Sleep(time.Millisecond)
}
