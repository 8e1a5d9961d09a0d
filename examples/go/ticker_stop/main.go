// Command ticker_stop receives three ticks from a time.Ticker in a
// goroutine, then stops the ticker and reports back.
package main

import "time"

func main() {
	done := make(chan int)
	go func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		ticks := 0
		for range t.C {
			ticks++
			if ticks == 3 {
				break
			}
		}
		done <- ticks
	}()
	if <-done != 3 {
		panic("bad tick count")
	}
}
