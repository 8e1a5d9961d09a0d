// Command leak_busy_loop leaves behind a goroutine that is still computing:
// main starts it, waits until it has begun, and returns. It is left running
// (when another P was free for it) or runnable (preempted to let main stop
// the trace): leaked either way, though it never blocks.
package main

import "sync/atomic"

func main() {
	var started atomic.Bool
	go func() {
		started.Store(true)
		for n := 0; ; n++ {
			_ = n
		}
	}()
	for !started.Load() {
	}
}
